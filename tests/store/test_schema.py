"""The schema's promises: a current database runs no DDL, an older one is brought up to date
keeping everything it held (on every backend where the old layout can be made)."""

from __future__ import annotations

import sqlite3
import uuid
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from tests.conftest import require_service
from tests.store.conftest import PG, sql_of
from tests.store.test_behaviour import T0, subscriber
from tests.store.test_endpoints import endpoint

from tidings.model import Subscriber
from tidings.store import open_store
from tidings.store.base import NewMessage, Store, encode_body
from tidings.store.dialect import POSTGRES, SQLITE, Dialect
from tidings.store.schema import SCHEMA_VERSION


def test_a_subscriber_from_before_presence_is_seen_from_the_upgrade_on(store: Store) -> None:
    store.add_subscriber(Subscriber("old", "h", T0))
    with sql_of(store).db.tx() as cur:  # as a database made before the presence table was
        cur.execute("DELETE FROM presence")
        cur.execute("UPDATE meta SET value = 1 WHERE name = 'schema'")
    sql_of(store).create_schema(now=T0 + 1000)
    [record] = store.subscribers_page("", 10)
    assert record.last_seen == T0 + 1000
    assert store.idle_subscribers(T0 + 500, 0.0) == []


def test_a_current_schema_is_not_created_again(store: Store) -> None:
    store.add_subscriber(Subscriber("s", "h", T0))
    with sql_of(store).db.tx() as cur:
        cur.execute("DELETE FROM presence")
    sql_of(store).create_schema(now=T0 + 1000)  # current: nothing runs, not even the backfill
    assert store.subscribers_page("", 10)[0].last_seen == T0  # `created_at`, as no row


def test_a_database_of_the_previous_schema_gains_the_endpoints_table(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    open_store(f"sqlite:///{path}").close()
    with sqlite3.connect(path) as conn:  # as a broker before endpoints left it
        conn.execute("DROP TABLE endpoints")
        conn.execute("UPDATE meta SET value = ? WHERE name = 'schema'", (SCHEMA_VERSION - 1,))
    store = open_store(f"sqlite:///{path}")
    try:
        subscriber(store)
        assert store.set_endpoint("s1", endpoint()) and store.get_endpoint("s1") == endpoint()
    finally:
        store.close()


@pytest.fixture(params=["sqlite", "postgres"])
def version_2(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """The URL of a database of the copied-bodies layout (version 2), as it was, opened with
    its queues as rows (what a log store makes of rows: tests/store/test_loglayout.py)."""
    if request.param == "sqlite":
        with sqlite3.connect(tmp_path / "t.db") as db:
            db.executescript(v2(SQLITE))
        yield f"sqlite:///{tmp_path}/t.db?layout=rows"
        return
    require_service("postgres")
    schema = f"t_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(PG, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{schema}"')
        conn.execute(f'SET search_path TO "{schema}"')
        conn.execute(v2(POSTGRES).encode())
    yield f"{PG}?schema={schema}"
    with psycopg.connect(PG, autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA "{schema}" CASCADE')


def test_a_database_of_the_copied_bodies_layout_is_migrated_keeping_every_message(
    version_2: str,
) -> None:
    store = open_store(version_2)
    try:
        [message] = store.lease("s1", 5, 30, 5, 2.0)
        assert (message.body, message.attempt) == ({"a": 1}, 2)
        [letter] = store.dead_letters("s1")
        assert (letter.body, letter.reason) == ("dead", "max_attempts")
        assert store.enqueue([NewMessage("s1", "p1", "p1", ("x",), encode_body(1), 3.0)]) == 0
        store.enqueue([NewMessage("s1", "p3", "p3", ("x",), encode_body(3), 3.0)])
        assert [m.id for m in store.lease("s1", 5, 30, 5, 2.0)] == [8]  # ids go on after the old
        store.redrive("s1", None, 4.0)
        [again] = store.lease("s1", 5, 30, 5, 4.0)
        assert again.id == 9 and store.reject("s1", again.receipt, "unservable", 4.0)
        assert [d.id for d in store.dead_letters("s1")] == [2]  # and so do dead letters'
    finally:
        store.close()


def v2(dialect: Dialect) -> str:
    """The version 2 tables and a few rows, in `dialect`'s key type (its JSON has braces,
    so not through `str.format`)."""
    return V2.replace("{serial}", dialect.serial).replace("{clustered}", dialect.clustered)


V2 = """
CREATE TABLE subscribers (id TEXT PRIMARY KEY, token_hash TEXT NOT NULL, created_at REAL);
INSERT INTO subscribers VALUES ('s1', 'h', 1.0);
CREATE TABLE meta (name TEXT PRIMARY KEY, value BIGINT NOT NULL);
INSERT INTO meta VALUES ('subscriptions', 0), ('schema', 2);
CREATE TABLE messages (
    seq {serial}, subscriber_id TEXT NOT NULL,
    publication_id TEXT NOT NULL, subscription_ids TEXT NOT NULL, body TEXT NOT NULL,
    enqueued_at REAL NOT NULL, attempt INTEGER NOT NULL DEFAULT 0,
    visible_at REAL NOT NULL DEFAULT 0, receipt TEXT);
CREATE INDEX messages_fifo ON messages (subscriber_id, seq);
CREATE INDEX messages_age ON messages (enqueued_at);
INSERT INTO messages VALUES (7, 's1', 'p1', '["x"]', '{"a":1}', 1.0, 1, 0, NULL);
CREATE TABLE dead_letters (
    id {serial}, subscriber_id TEXT NOT NULL,
    publication_id TEXT NOT NULL, subscription_ids TEXT NOT NULL, body TEXT NOT NULL,
    enqueued_at REAL NOT NULL, attempt INTEGER NOT NULL, reason TEXT NOT NULL, dead_at REAL);
CREATE INDEX dead_letters_owner ON dead_letters (subscriber_id, id);
INSERT INTO dead_letters VALUES (1, 's1', 'p0', '["x"]', '"dead"', 0.5, 5, 'max_attempts', 1.0);
CREATE TABLE dedup (
    subscriber_id TEXT NOT NULL, dedup_key TEXT NOT NULL, enqueued_at REAL NOT NULL,
    PRIMARY KEY (subscriber_id, dedup_key)) {clustered};
INSERT INTO dedup VALUES ('s1', 'p1', 1.0), ('s1', 'p0', 0.5);
"""
