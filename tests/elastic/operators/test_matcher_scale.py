"""A matcher's part in a scale, apart from the protocol (which the deployment tests
exercise): where its bulk work runs, and how an old matcher's snapshot goes out."""

from __future__ import annotations

import asyncio
import os
import threading

import pytest
from tests.elastic.operators.test_matcher import records

from tidings.elastic.coordination.records import ScaleState
from tidings.elastic.operators.matcher import MatcherOperator
from tidings.elastic.operators.matcher_scale import SPLIT_STEP, ScaleProgress
from tidings.elastic.protocol import wire
from tidings.elastic.protocol.partition import Selector


async def test_a_matchers_background_work_runs_in_a_thread_of_the_lowest_priority() -> None:
    matcher = MatcherOperator("m", None, "tcp://127.0.0.1:*")  # type: ignore[arg-type]
    seen: list[tuple[int, int]] = []

    def work() -> None:
        me = threading.get_native_id()
        seen.append((me, os.getpriority(os.PRIO_PROCESS, me)))

    await matcher.scaling._in_background(work)
    await matcher.scaling._in_background(work)
    (thread, nice), again = seen
    assert nice == 19 and again == (thread, 19)  # one thread, kept for the next scale
    assert thread != threading.get_native_id()
    await asyncio.to_thread(work)
    assert seen[-1][1] == os.getpriority(os.PRIO_PROCESS, 0)  # the others: as they were
    assert matcher.scaling._background is not None
    matcher.scaling._background.shutdown()


class Sending:
    """A matcher of the old view of scale 7 whose frames and `ready` arrivals are noted
    instead of sent."""

    def __init__(self, new: list[str]) -> None:
        self.matcher = MatcherOperator("m", None, "tcp://127.0.0.1:*")  # type: ignore[arg-type]
        self.scaling = self.matcher.scaling
        self.scale = self.scaling.current = ScaleProgress(
            ScaleState(7, "matchers", "start", 3, ["m"], new)
        )
        self.frames: list[tuple[str, bytes]] = []
        self.readied: list[int] = []
        self.matcher.out.send_frame = lambda m, f: self.frames.append((m, f))  # type: ignore[method-assign]
        self.scaling._ready = self._ready  # type: ignore[method-assign]

    async def _ready(self, scale: ScaleProgress) -> None:
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

    await asyncio.gather(sending.scaling._send_state(sending.scale, snapshot), turns())

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
    sending.scaling._send_chunks(sending.scale, shares, dict.fromkeys(shares, 0), last=True)
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
        sending.scaling._send_state(sending.scale, records("s", subscriptions))
    )
    sending.scaling._end()  # (aborted: the watch's news came before the step ran)
    await task
    assert sending.frames == [] and sending.readied == []
    sending.close()
