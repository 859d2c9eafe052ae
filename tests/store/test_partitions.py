"""Several brokers on PostgreSQL, each partition of the queues owned by one
(`layout=log&partitions=N`): publishing anywhere, serving where owned, ownership moving when
a broker goes and coming back when it returns. (The suite of every backend runs over one
store owning every partition: tests/store/conftest.py.)"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator

import psycopg
import pytest
from tests.store.conftest import PG
from tests.store.test_behaviour import T0, lease, msg, subscriber

from tidings.errors import ErrorCode, TidingsError
from tidings.store import check_store_url, open_store
from tidings.store.base import Change
from tidings.store.inbox import partition_of
from tidings.store.log.engine import Stored
from tidings.store.partitions import PartitionedLogStore

WAIT_S = 15.0  # ownership moves within a few ticks (ownership.TICK_S, ADOPT_AFTER_S)


Pair = tuple[PartitionedLogStore, PartitionedLogStore]


@pytest.fixture
def pair(schema: str) -> Iterator[Pair]:
    """Broker `a` preferring partition 0 of 2, `b` partition 1; both closed afterwards."""
    a, b = broker(schema, "0"), broker(schema, "1")
    yield a, b
    a.close(), b.close()


def broker(schema: str, own: str, partitions: int = 2) -> PartitionedLogStore:
    store = open_store(f"{PG}?schema={schema}&layout=log&partitions={partitions}&own={own}")
    assert isinstance(store, PartitionedLogStore)
    return store


def in_partition(p: int, partitions: int = 2) -> str:
    """A subscriber id whose queue is in partition `p`."""
    return next(sid for i in range(1000) if partition_of(sid := f"s{i}", partitions) == p)


def eventually(check: Callable[[], bool]) -> None:
    deadline = time.monotonic() + WAIT_S
    while not check():
        assert time.monotonic() < deadline, "not within the wait"
        time.sleep(0.05)


def test_a_publication_through_one_broker_reaches_the_owner_of_its_subscribers_queue(
    pair: Pair,
) -> None:
    a, b = pair
    first = in_partition(0)
    subscriber(a, first)
    told: list[Change] = []
    heard = threading.Event()
    stop = a.watch(lambda c: (told.append(c), heard.set()))
    try:
        b.enqueue([msg("p1", owner=first), msg("p2", owner=first)], fresh=True)
        assert heard.wait(WAIT_S)  # its owner takes it in and says so, unasked
        assert any(c.kind == "queued" and first in c.subscriber_ids for c in told)
    finally:
        stop()
    assert [m.publication_id for m in lease(a, owner=first)] == ["p1", "p2"]


def test_a_subscribers_queue_is_served_only_by_its_owner(pair: Pair) -> None:
    a, b = pair
    first = in_partition(0)
    subscriber(a, first)
    a.enqueue([msg("p1", owner=first)], fresh=True)
    with pytest.raises(TidingsError) as refused:
        lease(b, owner=first)
    assert refused.value.code == ErrorCode.UNAVAILABLE and refused.value.status == 503
    eventually(lambda: b.depth(first, T0).ready == 1)  # as its owner last told
    assert b.queue_size(first) == a.queue_size(first)
    assert b.may_lease(first, T0)  # (the lease itself says where the queue is)
    assert [m.publication_id for m in lease(a, owner=first)] == ["p1"]
    assert (a.owned(), b.owned()) == ({0}, {1})


def test_each_broker_counts_the_queues_it_owns_and_their_sum_is_the_stores(pair: Pair) -> None:
    a, b = pair
    first, second = in_partition(0), in_partition(1)
    subscriber(a, first), subscriber(a, second)
    b.enqueue([msg("p1", owner=first), msg("p2", owner=second)], fresh=True)
    b.enqueue([msg("p3", owner=second)], fresh=True)
    eventually(lambda: a.depth(first, T0).ready == 1)  # (a hears of b's publication by a note)
    [one] = lease(a, owner=first)
    assert a.reject(first, one.receipt, "bad", T0)  # a dead letter of a's queue
    totals = [s.queue_totals(T0)[0] for s in (a, b)]
    assert [(t.ready, t.leased, t.dead) for t in totals] == [(0, 0, 1), (2, 0, 0)]


def test_a_checked_delivery_published_twice_through_two_brokers_is_queued_once(pair: Pair) -> None:
    a, b = pair
    first = in_partition(0)
    subscriber(a, first)
    assert b.enqueue([msg("p1", owner=first)]) == 1
    assert a.enqueue([msg("p1", owner=first)]) == 0
    assert [m.publication_id for m in lease(a, owner=first)] == ["p1"]


def test_a_publishers_order_holds_across_brokers(pair: Pair) -> None:
    """The first publication goes through another broker (its owner's inbox), the second
    straight into the owner's log: the second's transaction takes the first in before it."""
    a, b = pair
    first = in_partition(0)
    subscriber(a, first)
    for n in range(5):
        b.enqueue([msg(f"p{n}a", owner=first)], fresh=True)
        a.enqueue([msg(f"p{n}b", owner=first)], fresh=True)
    assert [m.publication_id for m in lease(a, owner=first)] == [
        f"p{n}{x}" for n in range(5) for x in "ab"
    ]


def test_a_partition_whose_owner_died_is_adopted_with_its_queue_and_attempts(pair: Pair) -> None:
    a, b = pair
    first = in_partition(0)
    subscriber(a, first)
    a.enqueue([msg("p1", owner=first)], fresh=True)
    [held] = lease(a, owner=first)  # leased when its broker dies
    a.ownership.stop_looking()  # dead: it looks at ownership no more,
    _end_sessions_of(a)  # and PostgreSQL drops its sessions, and their locks
    eventually(lambda: 0 in b.owned())
    [again] = lease(b, owner=first)
    assert (again.publication_id, again.attempt) == ("p1", held.attempt + 1)
    assert b.ack(first, [held.receipt]).acked == []  # the dead broker's receipt
    assert b.ack(first, [again.receipt]).acked == [again.receipt]


def test_a_broker_whose_partitions_session_was_cut_owns_it_again_alone(pair: Pair) -> None:
    """Its session ended under it (a proxy, a restarted server): the partition is dropped,
    taken again through a new session, and publishing through the broker works again."""
    a, b = pair
    first = in_partition(0)
    subscriber(a, first)
    a.enqueue([msg("p1", owner=first)], fresh=True)
    cut = a.ownership.parts[0]
    with psycopg.connect(PG, autocommit=True) as conn:
        conn.execute("SELECT pg_terminate_backend(%s)", (cut.backend_pid,))
    eventually(lambda: 0 in a.ownership.parts and a.ownership.parts[0] is not cut)
    assert (a.owned(), b.owned()) == ({0}, {1})
    a.enqueue([msg("p2", owner=first)], fresh=True)
    assert [m.publication_id for m in lease(a, owner=first)] == ["p1", "p2"]


def test_an_adopted_partition_goes_back_to_the_broker_preferring_it(schema: str) -> None:
    a, b = broker(schema, "0"), broker(schema, "1")
    first = in_partition(0)
    subscriber(a, first)
    a.enqueue([msg("p1", owner=first)], fresh=True)
    a.close()
    try:
        eventually(lambda: b.owned() == {0, 1})
        back = broker(schema, "0")
        try:
            eventually(lambda: back.owned() == {0} and b.owned() == {1})
            assert [m.publication_id for m in lease(back, owner=first)] == ["p1"]
        finally:
            back.close()
    finally:
        b.close()


def test_brokers_naming_no_partitions_of_their_own_share_them_fairly(schema: str) -> None:
    """Without `own=`: the first broker owns every partition; a second takes half as the
    first hands them on; when it goes, the first takes them all again."""
    url = f"{PG}?schema={schema}&layout=log&partitions=4"
    first = open_store(url)
    assert isinstance(first, PartitionedLogStore)
    try:
        assert first.owned() == {0, 1, 2, 3}
        second = open_store(url)
        assert isinstance(second, PartitionedLogStore)
        try:
            eventually(lambda: len(first.owned()) == len(second.owned()) == 2)
            assert first.owned() | second.owned() == {0, 1, 2, 3}
        finally:
            second.close()
        eventually(lambda: first.owned() == {0, 1, 2, 3})
    finally:
        first.close()


def test_a_broker_naming_another_count_of_partitions_is_refused(schema: str) -> None:
    broker(schema, "0", partitions=2).close()
    with pytest.raises(TidingsError) as refused:
        broker(schema, "0", partitions=3)
    assert (refused.value.code, refused.value.field) == (ErrorCode.CONFIG_INVALID, "store_url")


@pytest.mark.parametrize(
    "url",
    [
        "sqlite:///x.db?partitions=2",
        f"{PG}?partitions=2",  # the rows layout
        f"{PG}?layout=log&partitions=0",
        f"{PG}?layout=log&partitions=two",
        f"{PG}?layout=log&partitions=2&own=2",
        f"{PG}?layout=log&partitions=2&own=0,x",
    ],
)
def test_a_wrong_partitioning_is_a_config_error_on_the_store_url(url: str) -> None:
    with pytest.raises(TidingsError) as refused:
        check_store_url(url)
    assert (refused.value.code, refused.value.field) == (ErrorCode.CONFIG_INVALID, "store_url")


def _end_sessions_of(store: PartitionedLogStore) -> None:
    """End the store's sessions from outside, as PostgreSQL does a killed process's."""
    pids = [part.backend_pid for part in store.ownership.parts.values()]
    pids.append(store.ownership.control_pid)
    with psycopg.connect(PG, autocommit=True) as conn:
        for pid in pids:
            conn.execute("SELECT pg_terminate_backend(%s)", (pid,))


def test_an_owner_whose_reload_failed_tells_no_empty_depths(
    pair: Pair, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another broker answers a queue's depth as its owner last told it: an owner whose
    memory could not be read again after a failed transaction reads it before telling, and
    tells nothing of that partition while it cannot (not what was left of it), the others'
    depths told all the same."""
    a, b = pair
    first = in_partition(0)
    subscriber(a, first)
    a.enqueue([msg("p1", owner=first), msg("p2", owner=first)], fresh=True)
    eventually(lambda: b.depth(first, T0).ready == 2)
    [queues] = [s.queues for s in a.partition_stores()]

    recover = queues.log.engine.recover

    def halfway() -> Stored:  # its queues named, then the store gone before their records
        stored = recover()

        def records() -> Iterator[tuple[int, int, bytes]]:
            raise OSError("the store went away")
            yield from stored.records

        return Stored(stored.names, stored.states, records())

    monkeypatch.setattr(queues.log.engine, "recover", halfway)
    with pytest.raises(OSError):
        queues.reload()
    a._tell_depths()
    time.sleep(1.0)  # (ownership's ticks tell depths meanwhile, as this one did)
    assert b.depth(first, T0).ready == 2 and not queues.loaded
    monkeypatch.undo()
    a._tell_depths()
    assert b.depth(first, T0).ready == 2 and a.depth(first, T0).ready == 2
