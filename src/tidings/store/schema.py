"""The SQL store's tables, their version, and the migrations between versions.

A broker creates the schema when it opens the store. A database already at
`SCHEMA_VERSION` runs no DDL; an older one gains what it lacks, and one of the layout that
copied the body into every row (before version 3) is migrated to bodies stored once.
"""

from __future__ import annotations

import time

from tidings.store.database import Cursor, Database

SCHEMA = """
CREATE TABLE IF NOT EXISTS subscribers (
    id TEXT PRIMARY KEY, token_hash TEXT NOT NULL, created_at DOUBLE PRECISION NOT NULL);
CREATE INDEX IF NOT EXISTS subscribers_token ON subscribers (token_hash);
CREATE TABLE IF NOT EXISTS subscriptions (
    id TEXT PRIMARY KEY, subscriber_id TEXT NOT NULL, body TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS subscriptions_owner ON subscriptions (subscriber_id);
CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value BIGINT NOT NULL);
CREATE TABLE IF NOT EXISTS bodies (key TEXT PRIMARY KEY, body TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS messages (
    seq {serial}, subscriber_id TEXT NOT NULL, publication_id TEXT NOT NULL,
    subscription_ids TEXT NOT NULL, body_key TEXT NOT NULL,
    enqueued_at DOUBLE PRECISION NOT NULL,
    attempt INTEGER NOT NULL DEFAULT 0, visible_at DOUBLE PRECISION NOT NULL DEFAULT 0,
    receipt TEXT);
CREATE INDEX IF NOT EXISTS messages_fifo ON messages (subscriber_id, seq);
CREATE INDEX IF NOT EXISTS messages_age ON messages (enqueued_at);
CREATE INDEX IF NOT EXISTS messages_body ON messages (body_key);
CREATE TABLE IF NOT EXISTS dedup (
    subscriber_id TEXT NOT NULL, dedup_key TEXT NOT NULL, enqueued_at DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (dedup_key, subscriber_id)) {clustered};
CREATE TABLE IF NOT EXISTS dead_letters (
    id {serial}, subscriber_id TEXT NOT NULL, publication_id TEXT NOT NULL,
    subscription_ids TEXT NOT NULL, body_key TEXT NOT NULL,
    enqueued_at DOUBLE PRECISION NOT NULL,
    attempt INTEGER NOT NULL, reason TEXT NOT NULL, dead_at DOUBLE PRECISION NOT NULL);
CREATE INDEX IF NOT EXISTS dead_letters_owner ON dead_letters (subscriber_id, id);
CREATE INDEX IF NOT EXISTS dead_letters_body ON dead_letters (body_key);
CREATE TABLE IF NOT EXISTS presence (
    subscriber_id TEXT PRIMARY KEY, last_seen DOUBLE PRECISION NOT NULL,
    ephemeral INTEGER NOT NULL DEFAULT 0);
CREATE INDEX IF NOT EXISTS presence_seen ON presence (last_seen);
CREATE INDEX IF NOT EXISTS presence_ephemeral ON presence (ephemeral, last_seen);
CREATE TABLE IF NOT EXISTS endpoints (
    subscriber_id TEXT PRIMARY KEY, url TEXT NOT NULL, secret TEXT NOT NULL,
    state TEXT NOT NULL, reason TEXT, failures INTEGER NOT NULL DEFAULT 0,
    updated_at DOUBLE PRECISION NOT NULL, retention_s DOUBLE PRECISION);
CREATE TABLE IF NOT EXISTS publication_dedup (
    publisher TEXT NOT NULL, dedup_id TEXT NOT NULL, publication_id TEXT NOT NULL,
    published_at DOUBLE PRECISION NOT NULL, deliveries INTEGER NOT NULL,
    expires_at DOUBLE PRECISION NOT NULL, PRIMARY KEY (publisher, dedup_id));
CREATE INDEX IF NOT EXISTS publication_dedup_expiry ON publication_dedup (expires_at);
CREATE TABLE IF NOT EXISTS subscription_changes (
    version BIGINT NOT NULL, subscription_id TEXT NOT NULL,
    PRIMARY KEY (version, subscription_id));
CREATE TABLE IF NOT EXISTS pending_evaluations (
    publication_id TEXT PRIMARY KEY, publication TEXT NOT NULL, subscription_ids TEXT NOT NULL,
    claimed_by TEXT NOT NULL, claimed_until DOUBLE PRECISION NOT NULL);
CREATE INDEX IF NOT EXISTS pending_claims ON pending_evaluations (claimed_until);
CREATE TABLE IF NOT EXISTS simulated (
    subscriber_id TEXT PRIMARY KEY, simulation TEXT NOT NULL);
"""
# The change log holds every subscription change after this version (meta 'changes_from')
CHANGES_FROM = "SELECT 'changes_from', value FROM meta WHERE name = 'subscriptions'"
# Version 4's endpoints had no retention of their own (a column added when absent)
ENDPOINT_RETENTION = "ALTER TABLE endpoints ADD COLUMN retention_s DOUBLE PRECISION"
# Subscribers made before presence existed are seen now, when the table comes: their
# creation time would make an idle expiry delete them at once.
BACKFILL = """INSERT INTO presence (subscriber_id, last_seen)
    SELECT id, ? FROM subscribers
    WHERE NOT EXISTS (SELECT 1 FROM presence p WHERE p.subscriber_id = subscribers.id)"""
# Bumped with every change to SCHEMA: a broker starting on a current schema runs no DDL
# (CREATE INDEX IF NOT EXISTS still locks its table, stalling writes on every broker).
# 3: bodies stored once; 4: endpoints (webhooks); 5: publishers' dedup ids; 6: pending
# function evaluations, an endpoint's retention, the subscriptions' change log; each created
# (or added) when absent; 7: dedup ids keyed by their publisher's scope; 8: subscribers found
# by their token's hash (the index a token is authenticated by); 9: the subscribers a
# simulator made, by simulation (a table created when absent)
SCHEMA_VERSION = 9
# Version 2 kept a copy of the body in every message and dead letter, and its dedup rows by
# subscriber first: the old tables are renamed (their indexes dropped, so the new ones get
# the names), SCHEMA creates the new ones, and each old row's body becomes a body of its own
# (`v2.<seq>`, `v2d.<id>`).
BEFORE_V3 = """
DROP INDEX IF EXISTS messages_fifo; DROP INDEX IF EXISTS messages_age;
DROP INDEX IF EXISTS dead_letters_owner;
ALTER TABLE messages RENAME TO messages_v2; ALTER TABLE dead_letters RENAME TO dead_letters_v2;
ALTER TABLE dedup RENAME TO dedup_v2
"""
AFTER_V3 = """
INSERT INTO bodies SELECT 'v2.' || seq, body FROM messages_v2;
INSERT INTO messages SELECT seq, subscriber_id, publication_id, subscription_ids,
    'v2.' || seq, enqueued_at, attempt, visible_at, receipt FROM messages_v2;
INSERT INTO bodies SELECT 'v2d.' || id, body FROM dead_letters_v2;
INSERT INTO dead_letters SELECT id, subscriber_id, publication_id, subscription_ids,
    'v2d.' || id, enqueued_at, attempt, reason, dead_at FROM dead_letters_v2;
INSERT INTO dedup SELECT subscriber_id, dedup_key, enqueued_at FROM dedup_v2;
DROP TABLE messages_v2; DROP TABLE dead_letters_v2; DROP TABLE dedup_v2
"""

# Before version 7 a dedup id was the whole key: the table is renamed (its index dropped, so
# the new one gets the name), SCHEMA creates it keyed by publisher, and the claims still in
# their window move to the scope of publishers without a key (`''`), the clients' default,
# whose retries across the upgrade stay deduplicated.
BEFORE_V7 = """
DROP INDEX IF EXISTS publication_dedup_expiry;
ALTER TABLE publication_dedup RENAME TO publication_dedup_v6
"""
AFTER_V7 = """
INSERT INTO publication_dedup SELECT '', dedup_id, publication_id, published_at, deliveries,
    expires_at FROM publication_dedup_v6;
DROP TABLE publication_dedup_v6
"""


class Schema:
    """Creates and migrates the tables of one database."""

    def __init__(self, db: Database) -> None:
        self._db = db

    def create(self, now: float | None = None) -> None:
        """Bring the database to `SCHEMA_VERSION`; `now` is when a backfilled presence is
        seen (the clock's by default)."""
        if self.version() == SCHEMA_VERSION:
            return
        d = self._db.dialect
        with self._db.tx() as cur:
            if d.schema_lock:  # brokers starting at once on a fresh database
                cur.execute(d.schema_lock)
            copies = self._has_copied_bodies(cur)
            if copies:
                run(cur, BEFORE_V3)
            unscoped = self._has_unscoped_dedup_ids(cur)
            if unscoped:
                run(cur, BEFORE_V7)
            run(cur, d.ddl(SCHEMA))
            if unscoped:
                run(cur, AFTER_V7)
            if "retention_s" not in self._columns(cur, "endpoints"):
                cur.execute(ENDPOINT_RETENTION)
            if copies:
                run(cur, AFTER_V3)
                for table, column in (("messages", "seq"), ("dead_letters", "id")):
                    reseed = d.reseed(table, column)
                    if reseed:
                        cur.execute(reseed)
            cur.execute(d.q(BACKFILL), (time.time() if now is None else now,))
            for name in ("subscriptions", "schema"):
                cur.execute(d.ignoring_duplicates("meta", f"VALUES ('{name}', 0)"))
            # the change log starts now: no reader can ask it for anything older
            cur.execute(d.ignoring_duplicates("meta", CHANGES_FROM))
            cur.execute(d.q("UPDATE meta SET value = ? WHERE name = 'schema'"), (SCHEMA_VERSION,))

    def version(self) -> int | None:
        """The schema's version, or None before there is one (a fresh database)."""
        try:
            with self._db.read() as cur:
                cur.execute("SELECT value FROM meta WHERE name = 'schema'")
                row = cur.fetchone()
        except Exception:  # no meta table yet: each engine names that error its own way
            return None
        return int(row[0]) if row else None

    def _has_copied_bodies(self, cur: Cursor) -> bool:
        """Whether the queue tables are of the layout that copied the body into every row
        (before version 3); asked of the catalogue, so no statement fails (PostgreSQL would
        abort the transaction)."""
        return "body" in self._columns(cur, "messages")

    def _has_unscoped_dedup_ids(self, cur: Cursor) -> bool:
        """Whether the dedup ids' table is there without its publishers (before version 7)."""
        columns = self._columns(cur, "publication_dedup")
        return bool(columns) and "publisher" not in columns

    def _columns(self, cur: Cursor, table: str) -> set[str]:
        cur.execute(self._db.dialect.columns_of(table))
        return {str(r[0]) for r in cur.fetchall()}


def run(cur: Cursor, script: str) -> None:
    """Each statement of a script separated by `;`."""
    for statement in script.split(";"):
        if statement.strip():
            cur.execute(statement)
