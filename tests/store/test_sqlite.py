"""What only the SQLite file backend promises: state survives closing and reopening."""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

import pytest

from tidings.errors import ErrorCode, TidingsError
from tidings.model import Subscriber
from tidings.store import open_store
from tidings.store.base import NewMessage, encode_body


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
    store = open_store(f"sqlite:///{tmp_path}/t.db")
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


def test_a_database_of_the_copied_bodies_layout_is_migrated_keeping_every_message(
    tmp_path: Path,
) -> None:
    with sqlite3.connect(tmp_path / "t.db") as db:  # the version 2 tables, as they were
        db.executescript(V2)
    store = open_store(f"sqlite:///{tmp_path}/t.db")
    [message] = store.lease("s1", 5, 30, 5, 2.0)
    assert (message.body, message.attempt) == ({"a": 1}, 2)
    [letter] = store.dead_letters("s1")
    assert (letter.body, letter.reason) == ("dead", "max_attempts")
    assert store.enqueue([NewMessage("s1", "p1", "p1", ("x",), encode_body(1), 3.0)]) == 0
    store.enqueue([NewMessage("s1", "p3", "p3", ("x",), encode_body(3), 3.0)])
    assert [m.id for m in store.lease("s1", 5, 30, 5, 2.0)] == [8]  # ids go on after the old
    store.close()


V2 = """
CREATE TABLE subscribers (id TEXT PRIMARY KEY, token_hash TEXT NOT NULL, created_at REAL);
INSERT INTO subscribers VALUES ('s1', 'h', 1.0);
CREATE TABLE meta (name TEXT PRIMARY KEY, value BIGINT NOT NULL);
INSERT INTO meta VALUES ('subscriptions', 0), ('schema', 2);
CREATE TABLE messages (
    seq INTEGER PRIMARY KEY AUTOINCREMENT, subscriber_id TEXT NOT NULL,
    publication_id TEXT NOT NULL, subscription_ids TEXT NOT NULL, body TEXT NOT NULL,
    enqueued_at REAL NOT NULL, attempt INTEGER NOT NULL DEFAULT 0,
    visible_at REAL NOT NULL DEFAULT 0, receipt TEXT);
CREATE INDEX messages_fifo ON messages (subscriber_id, seq);
CREATE INDEX messages_age ON messages (enqueued_at);
INSERT INTO messages VALUES (7, 's1', 'p1', '["x"]', '{"a":1}', 1.0, 1, 0, NULL);
CREATE TABLE dead_letters (
    id INTEGER PRIMARY KEY AUTOINCREMENT, subscriber_id TEXT NOT NULL,
    publication_id TEXT NOT NULL, subscription_ids TEXT NOT NULL, body TEXT NOT NULL,
    enqueued_at REAL NOT NULL, attempt INTEGER NOT NULL, reason TEXT NOT NULL, dead_at REAL);
CREATE INDEX dead_letters_owner ON dead_letters (subscriber_id, id);
INSERT INTO dead_letters VALUES (1, 's1', 'p0', '["x"]', '"dead"', 0.5, 5, 'max_attempts', 1.0);
CREATE TABLE dedup (
    subscriber_id TEXT NOT NULL, dedup_key TEXT NOT NULL, enqueued_at REAL NOT NULL,
    PRIMARY KEY (subscriber_id, dedup_key)) WITHOUT ROWID;
INSERT INTO dedup VALUES ('s1', 'p1', 1.0), ('s1', 'p0', 0.5);
"""


def test_closing_waits_for_a_read_under_way_in_another_thread(tmp_path: Path) -> None:
    store = open_store(f"sqlite:///{tmp_path}/t.db")
    store.add_subscriber(Subscriber("s1", "h", 1.0))
    reading, release = threading.Event(), threading.Event()
    seen: list[int] = []

    def read() -> None:
        with store._read() as cur:  # type: ignore[attr-defined]
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
