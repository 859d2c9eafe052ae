"""A matcher operator's own machinery, apart from the protocol (which the deployment tests
exercise): where its bulk work runs, what leaves an index two slices share, and how the
records of a slice no view matches are let go."""

from __future__ import annotations

import asyncio
import os
import threading

import pytest

from tidings.elastic.coordination.coordinator import ScaleState
from tidings.elastic.operators.matcher import (
    FREE_CHUNK,
    SPLIT_STEP,
    MatcherOperator,
    Slice,
    _MatcherScale,
)
from tidings.elastic.protocol import wire
from tidings.elastic.protocol.channels import Inbox, shared_context
from tidings.elastic.protocol.partition import Selector
from tidings.matching.engine import Event


async def test_a_matchers_background_work_runs_in_a_thread_of_the_lowest_priority() -> None:
    matcher = MatcherOperator("m", None, "tcp://127.0.0.1:*")  # type: ignore[arg-type]
    seen: list[tuple[int, int]] = []

    def work() -> None:
        me = threading.get_native_id()
        seen.append((me, os.getpriority(os.PRIO_PROCESS, me)))

    await matcher._in_background(work)
    await matcher._in_background(work)
    (thread, nice), again = seen
    assert nice == 19 and again == (thread, 19)  # one thread, kept for the next scale
    assert thread != threading.get_native_id()
    await asyncio.to_thread(work)
    assert seen[-1][1] == os.getpriority(os.PRIO_PROCESS, 0)  # the others: as they were
    assert matcher._background is not None
    matcher._background.shutdown()


def records(prefix: str, n: int) -> list[wire.SubscriptionRecord]:
    """Numeric intervals `x` in [i, i + 5), i from 0 (x = 2 falls in the first three)."""
    return [
        wire.SubscriptionRecord(f"{prefix}{i}", "u", [], [("x", ">=", i), ("x", "<", i + 5)])
        for i in range(n)
    ]


def answered(piece: Slice) -> set[str]:
    (answer,) = piece.match_batch([Event((), {"x": 2})])
    return {sid for ids in answer.values() for sid in ids}


def test_a_scale_starting_on_a_shared_index_removes_only_what_no_slice_holds() -> None:
    kept, moved, grown = records("k", 300), records("m", 300), records("g", 300)
    old = Slice(Selector(1, ("a", "b")))
    old.add([*kept, *moved])
    new = Slice(Selector(2, ("a",)), {r.id: r for r in kept}, old.index, {r.id for r in moved})
    old.foreign.update(r.id for r in grown)  # (as `_grow` does: another matcher's share)
    new.add(grown)
    matcher = MatcherOperator("m", None, "tcp://127.0.0.1:*")  # type: ignore[arg-type]
    matcher.slices = {1: old, 2: new}  # a scale failed after `change`: both still held

    matcher._shrink_now()
    assert len(old.index) == 900  # each id is held by one of the two
    assert answered(old) == {"k0", "k1", "k2", "m0", "m1", "m2"}
    assert answered(new) == {"k0", "k1", "k2", "g0", "g1", "g2"}

    del matcher.slices[2]  # the next scale reuses view 2: the old view alone
    matcher._shrink_now()  # what is foreign to it stays, for the next view to carry
    assert len(old.index) == 900 and set(old.foreign) == {r.id for r in grown}
    assert answered(old) == {"k0", "k1", "k2", "m0", "m1", "m2"}


async def test_a_dropped_slices_records_are_freed_a_chunk_per_loop_step() -> None:
    kept, gone = Slice(Selector(2, ("a",))), Slice(Selector(1, ("a",)))
    gone.add(records("g", FREE_CHUNK * 2 + 10))
    matcher = MatcherOperator("m", None, "tcp://127.0.0.1:*")  # type: ignore[arg-type]
    matcher.slices = {1: gone, 2: kept}

    matcher._drop_slices(lambda view: view == 2)
    assert matcher.slices == {2: kept}  # no longer matched, from now on
    assert len(gone.records) == FREE_CHUNK * 2 + 10  # nothing freed inside this step
    await asyncio.sleep(0)
    assert len(gone.records) == FREE_CHUNK + 10
    assert matcher._freeing is not None
    await matcher._freeing
    assert not gone.records and not matcher._dropped and matcher._freeing is None


class CountingSlice(Slice):
    """A slice that notes how many records each `add` brought."""

    def __init__(self, selector: Selector) -> None:
        super().__init__(selector)
        self.adds: list[int] = []

    def add(self, records: list[wire.SubscriptionRecord]) -> None:
        self.adds.append(len(records))
        super().add(records)


async def test_subscriptions_in_a_row_are_added_at_once_and_match_only_what_follows_them() -> None:
    exit_point = Inbox(shared_context(), "tcp://127.0.0.1:*")
    matcher = MatcherOperator("m", None, "tcp://127.0.0.1:*")  # type: ignore[arg-type]
    piece = matcher.slices[0] = CountingSlice(Selector(0, ("m",)))
    matcher._default_exit_points = Selector(0, ("e",))
    matcher.out.know("e", exit_point.address)

    def publish(seq: int) -> wire.Publish:
        return wire.Publish("ap", seq, 0, [], {"x": 2}, b"{}")

    subscribes = [wire.Subscribe("ap", 0, r) for r in records("s", 300)]
    gone = wire.Unsubscribe("ap", 0, "s1")
    await matcher.handle([publish(1), *subscribes, publish(2), gone, *subscribes[:1], publish(3)])

    assert piece.adds == [300, 1]  # (the Unsubscribe between: in order)
    answers: dict[int, dict[str, list[str]]] = {}
    while len(answers) < 3:
        for message in await exit_point.receive():
            assert isinstance(message, wire.Partials)
            answers.update((p.seq, p.matches) for p in message.items)
    assert answers == {1: {}, 2: {"u": ["s0", "s1", "s2"]}, 3: {"u": ["s0", "s2"]}}
    matcher.out.close(linger=0)
    exit_point.close()


class Sending:
    """A matcher of the old view of scale 7 whose frames and `ready` arrivals are noted
    instead of sent."""

    def __init__(self, new: list[str]) -> None:
        self.matcher = MatcherOperator("m", None, "tcp://127.0.0.1:*")  # type: ignore[arg-type]
        self.scale = self.matcher._scale = _MatcherScale(
            ScaleState(7, "matchers", "start", 3, ["m"], new)
        )
        self.frames: list[tuple[str, bytes]] = []
        self.readied: list[int] = []
        self.matcher.out.send_frame = lambda m, f: self.frames.append((m, f))  # type: ignore[method-assign]
        self.matcher._ready = self._ready  # type: ignore[method-assign]

    async def _ready(self, scale: _MatcherScale) -> None:
        self.readied.append(scale.state.id)

    def close(self) -> None:
        self.matcher.out.close(linger=0)


async def test_a_snapshot_is_sent_in_steps_between_the_loops_turns_each_share_in_full() -> None:
    sending = Sending(["a", "b", "c"])
    frames, readied = sending.frames, sending.readied
    snapshot = records("s", 3 * SPLIT_STEP + 100)
    sent_by_turn: list[int] = []

    async def turns() -> None:  # the inbox loop's turns, meanwhile
        while not readied:
            sent_by_turn.append(len(frames))
            await asyncio.sleep(0)

    await asyncio.gather(sending.matcher._send_state(sending.scale, snapshot), turns())

    assert 0 < sent_by_turn[2] < len(frames)  # the first chunks left before the split ended
    assert len(set(sent_by_turn)) >= 3  # sent across the loop's turns, not all at once
    selector = Selector(3, ("a", "b", "c"))
    for member in ["a", "b", "c"]:
        messages = [wire.decode(f) for m, f in frames if m == member]
        assert all(isinstance(m, wire.AddMatcherState) for m in messages)
        assert [m.last for m in messages] == [False] * (len(messages) - 1) + [True]  # type: ignore[union-attr]
        got = [r for m in messages for r in m.records]  # type: ignore[union-attr]
        assert got == [r for r in snapshot if selector.of(r.id) == member]
    assert readied == [7]  # (not in the new view: its part is done)
    sending.close()


async def test_an_empty_share_is_sent_as_one_last_chunk() -> None:
    sending = Sending(["m", "a"])
    shares: dict[str, list[wire.SubscriptionRecord]] = {"m": records("s", 5), "a": []}
    sending.matcher._send_chunks(sending.scale, shares, dict.fromkeys(shares, 0), last=True)
    assert [(m, wire.decode(f)) for m, f in sending.frames] == [
        ("a", wire.AddMatcherState(7, 3, "m", [], True))
    ]
    sending.close()


@pytest.mark.parametrize("subscriptions", [0, 3 * SPLIT_STEP], ids=["no state", "a state"])
async def test_a_scale_that_ends_before_its_state_goes_out_sends_nothing(
    subscriptions: int,
) -> None:
    sending = Sending(["a", "b"])
    task = asyncio.ensure_future(
        sending.matcher._send_state(sending.scale, records("s", subscriptions))
    )
    sending.matcher._end()  # (aborted: the watch's news came before the step ran)
    await task
    assert sending.frames == [] and sending.readied == []
    sending.close()
