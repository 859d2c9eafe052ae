"""One SQL implementation of the Store, shared by SQLite and PostgreSQL through a `Dialect`.

A message row is visible when `visible_at <= now`; leasing bumps `attempt`, sets a new
`receipt` and hides the row until `now + visibility`. Acknowledging deletes the row.
Bodies live in `bodies`, once per publication (per topic for compat topic publishing); a
message or dead letter names its body by `body_key`, and the last acknowledgement (or
deletion) of a body's deliveries deletes it (docs/storage.md).
The `dedup` table remembers every (subscriber, dedup key) ever enqueued, so a repeat is
ignored even after the first copy was acknowledged (replays rely on this); `expire` prunes
it together with the retention.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Literal, Protocol

import orjson

from tidings.model import (
    ID_MAX,
    Subscriber,
    Subscription,
    receipt_seq,
    subscription_from_json,
)
from tidings.store.base import (
    Ack,
    AckResult,
    Change,
    DeadLetter,
    Endpoint,
    EndpointState,
    Enqueue,
    Fanout,
    Lease,
    Message,
    Nack,
    NewMessage,
    QueueDepth,
    QueueOp,
    QueueStats,
    Reject,
    SubscriberRecord,
)


class Cursor(Protocol):
    rowcount: int

    def execute(self, sql: str, params: Sequence[Any] = ...) -> Any: ...
    def executemany(self, sql: str, params: Iterable[Sequence[Any]]) -> Any: ...
    def fetchone(self) -> Any: ...
    def fetchall(self) -> list[Any]: ...


@dataclass(frozen=True, slots=True)
class Dialect:
    """What differs between the SQL engines."""

    param: str  # "?" or "%s"
    serial: str  # the auto-increment primary key column type
    insert_ignore: str  # "INSERT OR IGNORE INTO" or "INSERT INTO"
    on_conflict_ignore: str  # "" or "ON CONFLICT DO NOTHING"
    skip_locked: str  # "" or "FOR UPDATE OF m SKIP LOCKED" (`m`: the messages table)
    concat_receipt: str  # SQL for `seq.attempt.nonce`, the attempt already bumped
    clustered: str = ""  # "WITHOUT ROWID": a keyed table stored as its own index
    schema_lock: str = ""  # a statement serialising schema creation across processes
    # after copying rows with their ids into a table (a migration): `{table}` and `{column}`
    reseed: str = ""
    columns_of: str = ""  # a query naming a `{table}`'s columns (none if there is no table)
    # several processes write at once (PostgreSQL): two last acknowledgements of one body
    # in concurrent transactions can each see the other's row and leave the body behind,
    # so a periodic sweep collects such orphans
    concurrent_writers: bool = False

    def q(self, sql: str) -> str:
        return sql.replace("?", self.param) if self.param != "?" else sql


SCHEMA = """
CREATE TABLE IF NOT EXISTS subscribers (
    id TEXT PRIMARY KEY, token_hash TEXT NOT NULL, created_at DOUBLE PRECISION NOT NULL);
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
    updated_at DOUBLE PRECISION NOT NULL);
"""
# Subscribers made before presence existed are seen now, when the table comes: their
# creation time would make an idle expiry delete them at once.
BACKFILL = """INSERT INTO presence (subscriber_id, last_seen)
    SELECT id, ? FROM subscribers
    WHERE NOT EXISTS (SELECT 1 FROM presence p WHERE p.subscriber_id = subscribers.id)"""
# Bumped with every change to SCHEMA: a broker starting on a current schema runs no DDL
# (CREATE INDEX IF NOT EXISTS still locks its table, stalling writes on every broker).
SCHEMA_VERSION = 4  # 3: bodies stored once; 4: endpoints (webhooks), created if absent
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

# a subscriber with when it was last seen (its creation when never) and whether it is ephemeral
PRESENT = (
    "SELECT s.id, s.created_at, COALESCE(p.last_seen, s.created_at) AS last_seen, "
    "COALESCE(p.ephemeral, 0) AS ephemeral "
    "FROM subscribers s LEFT JOIN presence p ON p.subscriber_id = s.id"
)
# presence rows of subscribers that exist (a report racing a deletion may leave one behind)
SEEN = "SELECT p.subscriber_id FROM presence p JOIN subscribers s ON s.id = p.subscriber_id"
MESSAGE_COLUMNS = (
    "m.seq, m.subscriber_id, m.publication_id, m.subscription_ids, b.body, m.enqueued_at, m.attempt"
)
WITH_BODY = "messages m LEFT JOIN bodies b ON b.key = m.body_key"
# the bodies among `keys` that nothing refers to any more
DROP_BODIES = (
    "DELETE FROM bodies WHERE key IN ({marks}) "
    "AND NOT EXISTS (SELECT 1 FROM messages WHERE body_key = bodies.key) "
    "AND NOT EXISTS (SELECT 1 FROM dead_letters WHERE body_key = bodies.key)"
)
BODY_PAGE = 500  # keys per statement when dropping or sweeping bodies


def _dumps(value: Any) -> str:
    return orjson.dumps(value).decode()


def body_key(m: NewMessage, nonce: str) -> str:
    """The key a delivery's body is stored under. A fresh publication's key is new, so its
    deliveries share one body; a checked enqueue (function matches, replays) stores its own
    copy under a key of its own, so it never adds a reference to a body that a concurrent
    last acknowledgement may be deleting (docs/storage.md)."""
    return f"{m.dedup_key}~{nonce}" if nonce else m.dedup_key


def message_rows(messages: Sequence[NewMessage], nonce: str = "") -> list[tuple[Any, ...]]:
    """Insert rows: subscriber, publication, subscription ids, body key, enqueued at."""
    return [
        (
            m.subscriber_id,
            m.publication_id,
            _dumps(list(m.subscription_ids)),
            body_key(m, nonce),
            m.enqueued_at,
        )
        for m in messages
    ]


def body_rows(messages: Sequence[NewMessage], nonce: str = "") -> dict[str, str]:
    """Each distinct body by its key, decoded to text once per shared bytes object."""
    texts: dict[int, str] = {}
    out: dict[str, str] = {}
    for m in messages:
        key = body_key(m, nonce)
        if key not in out:
            text = texts.get(id(m.body))
            if text is None:
                text = texts[id(m.body)] = m.body.decode()
            out[key] = text
    return out


def _loads_or(text: str, default: Any) -> Any:
    """A stored JSON text, or `default` when it does not decode: one bad row is listed,
    without its body, rather than failing the listing of the others."""
    try:
        return orjson.loads(text)
    except (orjson.JSONDecodeError, TypeError):
        return default


def _receipt(seq: int, attempt: int, nonce: str) -> str:
    return f"{seq}.{attempt}.{nonce}"


def _seq_of(receipt: str) -> int | None:
    return receipt_seq(receipt) if isinstance(receipt, str) else None


class SQLStore:
    """The Store over a DB-API connection factory; every call is one transaction."""

    def __init__(
        self,
        dialect: Dialect,
        transaction: Callable[[], Any],
        reader: Callable[[], Any] | None = None,
    ) -> None:
        self._d = dialect
        self._transaction = transaction  # a context manager factory yielding a cursor
        self._reader = reader or transaction  # the same, for reads only
        self._lock = threading.Lock()

    def close(self) -> None:
        """Release connections; the engines override it."""

    def watch(self, on_change: Callable[[Change], None]) -> Callable[[], None]:
        """No other process shares this store's caches: nothing to watch."""
        return lambda: None

    def _notify(self, cur: Cursor, change: Change) -> None:
        """Tell other brokers about `change` when the transaction commits (PostgreSQL)."""

    def create_schema(self, now: float | None = None) -> None:
        if self._schema_version() == SCHEMA_VERSION:
            return
        with self._tx() as cur:
            if self._d.schema_lock:  # brokers starting at once on a fresh database
                cur.execute(self._d.schema_lock)
            copies = self._has_copied_bodies(cur)
            if copies:
                self._run(cur, BEFORE_V3)
            self._run(cur, SCHEMA.format(serial=self._d.serial, clustered=self._d.clustered))
            if copies:
                self._run(cur, AFTER_V3)
                for table, column in (("messages", "seq"), ("dead_letters", "id")):
                    if self._d.reseed:
                        cur.execute(self._d.reseed.format(table=table, column=column))
            cur.execute(self._q(BACKFILL), (time.time() if now is None else now,))
            for name in ("subscriptions", "schema"):
                cur.execute(
                    self._q(
                        f"{self._d.insert_ignore} meta VALUES ('{name}', 0) "
                        f"{self._d.on_conflict_ignore}"
                    )
                )
            cur.execute(
                self._q("UPDATE meta SET value = ? WHERE name = 'schema'"), (SCHEMA_VERSION,)
            )

    @staticmethod
    def _run(cur: Cursor, script: str) -> None:
        for statement in script.split(";"):
            if statement.strip():
                cur.execute(statement)

    def _has_copied_bodies(self, cur: Cursor) -> bool:
        """Whether the queue tables are of the layout that copied the body into every row
        (before version 3); asked of the catalogue, so no statement fails (PostgreSQL would
        abort the transaction)."""
        cur.execute(self._d.columns_of.format(table="messages"))
        return "body" in {str(r[0]) for r in cur.fetchall()}

    def _schema_version(self) -> int | None:
        """The schema's version, or None before there is one (a fresh database)."""
        try:
            with self._read() as cur:
                cur.execute("SELECT value FROM meta WHERE name = 'schema'")
                row = cur.fetchone()
        except Exception:  # no meta table yet: each engine names that error its own way
            return None
        return int(row[0]) if row else None

    @contextmanager
    def _tx(self) -> Iterator[Cursor]:
        with self._transaction() as cur:
            yield cur

    @contextmanager
    def _read(self) -> Iterator[Cursor]:
        with self._reader() as cur:
            yield cur

    def _q(self, sql: str) -> str:
        return self._d.q(sql)

    # ---------------------------------------------------------------- subscribers

    def add_subscriber(self, subscriber: Subscriber, ephemeral: bool = False) -> None:
        with self._tx() as cur:
            cur.execute(
                self._q("INSERT INTO subscribers VALUES (?, ?, ?)"),
                (subscriber.id, subscriber.token_hash, subscriber.created_at),
            )
            cur.execute(
                self._q("INSERT INTO presence VALUES (?, ?, ?)"),
                (subscriber.id, subscriber.created_at, int(ephemeral)),
            )

    def get_subscriber(self, subscriber_id: str) -> Subscriber | None:
        with self._read() as cur:
            cur.execute(
                self._q("SELECT id, token_hash, created_at FROM subscribers WHERE id = ?"),
                (subscriber_id,),
            )
            row = cur.fetchone()
        return Subscriber(row[0], row[1], float(row[2])) if row else None

    def remove_subscriber(self, subscriber_id: str) -> bool:
        with self._tx() as cur:
            keys: set[str] = set()
            for table in ("messages", "dead_letters"):
                cur.execute(
                    self._q(f"DELETE FROM {table} WHERE subscriber_id = ? RETURNING body_key"),
                    (subscriber_id,),
                )
                keys.update(str(r[0]) for r in cur.fetchall())
            self._drop_bodies(cur, keys)
            # its dedup rows stay until the retention: keyed by publication first (a
            # fan-out's rows are neighbours), they have no index by subscriber, and an id
            # is never used again
            for table in ("subscriptions", "presence", "endpoints"):
                cur.execute(
                    self._q(f"DELETE FROM {table} WHERE subscriber_id = ?"), (subscriber_id,)
                )
                if table == "subscriptions" and cur.rowcount:
                    self._bump(cur)
            cur.execute(self._q("DELETE FROM subscribers WHERE id = ?"), (subscriber_id,))
            found = bool(cur.rowcount)
            if found:
                self._notify(cur, Change("subscriber_removed", subscriber_id))
            return found

    def count_subscribers(self) -> int:
        with self._read() as cur:
            cur.execute("SELECT COUNT(*) FROM subscribers")
            return int(cur.fetchone()[0])

    def touch(self, seen: Mapping[str, float]) -> None:
        with self._tx() as cur:
            cur.executemany(
                self._q(
                    "INSERT INTO presence SELECT id, ?, 0 FROM subscribers WHERE id = ? "
                    "ON CONFLICT (subscriber_id) DO UPDATE SET last_seen = excluded.last_seen "
                    "WHERE presence.last_seen < excluded.last_seen"
                ),
                [(at, sid) for sid, at in sorted(seen.items())],  # one lock order: no deadlocks
            )

    def subscribers_page(self, after: str, limit: int) -> list[SubscriberRecord]:
        with self._read() as cur:
            cur.execute(
                self._q(f"{PRESENT} WHERE s.id > ? ORDER BY s.id LIMIT ?"),
                (after, limit),
            )
            rows = cur.fetchall()
        return [SubscriberRecord(r[0], float(r[1]), float(r[2]), bool(r[3])) for r in rows]

    def idle_subscribers(self, idle_before: float, ephemeral_before: float) -> list[str]:
        # two index range scans (every few seconds, whatever the number of subscribers)
        with self._read() as cur:
            cur.execute(
                self._q(
                    f"{SEEN} WHERE p.last_seen < ? UNION "
                    f"{SEEN} WHERE p.ephemeral = 1 AND p.last_seen < ? ORDER BY 1"
                ),
                (idle_before, ephemeral_before),
            )
            return [r[0] for r in cur.fetchall()]

    # ---------------------------------------------------------------- subscriptions

    def _bump(self, cur: Cursor) -> None:
        cur.execute("UPDATE meta SET value = value + 1 WHERE name = 'subscriptions'")

    def add_subscription(self, subscription: Subscription) -> None:
        with self._tx() as cur:
            cur.execute(
                self._q("INSERT INTO subscriptions VALUES (?, ?, ?)"),
                (subscription.id, subscription.subscriber_id, _dumps(subscription.to_json())),
            )
            self._bump(cur)

    def get_subscription(self, subscription_id: str) -> Subscription | None:
        with self._read() as cur:
            cur.execute(self._q("SELECT body FROM subscriptions WHERE id = ?"), (subscription_id,))
            row = cur.fetchone()
        return subscription_from_json(orjson.loads(row[0])) if row else None

    def list_subscriptions(self, subscriber_id: str) -> list[Subscription]:
        with self._read() as cur:
            cur.execute(
                self._q("SELECT body FROM subscriptions WHERE subscriber_id = ? ORDER BY id"),
                (subscriber_id,),
            )
            rows = cur.fetchall()
        return [subscription_from_json(orjson.loads(r[0])) for r in rows]

    def count_subscriptions(self, subscriber_id: str) -> int:
        with self._read() as cur:
            cur.execute(
                self._q("SELECT COUNT(*) FROM subscriptions WHERE subscriber_id = ?"),
                (subscriber_id,),
            )
            return int(cur.fetchone()[0])

    def remove_subscription(self, subscription_id: str) -> bool:
        with self._tx() as cur:
            cur.execute(self._q("DELETE FROM subscriptions WHERE id = ?"), (subscription_id,))
            found = bool(cur.rowcount)
            if found:
                self._bump(cur)
            return found

    def set_subscription_status(
        self, subscription_id: str, status: Literal["active", "suspended"], reason: str | None
    ) -> bool:
        with self._tx() as cur:
            cur.execute(self._q("SELECT body FROM subscriptions WHERE id = ?"), (subscription_id,))
            row = cur.fetchone()
            if row is None:
                return False
            body = orjson.loads(row[0])
            body.update(status=status, status_reason=reason)
            cur.execute(
                self._q("UPDATE subscriptions SET body = ? WHERE id = ?"),
                (_dumps(body), subscription_id),
            )
            self._bump(cur)
            return True

    def all_subscriptions(self) -> list[Subscription]:
        return self.snapshot()[1]

    def snapshot(self) -> tuple[int, list[Subscription]]:
        """The subscriptions and their version, read in one transaction."""
        with self._read() as cur:
            cur.execute("SELECT value FROM meta WHERE name = 'subscriptions'")
            version = int(cur.fetchone()[0])
            cur.execute("SELECT body FROM subscriptions ORDER BY id")
            rows = cur.fetchall()
        return version, [subscription_from_json(orjson.loads(r[0])) for r in rows]

    def iter_subscriptions(self, page: int = 10_000) -> Iterator[Subscription]:
        """Every subscription in id order, read `page` rows at a time (each page its own
        read, by key, so no transaction stays open between pages and no more than a page is
        held). Not one snapshot: compare `subscriptions_version` before and after."""
        after: str | None = None
        while True:
            with self._read() as cur:
                if after is None:
                    cur.execute(
                        self._q("SELECT id, body FROM subscriptions ORDER BY id LIMIT ?"), (page,)
                    )
                else:
                    cur.execute(
                        self._q(
                            "SELECT id, body FROM subscriptions WHERE id > ? ORDER BY id LIMIT ?"
                        ),
                        (after, page),
                    )
                rows = cur.fetchall()
            yield from (subscription_from_json(orjson.loads(body)) for _, body in rows)
            if len(rows) < page:
                return
            after = rows[-1][0]

    def subscriptions_version(self) -> int:
        with self._read() as cur:
            cur.execute("SELECT value FROM meta WHERE name = 'subscriptions'")
            return int(cur.fetchone()[0])

    # ---------------------------------------------------------------- queues

    def apply(self, ops: Sequence[QueueOp]) -> list[Any]:
        """The operations in order, in one transaction (group commit). Each answer is the
        operation's value, or the exception it raised (the others still commit)."""
        steps = [self._prepared(op) for op in ops]
        try:  # the usual case, nothing fails: no savepoint statements around each operation
            with self._tx() as cur:
                return [s if isinstance(s, Exception) else s(cur) for s in steps]
        except Exception:  # all undone: again, each operation in a savepoint of its own
            results: list[Any] = []
            with self._tx() as cur:
                for s in steps:
                    results.append(s if isinstance(s, Exception) else self._isolated(cur, s))
            return results

    def _prepared(self, op: QueueOp) -> Callable[[Cursor], Any] | Exception:
        try:
            return self._step(op)
        except Exception as exc:  # a malformed operation is its caller's answer alone
            return exc

    def _step(self, op: QueueOp) -> Callable[[Cursor], Any]:
        """What an operation does to the tables, as a function of the transaction's cursor.
        Anything that needs no cursor (receipt parsing, nonces) is done here, outside it."""
        match op:
            case Enqueue(messages, fresh, fanouts):
                return self._enqueue(messages, fresh, fanouts)
            case Lease(subscriber_id, max_messages, visibility_s, max_attempts, now):
                return self._lease(subscriber_id, max_messages, visibility_s, max_attempts, now)
            case Ack(subscriber_id, receipts):
                return self._settle(subscriber_id, receipts, None, 0.0)
            case Nack(subscriber_id, receipts, now, delay_s):
                return self._settle(subscriber_id, receipts, now, delay_s)
            case Reject(subscriber_id, receipt, reason, now):
                return self._reject(subscriber_id, receipt, reason, now)
        raise TypeError(f"not a queue operation: {op!r}")

    def _one(self, op: QueueOp) -> Any:
        """One operation in a transaction of its own; what it raised is raised."""
        with self._tx() as cur:
            return self._step(op)(cur)

    def _isolated(self, cur: Cursor, step: Callable[[Cursor], Any]) -> Any:
        """Run one operation inside a savepoint, so a failing one leaves no partial writes
        and (on PostgreSQL) does not abort the transaction the others commit in."""
        cur.execute("SAVEPOINT op")
        try:
            result = step(cur)
        except Exception as exc:  # one caller's failure is that caller's answer
            cur.execute("ROLLBACK TO SAVEPOINT op")
            result = exc
        cur.execute("RELEASE SAVEPOINT op")
        return result

    def enqueue(self, messages: Sequence[NewMessage], fresh: bool = False) -> int:
        return int(self._one(Enqueue(messages, fresh))) if messages else 0

    def lease(
        self,
        subscriber_id: str,
        max_messages: int,
        visibility_s: float,
        max_attempts: int,
        now: float,
    ) -> list[Message]:
        leased: list[Message] = self._one(
            Lease(subscriber_id, max_messages, visibility_s, max_attempts, now)
        )
        return leased

    def ack(self, subscriber_id: str, receipts: Sequence[str]) -> AckResult:
        result: AckResult = self._one(Ack(subscriber_id, receipts))
        return result

    def nack(
        self, subscriber_id: str, receipts: Sequence[str], now: float, delay_s: float = 0.0
    ) -> AckResult:
        result: AckResult = self._one(Nack(subscriber_id, receipts, now, delay_s))
        return result

    def reject(self, subscriber_id: str, receipt: str, reason: str, now: float) -> bool:
        """Dead-letter one leased message, by its current receipt, with `reason` (a message
        that cannot be served); False when the receipt is no longer current."""
        return bool(self._one(Reject(subscriber_id, receipt, reason, now)))

    def _enqueue(
        self, messages: Sequence[NewMessage], fresh: bool, fanouts: Sequence[Fanout] = ()
    ) -> Callable[[Cursor], int]:
        """`fresh`: the caller guarantees the keys are new (a new publication's id), so the
        rows go in with three bulk statements instead of a check per row. Fan-outs go in
        with three statements for all of them, their rows made by SQLite (`json_each`)."""
        spread = self._fanouts(fanouts)
        plain = self._messages(messages, fresh)

        def op(cur: Cursor) -> int:
            return spread(cur) + plain(cur)

        return op

    def _fanouts(self, fanouts: Sequence[Fanout]) -> Callable[[Cursor], int]:
        """One parameter row per publication: its subscribers as one JSON object, spread
        into rows by SQLite's `json_each` (PostgreSQL's store puts fan-outs into the arrays
        of its own statement instead)."""
        rows = [
            (f.dedup_key, f.publication_id, f.enqueued_at, orjson.dumps(f.owners).decode())
            for f in fanouts
        ]
        bodies = list({f.dedup_key: f.body.decode() for f in fanouts}.items())
        dedup = self._q(
            f"{self._d.insert_ignore} dedup SELECT j.key, f.k, f.at FROM "
            "(SELECT ? AS k, ? AS p, ? AS at, ? AS o) f, json_each(f.o) j "
            f"{self._d.on_conflict_ignore}"
        )
        insert = self._q(
            "INSERT INTO messages (subscriber_id, publication_id, subscription_ids, body_key, "
            "enqueued_at) SELECT j.key, f.p, j.value, f.k, f.at FROM "
            "(SELECT ? AS k, ? AS p, ? AS at, ? AS o) f, json_each(f.o) j"
        )

        def op(cur: Cursor) -> int:
            if not rows:
                return 0
            cur.executemany(dedup, rows)
            cur.executemany(self._q("INSERT INTO bodies VALUES (?, ?)"), bodies)
            cur.executemany(insert, rows)
            return sum(len(f.owners) for f in fanouts)

        return op

    def _messages(self, messages: Sequence[NewMessage], fresh: bool) -> Callable[[Cursor], int]:
        nonce = "" if fresh else os.urandom(6).hex()
        rows = message_rows(messages, nonce)
        bodies = body_rows(messages, nonce)
        dedup = self._q(
            f"{self._d.insert_ignore} dedup VALUES (?, ?, ?) {self._d.on_conflict_ignore}"
        )
        insert = self._q(
            "INSERT INTO messages (subscriber_id, publication_id, subscription_ids, "
            "body_key, enqueued_at) VALUES (?, ?, ?, ?, ?)"
        )
        add_body = self._q("INSERT INTO bodies VALUES (?, ?)")

        def op(cur: Cursor) -> int:
            if fresh:
                keys = [(m.subscriber_id, m.dedup_key, m.enqueued_at) for m in messages]
                cur.executemany(dedup, keys)
                cur.executemany(add_body, list(bodies.items()))
                cur.executemany(insert, rows)
                return len(messages)
            added, stored = 0, set()
            for m, row in zip(messages, rows, strict=True):
                cur.execute(dedup, (m.subscriber_id, m.dedup_key, m.enqueued_at))
                if cur.rowcount != 1:
                    continue
                if row[3] not in stored:  # a body only for the deliveries that are new
                    cur.execute(add_body, (row[3], bodies[row[3]]))
                    stored.add(row[3])
                cur.execute(insert, row)
                added += 1
            return added

        return op

    def _drop_bodies(self, cur: Cursor, keys: Iterable[str]) -> None:
        """Delete the bodies among `keys` that no message or dead letter refers to."""
        wanted = sorted(set(keys))
        for i in range(0, len(wanted), BODY_PAGE):
            page = wanted[i : i + BODY_PAGE]
            cur.execute(self._q(DROP_BODIES.format(marks=", ".join("?" * len(page)))), page)

    def sweep_bodies(self) -> int:
        """Delete every body nothing refers to, a page of keys per transaction; only where
        concurrent writers can leave one behind (`Dialect.concurrent_writers`)."""
        if not self._d.concurrent_writers:
            return 0
        swept, after = 0, ""
        while True:
            with self._tx() as cur:
                cur.execute(
                    self._q("SELECT key FROM bodies WHERE key > ? ORDER BY key LIMIT ?"),
                    (after, BODY_PAGE),
                )
                keys = [str(r[0]) for r in cur.fetchall()]
                self._drop_bodies(cur, keys)
                swept += max(0, cur.rowcount) if keys else 0
            if len(keys) < BODY_PAGE:
                return swept
            after = keys[-1]

    def _dead_letter(
        self, cur: Cursor, where: str, params: Sequence[Any], reason: str, now: float
    ) -> int:
        """Move messages to the dead letters; their bodies stay, now referred to by those."""
        cur.execute(
            self._q(
                "INSERT INTO dead_letters (subscriber_id, publication_id, subscription_ids, "
                "body_key, enqueued_at, attempt, reason, dead_at) SELECT subscriber_id, "
                "publication_id, subscription_ids, body_key, enqueued_at, attempt, ?, ? "
                f"FROM messages WHERE {where}"
            ),
            (reason, now, *params),
        )
        cur.execute(self._q(f"DELETE FROM messages WHERE {where}"), params)
        return int(cur.rowcount)

    def _lease(
        self,
        subscriber_id: str,
        max_messages: int,
        visibility_s: float,
        max_attempts: int,
        now: float,
    ) -> Callable[[Cursor], list[Message]]:
        nonce = os.urandom(6).hex()

        def op(cur: Cursor) -> list[Message]:
            # candidates in FIFO order; one leased max_attempts times already is a dead letter
            cur.execute(
                self._q(
                    f"SELECT {MESSAGE_COLUMNS} FROM {WITH_BODY} WHERE m.subscriber_id = ? AND "
                    f"m.visible_at <= ? ORDER BY m.seq LIMIT ? {self._d.skip_locked}"
                ),
                (subscriber_id, now, max_messages),
            )
            rows = cur.fetchall()
            dead = [r[0] for r in rows if int(r[6]) >= max_attempts]
            if dead:
                self._dead_letter(
                    cur, f"seq IN ({', '.join('?' * len(dead))})", dead, "max_attempts", now
                )
                rows = [r for r in rows if int(r[6]) < max_attempts]
            until = now + visibility_s
            good = [(r, ids) for r in rows if (ids := self._checked(cur, r, now)) is not None]
            if good:
                marks = ", ".join("?" * len(good))
                cur.execute(
                    self._q(
                        f"UPDATE messages SET attempt = attempt + 1, visible_at = ?, receipt = "
                        f"{self._d.concat_receipt} WHERE seq IN ({marks})"
                    ),
                    (until, nonce, *(r[0] for r, _ in good)),
                )
            return [self._leased(r, ids, until, nonce) for r, ids in good]

        return op

    def _checked(self, cur: Cursor, row: Sequence[Any], now: float) -> tuple[str, ...] | None:
        """A row's subscription ids, its body checked to decode; a row that does not (or
        whose body is missing) is dead-lettered alone, with the reason, so it cannot fail
        the others' lease. The body is checked, not kept: frames embed its text."""
        try:
            if row[4] is None:
                raise TypeError("the body is missing")
            orjson.loads(row[4])
            return tuple(orjson.loads(row[3]))
        except (orjson.JSONDecodeError, TypeError) as exc:
            self._dead_letter(cur, "seq = ?", (row[0],), f"undecodable: {exc}", now)
            return None

    def _leased(
        self, row: Sequence[Any], ids: tuple[str, ...], until: float, nonce: str
    ) -> Message:
        seq, attempt = int(row[0]), int(row[6]) + 1
        raw = row[4]
        return Message(
            id=seq,
            subscriber_id=row[1],
            publication_id=row[2],
            subscription_ids=ids,
            raw=raw.encode() if isinstance(raw, str) else bytes(raw),
            enqueued_at=float(row[5]),
            attempt=attempt,
            receipt=_receipt(seq, attempt, nonce),
            lease_until=until,
        )

    def _reject(
        self, subscriber_id: str, receipt: str, reason: str, now: float
    ) -> Callable[[Cursor], bool]:
        seq = _seq_of(receipt)

        def op(cur: Cursor) -> bool:
            if seq is None:
                return False
            where = "subscriber_id = ? AND seq = ? AND receipt = ?"
            return self._dead_letter(cur, where, (subscriber_id, seq, receipt), reason, now) > 0

        return op

    def _settle(
        self, subscriber_id: str, receipts: Sequence[str], now: float | None, delay_s: float
    ) -> Callable[[Cursor], AckResult]:
        """Ack (`now` None: delete, then drop the bodies nobody refers to now) or nack (make
        ready at `now + delay_s`), in one statement for all receipts."""
        wanted = list(dict.fromkeys(receipts))
        valid = [r for r in wanted if _seq_of(r) is not None]
        marks = ", ".join("?" * len(valid))
        where = f"WHERE subscriber_id = ? AND seq IN ({marks}) AND receipt IN ({marks})"
        keys: tuple[Any, ...] = (subscriber_id, *(_seq_of(r) for r in valid), *valid)
        if now is None:
            sql, params = f"DELETE FROM messages {where} RETURNING receipt, body_key", keys
        else:
            sql = f"UPDATE messages SET visible_at = ?, receipt = NULL {where} RETURNING seq"
            params = (now + delay_s, *keys)

        def op(cur: Cursor) -> AckResult:
            if not valid:
                return AckResult([], wanted)
            cur.execute(self._q(sql), params)
            rows = cur.fetchall()
            if now is None:
                done = {str(r[0]) for r in rows}
                self._drop_bodies(cur, (str(r[1]) for r in rows))
            else:  # an UPDATE returns the new (NULL) receipt: match by sequence
                seqs = {int(r[0]) for r in rows}
                done = {r for r in valid if _seq_of(r) in seqs}
            return AckResult([r for r in wanted if r in done], [r for r in wanted if r not in done])

        return op

    def depth(self, subscriber_id: str, now: float) -> QueueDepth:
        with self._read() as cur:
            cur.execute(
                self._q(
                    "SELECT COALESCE(SUM(CASE WHEN visible_at <= ? THEN 1 ELSE 0 END), 0), "
                    "COALESCE(SUM(CASE WHEN visible_at > ? THEN 1 ELSE 0 END), 0) "
                    "FROM messages WHERE subscriber_id = ?"
                ),
                (now, now, subscriber_id),
            )
            ready, leased = cur.fetchone()
            cur.execute(
                self._q("SELECT COUNT(*) FROM dead_letters WHERE subscriber_id = ?"),
                (subscriber_id,),
            )
            dead = cur.fetchone()[0]
        return QueueDepth(int(ready), int(leased), int(dead))

    def queue_totals(self, now: float) -> tuple[QueueDepth, float | None]:
        with self._read() as cur:
            cur.execute(
                self._q(
                    "SELECT COALESCE(SUM(CASE WHEN visible_at <= ? THEN 1 ELSE 0 END), 0), "
                    "COALESCE(SUM(CASE WHEN visible_at > ? THEN 1 ELSE 0 END), 0), "
                    "MIN(enqueued_at) FROM messages"
                ),
                (now, now),
            )
            ready, leased, oldest = cur.fetchone()
            cur.execute("SELECT COUNT(*) FROM dead_letters")
            dead = cur.fetchone()[0]
        depth = QueueDepth(int(ready), int(leased), int(dead))
        return depth, None if oldest is None else float(oldest)

    def deepest_queues(self, now: float, limit: int) -> list[QueueStats]:
        with self._read() as cur:
            cur.execute(
                self._q(
                    "SELECT subscriber_id, "
                    "SUM(CASE WHEN visible_at <= ? THEN 1 ELSE 0 END), "
                    "SUM(CASE WHEN visible_at > ? THEN 1 ELSE 0 END), MIN(enqueued_at) "
                    "FROM messages GROUP BY subscriber_id "
                    "ORDER BY COUNT(*) DESC, subscriber_id LIMIT ?"
                ),
                (now, now, limit),
            )
            rows = cur.fetchall()
        return [QueueStats(r[0], int(r[1]), int(r[2]), float(r[3])) for r in rows]

    def dead_letters(self, subscriber_id: str, limit: int = 100) -> list[DeadLetter]:
        with self._read() as cur:
            cur.execute(
                self._q(
                    "SELECT d.id, d.subscriber_id, d.publication_id, d.subscription_ids, "
                    "b.body, d.enqueued_at, d.attempt, d.reason, d.dead_at FROM dead_letters d "
                    "LEFT JOIN bodies b ON b.key = d.body_key WHERE d.subscriber_id = ? "
                    "ORDER BY d.id LIMIT ?"
                ),
                (subscriber_id, limit),
            )
            rows = cur.fetchall()
        return [
            DeadLetter(
                int(r[0]),
                r[1],
                r[2],
                tuple(_loads_or(r[3], ())),
                _loads_or(r[4], None),
                float(r[5]),
                int(r[6]),
                r[7],
                float(r[8]),
            )
            for r in rows
        ]

    def redrive(self, subscriber_id: str, ids: Sequence[int] | None, now: float) -> int:
        where = "subscriber_id = ?"
        params: list[Any] = [subscriber_id]
        if ids is not None:
            ids = [i for i in ids if 0 <= i <= ID_MAX]  # no row has another id
            if not ids:
                return 0
            where += f" AND id IN ({', '.join('?' * len(ids))})"
            params += list(ids)
        with self._tx() as cur:
            cur.execute(
                self._q(
                    "INSERT INTO messages (subscriber_id, publication_id, subscription_ids, "
                    "body_key, enqueued_at) SELECT subscriber_id, publication_id, "
                    f"subscription_ids, body_key, ? FROM dead_letters WHERE {where} ORDER BY id"
                ),
                (now, *params),
            )
            cur.execute(self._q(f"DELETE FROM dead_letters WHERE {where}"), params)
            return int(cur.rowcount)

    def expire(self, now: float, retention_s: float) -> int:
        cutoff = now - retention_s
        with self._tx() as cur:
            moved = self._dead_letter(cur, "enqueued_at < ?", (cutoff,), "retention", now)
            cur.execute(self._q("DELETE FROM dedup WHERE enqueued_at < ?"), (cutoff,))
        return moved

    # ---- push endpoints (webhooks)

    def set_endpoint(self, subscriber_id: str, endpoint: Endpoint | None) -> bool:
        with self._tx() as cur:
            if endpoint is None:
                cur.execute(
                    self._q("DELETE FROM endpoints WHERE subscriber_id = ?"), (subscriber_id,)
                )
                return bool(cur.rowcount)
            cur.execute(  # only for a subscriber that exists
                self._q(
                    f"INSERT INTO endpoints SELECT id, ?, ?, ?, ?, ?, ? FROM subscribers "
                    f"WHERE id = ? ON CONFLICT (subscriber_id) DO UPDATE SET {ENDPOINT_SET}"
                ),
                (*_endpoint_row(endpoint)[1:], subscriber_id),
            )
            return bool(cur.rowcount)

    def get_endpoint(self, subscriber_id: str) -> Endpoint | None:
        with self._read() as cur:
            cur.execute(self._q(f"{ENDPOINTS} WHERE e.subscriber_id = ?"), (subscriber_id,))
            row = cur.fetchone()
        return _endpoint(row) if row else None

    def endpoints(self) -> list[Endpoint]:
        with self._read() as cur:
            cur.execute(f"{ENDPOINTS} ORDER BY e.subscriber_id")
            return [_endpoint(row) for row in cur.fetchall()]

    def set_endpoint_state(
        self,
        subscriber_id: str,
        state: EndpointState,
        reason: str | None,
        failures: int,
        now: float,
    ) -> bool:
        with self._tx() as cur:
            cur.execute(
                self._q(
                    "UPDATE endpoints SET state = ?, reason = ?, failures = ?, updated_at = ? "
                    "WHERE subscriber_id = ?"
                ),
                (state, reason, failures, now, subscriber_id),
            )
            return bool(cur.rowcount)


# endpoints of subscribers that exist (a deletion racing a PUT on another broker may leave one)
ENDPOINTS = (
    "SELECT e.subscriber_id, e.url, e.secret, e.state, e.reason, e.failures, e.updated_at "
    "FROM endpoints e JOIN subscribers s ON s.id = e.subscriber_id"
)
ENDPOINT_SET = ", ".join(
    f"{c} = excluded.{c}" for c in ("url", "secret", "state", "reason", "failures", "updated_at")
)


def _endpoint_row(e: Endpoint) -> tuple[Any, ...]:
    return (e.subscriber_id, e.url, e.secret, e.state, e.reason, e.failures, e.updated_at)


def _endpoint(row: Sequence[Any]) -> Endpoint:
    state: EndpointState = "paused" if row[3] == "paused" else "active"
    return Endpoint(row[0], row[1], row[2], state, row[4], int(row[5]), float(row[6]))


# ---- end of push endpoints
