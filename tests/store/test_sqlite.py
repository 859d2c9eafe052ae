"""What only the SQLite file backend promises: state survives closing and reopening."""

from __future__ import annotations

import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from tests.store.conftest import sql_of

from tidings.errors import ErrorCode, TidingsError
from tidings.model import Subscriber
from tidings.store import open_store
from tidings.store.base import Enqueue, Lease, NewMessage, QueueOp, encode_body


def test_a_reopened_file_keeps_subscribers_and_queued_messages(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/deep/dir/t.db"
    first = open_store(url)
    first.add_subscriber(Subscriber("s1", "h", 1.0))
    first.enqueue([NewMessage("s1", "p1", "p1", ("x",), encode_body({"a": 1}), 1.0)])
    first.close()
    second = open_store(url)
    assert second.get_subscriber("s1") is not None
    assert [m.body for m in second.lease("s1", 5, 30, 5, 2.0)] == [{"a": 1}]
    second.close()


@pytest.mark.parametrize("url", ["mysql://x", "sqlite:///x.db?synchronous=sometimes", "nope"])
def test_an_unusable_store_url_is_a_configuration_error(url: str) -> None:
    with pytest.raises(TidingsError) as caught:
        open_store(url)
    assert (caught.value.code, caught.value.field) == (ErrorCode.CONFIG_INVALID, "store_url")


def test_a_read_does_not_wait_for_a_writer_holding_its_transaction(tmp_path: Path) -> None:
    store = open_store(f"sqlite:///{tmp_path}/t.db?layout=rows")  # (the log reads memory)
    store.add_subscriber(Subscriber("s1", "h", 1.0))
    writer = sqlite3.connect(tmp_path / "t.db", isolation_level=None)
    writer.execute("BEGIN IMMEDIATE")  # another writer, holding its transaction open
    writer.execute(
        "INSERT INTO messages (subscriber_id, publication_id, subscription_ids, body_key, "
        "enqueued_at) VALUES ('s1', 'p1', '[]', 'p1', 1.0)"
    )
    seen_meanwhile = store.depth("s1", 2.0).ready  # a writer-locked read would block here
    writer.execute("COMMIT")
    writer.close()
    assert (seen_meanwhile, store.depth("s1", 2.0).ready) == (0, 1)
    store.close()


def test_closing_waits_for_a_read_under_way_in_another_thread(tmp_path: Path) -> None:
    store = open_store(f"sqlite:///{tmp_path}/t.db")
    store.add_subscriber(Subscriber("s1", "h", 1.0))
    reading, release = threading.Event(), threading.Event()
    seen: list[int] = []

    def read() -> None:
        with sql_of(store).db.read() as cur:
            reading.set()
            release.wait(10)
            cur.execute("SELECT COUNT(*) FROM subscribers")
            seen.append(cur.fetchone()[0])

    reader = threading.Thread(target=read)
    reader.start()
    assert reading.wait(10)
    closer = threading.Thread(target=store.close)
    closer.start()
    closer.join(0.3)
    assert closer.is_alive()  # not while the other thread reads
    release.set()
    reader.join(10)
    closer.join(10)
    assert seen == [1] and not closer.is_alive()
    with pytest.raises(sqlite3.ProgrammingError):
        store.depth("s1", 2.0)  # closed: an error, not a crash


def _one_message(store_url: str) -> tuple[Any, list[QueueOp]]:
    store = open_store(store_url)
    store.add_subscriber(Subscriber("s1", "h", 1.0))
    msg = NewMessage("s1", "p1", "p1", ("x",), encode_body({"a": 1}), 1.0)
    return store, [Enqueue([msg])]


def test_apply_now_runs_nothing_while_another_process_writes(tmp_path: Path) -> None:
    store, ops = _one_message(f"sqlite:///{tmp_path}/t.db")
    other = sqlite3.connect(tmp_path / "t.db", isolation_level=None)  # as another process
    other.execute("BEGIN IMMEDIATE")
    started = time.monotonic()
    assert store.apply_now(ops) is None
    assert time.monotonic() - started < 5  # refused at once, not after the busy timeout (10 s)
    other.execute("ROLLBACK")
    other.close()
    assert store.depth("s1", 1.0).ready == 0  # nothing ran
    assert store.apply_now(ops) == [1]  # and the same batch runs once the lock is free
    store.close()


@pytest.mark.parametrize("held", ["transaction", "log"])
def test_apply_now_runs_nothing_while_another_thread_is_in_the_store(
    tmp_path: Path, held: str
) -> None:
    store, ops = _one_message(f"sqlite:///{tmp_path}/t.db")
    inside, leave = threading.Event(), threading.Event()

    def hold() -> None:
        lock = sql_of(store).db.tx() if held == "transaction" else store.queues.log.lock
        with lock:  # a worker thread's transaction, or its read of the queues' memory
            inside.set()
            leave.wait(10)

    holder = threading.Thread(target=hold)
    holder.start()
    assert inside.wait(5)
    try:
        assert store.apply_now(ops) is None
    finally:
        leave.set()
        holder.join()
    assert store.apply_now(ops) == [1]
    store.close()


def test_apply_now_leaves_another_process_rows_to_a_worker_thread(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/t.db"
    store, ops = _one_message(url)
    assert store.apply(ops) == [1]  # the first transaction looks for writers' rows
    assert store.apply_now([Lease("s1", 10, 30.0, 5, 1.0)]) is not None  # none: at once
    writer = open_store(url, writer=True)  # a pipeline's `tidings match`, beside the owner
    writer.enqueue([NewMessage("s1", "p2", "p2", ("x",), encode_body({"a": 2}), 1.0)])
    writer.close()
    lease = [Lease("s1", 10, 30.0, 5, 1.0)]
    assert store.apply_now(lease) is None  # rows to take in: not on the loop's thread
    [leased] = store.apply(lease)
    assert [m.publication_id for m in leased] == ["p2"]
    assert store.apply_now(lease) == [[]]  # taken in: small commits run at once again
    store.close()
