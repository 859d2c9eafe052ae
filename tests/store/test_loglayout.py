"""What the log layout (`?layout=log`) promises beyond the behaviour suite it passes with the
other backends, on SQLite and on PostgreSQL: one owner, a restart that keeps every
unacknowledged delivery (a held lease ready again, its attempt counted, its receipt refused),
segments that go once acknowledged, and a publication's progress without a row per
delivery."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.store.conftest import PG
from tests.store.test_behaviour import T0, lease, msg, subscriber

from tidings.errors import ErrorCode, TidingsError
from tidings.store import open_store
from tidings.store.base import Enqueue, Fanout, QueueDepth, encode_body
from tidings.store.loglayout import LogLayout, SQLiteLogStore
from tidings.store.pglog import PostgresLogStore


class Place:
    """Where a test's store lives (a SQLite file, a PostgreSQL schema), opened again and
    again as a restart would; what is left open is closed after the test."""

    def __init__(self, base: str) -> None:
        self.base, self.opened = base, list[LogLayout]()

    def url(self, layout: str) -> str:
        return f"{self.base}{'&' if '?' in self.base else '?'}layout={layout}"

    def open(self, segment_bodies: int = 4096) -> LogLayout:
        store: LogLayout
        if self.base.startswith("sqlite"):
            path = self.base.removeprefix("sqlite:///")
            store = SQLiteLogStore(path, segment_bodies=segment_bodies)
        else:
            store = PostgresLogStore(self.base, segment_bodies=segment_bodies)
        self.opened.append(store)
        return store


@pytest.fixture(params=["sqlite", "postgres"])
def place(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Place]:
    if request.param == "sqlite":
        found = Place(f"sqlite:///{tmp_path}/t.db")
    else:  # (the `schema` fixture drops it after this one has closed the stores)
        found = Place(f"{PG}?schema={request.getfixturevalue('schema')}")
    yield found
    for store in found.opened:
        store.close()


def test_a_second_opener_of_a_log_store_is_refused_while_the_first_holds_it(
    place: Place,
) -> None:
    first = place.open()
    with pytest.raises(TidingsError) as refused:
        place.open()
    assert refused.value.code == ErrorCode.CONFIG_INVALID
    assert refused.value.field == "store_url" and "one process owns" in str(refused.value)
    first.close()
    place.open().close()  # free again once closed


def test_an_unknown_layout_is_a_configuration_error(place: Place) -> None:
    with pytest.raises(TidingsError) as refused:
        open_store(place.url("columns"))
    assert refused.value.code == ErrorCode.CONFIG_INVALID
    store = open_store(place.url("log"))
    assert isinstance(store, LogLayout)
    store.close()


def test_a_restart_keeps_what_was_not_acknowledged_and_counts_a_held_lease(place: Place) -> None:
    store = place.open()
    subscriber(store)
    store.enqueue([msg("p1"), msg("p2"), msg("p3")], fresh=True)
    first, held = lease(store, n=2)
    assert store.ack("s1", [first.receipt]).acked == [first.receipt]
    store.close()

    again = place.open()
    got = lease(again)
    assert [(m.publication_id, m.attempt) for m in got] == [("p2", 2), ("p3", 1)]
    assert got[0].subscription_ids == ("sub1",) and got[0].body == {"id": "p2"}
    assert again.ack("s1", [held.receipt]).unknown == [held.receipt]  # from before: refused
    assert again.ack("s1", [m.receipt for m in got]).unknown == []
    assert again.depth("s1", T0) == QueueDepth(0, 0, 0)
    again.close()


def test_a_segment_s_bodies_go_once_every_subscriber_acknowledged_past_it(place: Place) -> None:
    store = place.open(segment_bodies=2)
    subscriber(store, "s1"), subscriber(store, "s2")
    for i in range(5):  # one body each, shared by both queues
        store.enqueue([msg(f"p{i}", owner="s1"), msg(f"p{i}", owner="s2")], fresh=True)
    engine = store.queues.log.engine
    assert engine.count_bodies() == 5
    for sid in ("s1", "s2"):
        store.ack(sid, [m.receipt for m in lease(store, owner=sid)])
    store.enqueue([msg("p5")], fresh=True)  # a commit after the acks drops what they freed
    assert engine.count_bodies() <= 2  # the open segment's, at most


def test_a_fan_out_is_one_body_one_record_and_its_progress_counts_every_recipient(
    place: Place,
) -> None:
    store = place.open()
    owners = {f"s{i}": ["x"] for i in range(100)}
    for sid in owners:
        subscriber(store, sid)
    body = encode_body({"id": "p1"})
    assert store.apply([Enqueue([], True, [Fanout("p1", "p1", body, T0, owners)])]) == [100]
    engine = store.queues.log.engine
    assert (engine.count_bodies(), engine.count_records()) == (1, 1)
    assert store.publication_progress("p1") == (False, 100)
    # its recipients are remembered: a checked enqueue of it to one of them adds nothing
    assert store.enqueue([msg("p1", owner="s7"), msg("p1", owner="nobody-yet")]) == 1
    store.close()


def test_a_writer_beside_the_owner_enqueues_as_rows_and_the_owner_takes_them_in(
    place: Place,
) -> None:
    owner = place.open()
    subscriber(owner, "s1"), subscriber(owner, "s2")
    body = encode_body({"id": "p1"})
    owner.apply([Enqueue([], True, [Fanout("p1", "p1", body, T0, {"s1": ["sub1"]})])])
    writer = open_store(place.url("log"), writer=True)
    assert not isinstance(writer, LogLayout)  # rows, beside the log's owner
    # the pipeline replays p1 (s1 has it already) and matches p2 for both
    added = writer.enqueue([msg("p1", owner="s1"), msg("p2", owner="s1"), msg("p2", owner="s2")])
    assert added == 3  # the writer cannot see the log: the owner drops the repeat
    writer.close()
    assert [m.publication_id for m in lease(owner, owner="s1")] == ["p1", "p2"]
    assert [m.publication_id for m in lease(owner, owner="s2")] == ["p2"]
    assert owner.queue_size("s1")[0] == 2
    owner.close()


def test_a_database_of_rows_opened_as_a_log_keeps_every_message_and_its_attempts(
    place: Place,
) -> None:
    rows = open_store(place.url("rows"))
    subscriber(rows)
    rows.enqueue([msg("p1"), msg("p2")], fresh=True)
    assert len(rows.lease("s1", 1, 0.0, 5, T0)) == 1  # leased once, ran out at once
    rows.close()

    log = place.open()  # an upgrade: the default layout is the log
    got = log.lease("s1", 10, 30.0, 1, T0 + 1)  # one attempt each, at most
    assert [(m.publication_id, m.attempt) for m in got] == [("p2", 1)]
    [letter] = log.dead_letters("s1")  # p1's attempt was counted from its row
    assert (letter.publication_id, letter.attempt, letter.reason) == ("p1", 1, "max_attempts")
    assert log.enqueue([msg("p2")]) == 0  # its dedup key came along
    assert log.ack("s1", [got[0].receipt]).acked == [got[0].receipt]
    log.close()


def test_a_removed_subscriber_s_queue_name_and_state_go_with_it(place: Place) -> None:
    store = place.open()
    for sid in ("s1", "s2", "s3"):
        subscriber(store, sid)
        store.enqueue([msg(f"{sid}-p", owner=sid)], fresh=True)
    assert store.remove_subscriber("s2") and store.remove_subscriber("s3")
    assert [name for name, _ in store.queues.log.queues()] == ["s1"]
    with store.db.read() as cur:
        cur.execute("SELECT number, name FROM log_names ORDER BY number")
        assert cur.fetchall() == [(1, "s1"), (3, "")]  # the highest number stays given
        cur.execute("SELECT number FROM log_states")
        assert {r[0] for r in cur.fetchall()} <= {1, 3}
    store.close()

    again = place.open()
    subscriber(again, "s2")  # the same id, a new subscriber: none of the old queue
    assert lease(again, owner="s2") == []
    assert [m.publication_id for m in lease(again)] == ["s1-p"]
    again.close()


def test_a_restart_after_an_out_of_order_ack_counts_the_queue_right(place: Place) -> None:
    store = place.open()
    subscriber(store)
    store.enqueue([msg("p1"), msg("p2"), msg("p3")], fresh=True)
    got = lease(store)
    assert store.ack("s1", [got[1].receipt]).unknown == []  # p2: above the floor
    size = store.queue_size("s1")
    store.close()

    again = place.open()
    assert again.depth("s1", T0) == QueueDepth(2, 0, 0)
    assert again.queue_size("s1") == size == (2, 2 * len(encode_body({"id": "p1"})))
    got = lease(again)
    assert [m.publication_id for m in got] == ["p1", "p3"]
    assert again.ack("s1", [m.receipt for m in got]).unknown == []
    assert again.depth("s1", T0) == QueueDepth(0, 0, 0) and again.queue_size("s1") == (0, 0)


def test_may_lease_says_from_memory_when_a_queue_has_nothing_ready(place: Place) -> None:
    store = place.open()
    subscriber(store)
    assert store.may_lease("s1", T0)  # no queue in memory yet: only a lease tells
    store.enqueue([msg("p1")])
    assert store.may_lease("s1", T0)
    [leased] = lease(store, now=T0)  # visible again after 30 s
    assert not store.may_lease("s1", T0 + 29)
    assert store.may_lease("s1", T0 + 30)
    store.nack("s1", [leased.receipt], T0, delay_s=5)
    assert not store.may_lease("s1", T0 + 4)
    assert store.may_lease("s1", T0 + 5)
    store.ack("s1", [lease(store, now=T0 + 5)[0].receipt])
    assert not store.may_lease("s1", T0 + 6)
    # past the acknowledged lease's end, its stale timeout says maybe until a lease clears it
    assert lease(store, now=T0 + 100) == [] and not store.may_lease("s1", T0 + 100)


def test_may_lease_does_not_wait_for_a_commit_and_then_says_maybe(place: Place) -> None:
    store = place.open()
    subscriber(store)
    with store.queues.log.lock:  # held by "another thread", as a commit holds it
        done = threading.Event()
        answer: list[bool] = []
        threading.Thread(
            target=lambda: (answer.append(store.may_lease("s1", T0)), done.set())
        ).start()
        assert done.wait(5) and answer == [True]


def test_a_reload_that_failed_is_done_again_before_the_next_operation(
    place: Place, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A transaction failed, and reading the log after it failed too (the store went away
    for a moment): nothing runs on what memory was left holding until the log is read."""
    store = place.open()
    subscriber(store, "s1")
    store.enqueue([msg("p1")], fresh=True)

    def gone() -> None:
        raise OSError("the store went away")

    monkeypatch.setattr(store.queues.log.engine, "recover", gone)
    with pytest.raises(OSError):
        store.queues.reload()
    monkeypatch.undo()
    subscriber(store, "s2")
    store.enqueue([msg("p2", owner="s2")], fresh=True)
    assert [m.publication_id for m in lease(store)] == ["p1"]
    assert [m.publication_id for m in lease(store, owner="s2")] == ["p2"]
    with store.db.read() as cur:
        cur.execute("SELECT number, name FROM log_names ORDER BY number")
        assert cur.fetchall() == [(1, "s1"), (2, "s2")]


def test_reads_after_a_reload_that_failed_answer_from_what_was_committed(
    place: Place, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A queue's depth, size, page and the queues' totals read memory outside a
    transaction: after a reload failed, they read the log first instead of answering from
    what was left (every queue empty); a purge empties the queue that was committed."""
    store = place.open()
    subscriber(store, "s1")
    store.enqueue([msg("p1"), msg("p2")], fresh=True)

    def gone() -> None:
        raise OSError("the store went away")

    monkeypatch.setattr(store.queues.log.engine, "recover", gone)
    with pytest.raises(OSError):
        store.queues.reload()
    assert store.may_lease("s1", T0)  # (the lease's transaction reads the log first)
    with pytest.raises(OSError):
        store.depth("s1", T0)  # the store still gone: an error, not an empty queue
    monkeypatch.undo()
    assert store.depth("s1", T0) == QueueDepth(2, 0, 0)
    assert store.queue_size("s1")[0] == 2
    assert store.queue_totals(T0)[0] == QueueDepth(2, 0, 0)
    assert [m.publication_id for m in store.browse("s1", 0, 10, T0)] == ["p1", "p2"]
    with pytest.raises(OSError):
        monkeypatch.setattr(store.queues.log.engine, "recover", gone)
        store.queues.reload()
    monkeypatch.undo()
    assert store.purge("s1", T0) == 2
    assert store.depth("s1", T0) == QueueDepth(0, 0, 0) and lease(store) == []
