"""A matcher operator's own machinery, apart from the protocol (which the deployment tests
exercise): what leaves an index two slices share, how the records of a slice no view matches
are let go, and how subscriptions in a row are added."""

from __future__ import annotations

import asyncio

from tidings.elastic.operators.matcher import FREE_CHUNK, MatcherOperator
from tidings.elastic.operators.slices import Slice
from tidings.elastic.protocol import wire
from tidings.elastic.protocol.channels import Inbox, shared_context
from tidings.elastic.protocol.partition import Selector
from tidings.matching.engine import Event


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

    matcher.shrink_now()
    assert len(old.index) == 900  # each id is held by one of the two
    assert answered(old) == {"k0", "k1", "k2", "m0", "m1", "m2"}
    assert answered(new) == {"k0", "k1", "k2", "g0", "g1", "g2"}

    del matcher.slices[2]  # the next scale reuses view 2: the old view alone
    matcher.shrink_now()  # what is foreign to it stays, for the next view to carry
    assert len(old.index) == 900 and set(old.foreign) == {r.id for r in grown}
    assert answered(old) == {"k0", "k1", "k2", "m0", "m1", "m2"}


async def test_a_dropped_slices_records_are_freed_a_chunk_per_loop_step() -> None:
    kept, gone = Slice(Selector(2, ("a",))), Slice(Selector(1, ("a",)))
    gone.add(records("g", FREE_CHUNK * 2 + 10))
    matcher = MatcherOperator("m", None, "tcp://127.0.0.1:*")  # type: ignore[arg-type]
    matcher.slices = {1: gone, 2: kept}

    matcher.drop_slices(lambda view: view == 2)
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
