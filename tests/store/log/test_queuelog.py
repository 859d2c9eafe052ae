"""The queue log's promises, on every engine (issue #30's layout)."""

from __future__ import annotations

from typing import Any

import pytest
from tests.store.log.conftest import OpenEngine

from tidings.store.log import LogEngine, QueueLog, WriteBatch
from tidings.store.log.codec import decode_refs


def body(i: int) -> bytes:
    return b'{"n":%d}' % i


def publish_each(log: QueueLog, n: int, subscribers: list[str], start: int = 0) -> None:
    for i in range(start, start + n):
        log.publish([(body(i), subscribers)])
    log.commit()


def drain(log: QueueLog, subscriber: str, now: float = 0.0) -> list[bytes]:
    got: list[bytes] = []
    while batch := log.lease(subscriber, 3, 30.0, now):
        log.ack(subscriber, [m.receipt for m in batch])
        log.commit()
        got += [m.body for m in batch]
    return got


def test_each_subscriber_gets_its_publications_first_in_first_out(log: QueueLog) -> None:
    publish_each(log, 5, ["a", "b"])
    publish_each(log, 3, ["b"], start=5)
    assert drain(log, "a") == [body(i) for i in range(5)]
    assert drain(log, "b") == [body(i) for i in range(8)]


def test_a_publication_is_leasable_once_committed(log: QueueLog) -> None:
    log.publish([(body(1), ["a"])])
    assert log.lease("a", 10, 30.0, 0.0) == []
    log.commit()
    assert [m.body for m in log.lease("a", 10, 30.0, 0.0)] == [body(1)]


def test_a_fan_out_stores_its_body_once_and_its_references_as_one_record(
    open_engine: OpenEngine,
) -> None:
    engine = open_engine()
    log = QueueLog(engine)
    subscribers = [f"s{i}" for i in range(100)]
    log.publish([(body(1), subscribers)])
    log.commit()
    assert engine.count_bodies() == 1
    assert engine.count_records() == 1
    (_, _, data), *_ = engine.recover().records
    assert len(decode_refs(data)) == 100
    assert all(log.lease(s, 10, 30.0, 0.0)[0].body == body(1) for s in subscribers)


def test_acks_out_of_order_keep_a_floor_and_a_sparse_set(open_engine: OpenEngine) -> None:
    log = QueueLog(open_engine())
    publish_each(log, 6, ["a"])
    leased = log.lease("a", 6, 30.0, 0.0)
    assert log.ack("a", [leased[0].receipt, leased[2].receipt, leased[4].receipt]) == 3
    log.commit()
    state = log._cursors[log._numbers["a"]].state()
    assert (state.floor, sorted(state.acked)) == (1, [3, 5])
    assert log.ack("a", [leased[1].receipt]) == 1
    log.commit()
    state = log._cursors[log._numbers["a"]].state()
    assert (state.floor, sorted(state.acked)) == (3, [5])
    assert log.depth("a") == 2


def test_a_stale_or_foreign_receipt_acknowledges_nothing(log: QueueLog) -> None:
    publish_each(log, 1, ["a", "b"])
    first = log.lease("a", 1, 1.0, 0.0)
    again = log.lease("a", 1, 1.0, 5.0)  # the first lease expired
    assert again[0].attempt == 2
    assert log.ack("a", [first[0].receipt, "garbage"]) == 0
    assert log.ack("b", [again[0].receipt]) == 0  # b never leased it
    assert log.ack("a", [again[0].receipt]) == 1


def test_an_expired_or_handed_back_lease_comes_again_in_order(log: QueueLog) -> None:
    publish_each(log, 3, ["a"])
    leased = log.lease("a", 2, 10.0, 0.0)
    assert log.nack("a", [leased[1].receipt], now=0.0, delay_s=5.0) == 1
    assert [m.seq for m in log.lease("a", 10, 10.0, 1.0)] == [3]
    assert [(m.seq, m.attempt) for m in log.lease("a", 10, 10.0, 10.5)] == [(1, 2), (2, 2)]


def test_unacknowledged_deliveries_come_again_after_recovery_attempts_counted(
    open_engine: OpenEngine,
) -> None:
    log = QueueLog(open_engine(), segment_bodies=4)
    publish_each(log, 10, ["a", "b"])
    leased = log.lease("a", 4, 30.0, 0.0)
    log.ack("a", [leased[0].receipt, leased[2].receipt])
    log.commit()
    log.lease("b", 1, 30.0, 0.0)  # leased, never committed: its attempt may be lost

    again = QueueLog(open_engine(), segment_bodies=4)
    got = again.lease("a", 100, 30.0, 0.0)
    assert [m.body for m in got] == [body(i) for i in (1, *range(3, 10))]
    assert [m.attempt for m in got[:2]] == [2, 2]  # leased before the crash, counted
    assert [m.attempt for m in got[2:]] == [1] * 6
    assert [m.body for m in again.lease("b", 100, 30.0, 0.0)] == [body(i) for i in range(10)]


def test_acknowledged_deliveries_never_come_again_after_recovery(
    open_engine: OpenEngine,
) -> None:
    log = QueueLog(open_engine(), segment_bodies=4)
    publish_each(log, 10, ["a"])
    assert len(drain(log, "a")) == 10
    publish_each(log, 2, ["a"], start=10)
    again = QueueLog(open_engine(), segment_bodies=4)
    assert drain(again, "a") == [body(10), body(11)]
    third = QueueLog(open_engine(), segment_bodies=4)
    assert third.lease("a", 100, 30.0, 0.0) == []


def test_a_segment_goes_once_every_subscriber_acknowledged_past_it(
    open_engine: OpenEngine,
) -> None:
    engine = open_engine()
    log = QueueLog(engine, segment_bodies=4)
    publish_each(log, 4, ["a", "b"])  # segment 1: bodies 1-4
    publish_each(log, 4, ["a"], start=4)  # segment 2: bodies 5-8
    publish_each(log, 1, ["a"], start=8)  # segment 3, open
    assert drain(log, "a")
    assert engine.count_bodies() == 4 + 1  # b has not acknowledged segment 1; 2 went
    assert log.segments() == 2
    assert len(drain(log, "b")) == 4
    log.commit()
    assert engine.count_bodies() == 1  # only the open segment's body stays
    assert log.segments() == 1
    again = QueueLog(open_engine(), segment_bodies=4)
    publish_each(again, 1, ["a", "b"], start=9)
    assert drain(again, "a") == [body(9)] and drain(again, "b") == [body(9)]


def test_a_segment_filled_within_one_commit_goes_whole(open_engine: OpenEngine) -> None:
    engine = open_engine()
    log = QueueLog(engine, segment_bodies=2)
    publish_each(log, 1, ["a"])
    assert drain(log, "a") == [body(0)]
    log.publish([(body(1), ["a"])])  # fills segment 1, whose first body a is past
    log.publish([(body(2), ["a"])])  # opens segment 2 in the same commit
    log.commit()
    publish_each(log, 2, ["a"], start=3)  # fills segment 2, opens segment 3
    assert drain(log, "a") == [body(i) for i in range(1, 5)]
    log.commit()
    assert engine.count_bodies() == 1  # segment 3's one body: 1 and 2 went whole
    assert engine.count_records() == 1


class FailingOnce:
    """An engine whose next write fails (a full disk, a lost connection)."""

    def __init__(self, engine: LogEngine) -> None:
        self.engine, self.fail = engine, False

    def write(self, batch: WriteBatch) -> None:
        if self.fail:
            self.fail = False
            raise OSError("disk full")
        self.engine.write(batch)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.engine, name)


def test_a_failed_commit_loses_nothing_committed_and_the_log_goes_on(
    open_engine: OpenEngine,
) -> None:
    engine = FailingOnce(open_engine())
    log = QueueLog(engine, segment_bodies=100)
    publish_each(log, 1, ["a"])
    leased = log.lease("a", 1, 30.0, 0.0)
    log.ack("a", [leased[0].receipt])
    log.publish([(body(1), ["a", "b"])])  # b's first publication: its number is new
    engine.fail = True
    with pytest.raises(OSError):
        log.commit()
    publish_each(log, 3, ["b", "a"], start=2)
    again = QueueLog(open_engine(), segment_bodies=100)
    assert drain(again, "a") == [body(i) for i in range(2, 5)]  # the ack was committed late
    assert drain(again, "b") == [body(i) for i in range(2, 5)]
    again.commit()
    assert again.segments() == 1


def names_written(open_engine: OpenEngine) -> dict[int, str]:
    """What the engine holds of names, read by opening it again."""
    return dict(open_engine().recover().names)


def test_a_forgotten_subscriber_leaves_nothing_behind_but_the_highest_number(
    open_engine: OpenEngine,
) -> None:
    log = QueueLog(open_engine(), segment_bodies=4)
    publish_each(log, 3, ["a", "b", "c"])
    assert log.forget("b") == 3 and log.forget("b") is None
    assert log.forget("c") == 3
    log.commit()
    assert log.cursor("b") is None and [name for name, _ in log.queues()] == ["a"]
    assert names_written(open_engine) == {1: "a", 3: ""}  # c's number stays given
    again = QueueLog(open_engine(), segment_bodies=4)
    assert again.number("d") == 4  # never 2 or 3, which kept records still name
    again.commit()
    assert names_written(open_engine) == {1: "a", 4: "d"}  # the tombstone went


def test_a_subscriber_forgotten_and_back_gets_none_of_its_old_queue(
    open_engine: OpenEngine,
) -> None:
    log = QueueLog(open_engine(), segment_bodies=4)
    publish_each(log, 5, ["a", "b"])
    log.forget("b")
    log.commit()
    publish_each(log, 1, ["b"], start=5)  # the same name, a new subscriber
    assert drain(log, "b") == [body(5)]
    again = QueueLog(open_engine(), segment_bodies=4)
    assert drain(again, "b") == []  # not the old five, after a restart either
    assert drain(again, "a") == [body(i) for i in range(5)]
    again.commit()
    assert again.segments() == 1  # the forgotten queue held no segment back


def test_forgetting_before_the_first_commit_writes_only_a_tombstone(
    open_engine: OpenEngine,
) -> None:
    log = QueueLog(open_engine(), segment_bodies=4)
    log.publish([(body(0), ["a"])])
    assert log.forget("a") == 0  # (queued once committed: nothing was)
    log.commit()
    assert names_written(open_engine) == {1: ""}
    again = QueueLog(open_engine(), segment_bodies=4)
    assert again.queues() == [] and again.number("a") == 2


def test_the_recent_bodies_are_read_from_memory_up_to_the_caches_bytes(
    open_engine: OpenEngine,
) -> None:
    engine = open_engine()
    read: list[int] = []
    reading = engine.read_bodies

    def counted(ids: Any) -> dict[int, bytes]:
        read.extend(ids)
        return reading(ids)

    engine.read_bodies = counted  # type: ignore[method-assign]
    entry = len(body(0)) + 128  # a body's bytes and its entry's (`queuelog._ENTRY_BYTES`)
    log = QueueLog(engine, cache_bytes=2 * entry)
    publish_each(log, 5, ["a"])
    assert drain(log, "a") == [body(i) for i in range(5)]
    assert sorted(read) == [1, 2, 3]  # the two newest were in memory
