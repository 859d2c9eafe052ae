"""An exit point's merge of the matchers' answers, and its commits into a real store: a
fan-out per publication, as the broker commits its own."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

from tidings.elastic.coordination.records import ClusterConfig, ScaleState, View
from tidings.elastic.operators.exit_point import ExitPointOperator, StoreSink, _merged
from tidings.elastic.protocol import wire
from tidings.store.base import Fanout
from tidings.store.sqlite import SQLiteStore


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SQLiteStore]:
    opened = SQLiteStore(str(tmp_path / "queues.db"))
    try:
        yield opened
    finally:
        opened.close()


def fanout(pub: str, owners: dict[str, list[str]]) -> Fanout:
    return Fanout(pub, pub, b'{"id": "%s"}' % pub.encode(), 1.0, owners)


def queue(store: SQLiteStore, subscriber: str) -> list[tuple[str, tuple[str, ...]]]:
    leased = store.lease(subscriber, 100, 60.0, 10, now=time.time())
    return [(m.publication_id, m.subscription_ids) for m in leased]


def test_the_first_answer_is_taken_as_it_is() -> None:
    answer = {"alice": ["s1"], "bob": ["s2"]}
    assert _merged({}, answer) is answer


def test_a_subscriber_matched_on_two_matchers_gets_the_ids_of_both_in_order() -> None:
    merged = _merged({"alice": ["s9"], "bob": ["s2"]}, {"alice": ["s3"], "carol": ["s4"]})
    assert merged == {"alice": ["s3", "s9"], "bob": ["s2"], "carol": ["s4"]}


def test_fresh_fan_outs_become_a_queued_message_per_subscriber(store: SQLiteStore) -> None:
    told: list[Sequence[Fanout]] = []
    sink = StoreSink(store, told.append)
    fanouts = [fanout("p1", {"alice": ["s1", "s2"], "bob": ["s3"]}), fanout("p2", {"bob": ["s3"]})]
    asyncio.run(sink.deliver(fanouts))
    assert queue(store, "alice") == [("p1", ("s1", "s2"))]
    assert queue(store, "bob") == [("p1", ("s3",)), ("p2", ("s3",))]
    assert told == [fanouts]


def test_fan_outs_sent_again_are_enqueued_only_where_they_are_missing(
    store: SQLiteStore,
) -> None:
    sink = StoreSink(store)
    asyncio.run(sink.deliver([fanout("p1", {"alice": ["s1"]})]))
    asyncio.run(sink.deliver([fanout("p1", {"alice": ["s1"], "bob": ["s2"]})], fresh=False))
    assert queue(store, "alice") == [("p1", ("s1",))]
    assert queue(store, "bob") == [("p1", ("s2",))]


def test_a_fresh_commit_the_store_refuses_raises_and_enqueues_nothing(
    store: SQLiteStore,
) -> None:
    sink = StoreSink(store)
    asyncio.run(sink.deliver([fanout("p1", {"alice": ["s1"]})]))
    with pytest.raises(Exception, match="UNIQUE"):  # p1's body is there: not fresh
        asyncio.run(sink.deliver([fanout("p1", {"bob": ["s2"]})]))
    assert queue(store, "bob") == []


class RecordingSink:
    def __init__(self) -> None:
        self.fanouts: list[Fanout] = []

    async def deliver(self, fanouts: Sequence[Fanout], fresh: bool = True) -> None:
        self.fanouts.extend(fanouts)


class SlowCoordinator:
    """A matcher scale 1 -> 2 whose state ZooKeeper gives only when `answer` is set."""

    def __init__(self) -> None:
        self.answer = asyncio.Event()
        self.arrivals: list[tuple[int, str, str]] = []

    async def scale(self) -> ScaleState:
        await self.answer.wait()
        return ScaleState(2, "matchers", "change", 2, ["m"], ["m", "n"])

    async def require_config(self) -> ClusterConfig:
        return ClusterConfig(View(1, ["m"]), View(1, ["e"]), ["ap"])

    async def arrive(self, scale: int, barrier: str, member: str, data: bytes = b"") -> None:
        self.arrivals.append((scale, barrier, member))


async def test_partials_behind_a_matcher_change_marker_are_released_while_zookeeper_answers() -> (
    None
):
    coordinator, sink = SlowCoordinator(), RecordingSink()
    ep = ExitPointOperator("e", coordinator, "tcp://127.0.0.1:*", sink)  # type: ignore[arg-type]

    async def unreachable(ap: str) -> bool:
        return False

    ep._reachable = unreachable  # type: ignore[method-assign]
    body = b'{"id": "p0", "published_at": 1.0}'
    marker = wire.ChangeMatcherOnExitPoint("ap", 2, 2, "m", 0)
    behind = wire.Partials("m", [wire.Partial("ap", 0, 1, {"u": ["s1"]}, body)])

    await asyncio.wait_for(ep.handle([marker, behind]), 5)
    assert [(f.publication_id, f.owners) for f in sink.fanouts] == [("p0", {"u": ["s1"]})]
    assert coordinator.arrivals == []  # the check still waits for ZooKeeper

    coordinator.answer.set()
    for _ in range(100):
        if coordinator.arrivals:
            break
        await asyncio.sleep(0.01)
    assert coordinator.arrivals == [(2, "changed", "e")]  # every old matcher's marker came
    ep.out.close(linger=0)
