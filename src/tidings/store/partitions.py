"""Several brokers on PostgreSQL, each queue with an owner
(`postgresql://...?layout=log&partitions=N`, docs/storage.md "Several brokers, each queue
with an owner").

The subscribers' queues are cut into `N` partitions by a hash of the subscriber's id
(`inbox.partition_of`). A partition's log lives in a schema of its own (`<schema>_p<k>`),
in the memory of the one broker that owns it: the broker holding the partition's session
advisory lock, through whose session every one of its transactions runs (as `pglog.py`
owns a whole schema). Everything else (subscribers, subscriptions, dedup ids, pending
evaluations, dead letters) is shared rows in `<schema>`, as with the rows layout.

- **Publishing** runs on any broker: its transaction claims the dedup ids and writes each
  partition's share of the deliveries into that partition's inbox (`inbox.py`), atomically;
  the owner appends them to its log at its next transaction, woken by `pg_notify`.
- **Leases, acks, browsing, depths** of a subscriber run on its partition's owner; another
  broker answers `unavailable` (503, `Retry-After`), and the balancer routes each
  subscriber's requests to its owner (`tidings.balancer`, by the same hash).
- **Ownership moves**: each broker takes the partitions it prefers (`own=`, all by
  default) and, after a grace, adopts any whose owner is gone (its session ended: a killed
  broker's lock goes with it); an adopter hands a partition back when the broker preferring
  it is waiting for it. The new owner reads the partition's log from its tables: leases
  held by the old one are ready again with their attempts counted, their receipts refused.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import secrets
import threading
import time
from array import array
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from itertools import groupby
from typing import Any

import psycopg
from psycopg.conninfo import make_conninfo

from tidings.errors import ErrorCode, TidingsError
from tidings.store import inbox
from tidings.store.base import (
    Change,
    Discharge,
    Endpoint,
    Enqueue,
    Fanout,
    NewMessage,
    Owe,
    PublishOnce,
    QueueDepth,
    QueuedPage,
    QueueOp,
    QueueStats,
)
from tidings.store.database import Cursor, Database
from tidings.store.dedup import DedupIds
from tidings.store.dialect import PG_SCHEMA_LOCK, POSTGRES
from tidings.store.feed import KEEPALIVE
from tidings.store.loglayout import LogLayout
from tidings.store.logqueues import LogQueues, Refused, claim_delivery, refuse_malformed
from tidings.store.pending import discharge_step, owe_step
from tidings.store.postgres import PostgresStore, split_schema
from tidings.store.sql import SQLStore

log = logging.getLogger("tidings.store")
Connection = psycopg.Connection[tuple[object, ...]]
PUBLISHING = (Enqueue, PublishOnce, Owe, Discharge)
TICK_S = 0.5  # how often ownership is looked at (and inboxes read, should a note be lost)
ADOPT_AFTER_S = 2.0  # how long a partition is seen without an owner before it is adopted
RETRY_AFTER_S = 1
OWNER_WAIT_S = 3.0  # a preferred partition waited for at the start (`pglog.OWNER_WAIT_S`)
# each queue's depth as its owner last told (every tick): what another broker answers
DEPTHS_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS {schema}.log_depths (subscriber_id TEXT PRIMARY KEY, "
    "ready BIGINT NOT NULL, leased BIGINT NOT NULL, bytes BIGINT NOT NULL)"
)


def lock_key(schema: str, partition: int, purpose: str = "owner") -> int:
    """A signed 64-bit advisory lock key for a partition's owner (or a broker wanting it)."""
    digest = hashlib.sha256(f"tidings {purpose} {schema} {partition}".encode()).digest()
    return int.from_bytes(digest[:8], "big", signed=True)


def members_space(schema: str) -> int:
    """The first key of the brokers' member locks (`pg_try_advisory_lock(space, member)`),
    a positive 32-bit number naming this schema's brokers."""
    digest = hashlib.sha256(f"tidings members {schema}".encode()).digest()
    return int.from_bytes(digest[:4], "big") & 0x7FFFFFFF


def not_here(subscriber_id: str) -> TidingsError:
    return TidingsError(
        ErrorCode.UNAVAILABLE,
        detail=f"the queue of {subscriber_id} is held by another broker: try again",
        retry_s=RETRY_AFTER_S,
    )


class PartitionQueues(LogLayout):
    """One owned partition: the log layout's queue operations in the partition's session
    (its log tables first on the search path, the shared rows after them)."""

    def __init__(self, db: Database, on_arrival: Callable[[set[str]], None]) -> None:
        SQLStore.__init__(self, db)
        self.queues = LogQueues(db, inbox=True, on_arrival=on_arrival)


class Partition:
    """A partition this broker owns, for as long as its session holds the lock."""

    def __init__(
        self, conn: Connection, number: int, on_arrival: Callable[[set[str]], None]
    ) -> None:
        self.number = number
        self._conn = conn
        self._guard = threading.RLock()
        db = Database(POSTGRES, self._session, self._session)
        self.store = PartitionQueues(db, on_arrival)

    @contextmanager
    def _session(self) -> Iterator[psycopg.Cursor[tuple[object, ...]]]:
        with self._guard:
            if self._conn.closed:  # handed back while this operation waited for it
                raise TidingsError(
                    ErrorCode.UNAVAILABLE,
                    detail=f"partition {self.number} moved to another broker: try again",
                    retry_s=RETRY_AFTER_S,
                )
            with self._conn.transaction(), self._conn.cursor() as cur:
                yield cur

    @property
    def lost(self) -> bool:
        """Its session ended (and the lock with it): another broker may own it now."""
        return bool(self._conn.closed or self._conn.broken)

    def take_inbox(self) -> None:
        self.store.queues.commit_alone()

    def close(self) -> None:
        with self._guard:
            self._conn.close()  # the lock goes with the session


class PartitionedLogStore(PostgresStore):
    """The queues cut into partitions, each owned by one broker (`writer`: none, a process
    that only publishes: the pipeline's `tidings match`)."""

    def __init__(
        self,
        url: str,
        partitions: int,
        own: Sequence[int] | None = None,
        writer: bool = False,
    ) -> None:
        super().__init__(url)
        conninfo, schema = split_schema(url)
        self._conninfo = make_conninfo(conninfo, **KEEPALIVE)
        self.schema = schema or "public"
        self.partitions = partitions
        # no `own=`: a fair share of the partitions, whichever (`_tend_fairly`)
        self._fair = own is None
        self._preferred = set() if own is None else set(own)
        self._inbox_channel = f"tidings.{self.schema}.inbox"[:63]
        self._members_space = members_space(self.schema)
        self._parts: dict[int, Partition] = {}
        self._parts_lock = threading.Lock()
        self._dedup = DedupIds(self.db)
        self._listeners: list[Callable[[Change], None]] = []
        self._free_since: dict[int, float] = {}
        self._told: dict[str, tuple[int, int, int]] = {}
        self._wanting: set[int] = set()  # preferred partitions whose "want" lock is held
        self._started = time.monotonic()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._control: Connection | None = None
        try:
            self._prepare()
            if not writer:
                self._control = self._connect()
                self._join()
                self._take_preferred()
        except BaseException:
            self.close()  # (what was opened, the locks taken)
            raise
        if not writer:
            self._thread = threading.Thread(
                target=self._run, name="tidings-partitions", daemon=True
            )
            self._thread.start()

    # ------------------------------------------------------------------ set-up

    def _prepare(self) -> None:
        """Each partition's schema and inbox, and the count of partitions, which no broker
        may change while queues are kept (a subscriber would hash elsewhere)."""
        with psycopg.connect(self._conninfo, autocommit=True) as conn, conn.transaction():
            conn.execute(PG_SCHEMA_LOCK)
            for p in range(self.partitions):
                name = inbox.partition_schema(self.schema, p)
                conn.execute(f'CREATE SCHEMA IF NOT EXISTS "{name}"')
                for statement in inbox.INBOX_SCHEMA:
                    conn.execute(statement.format(schema=f'"{name}"'))
            conn.execute(DEPTHS_SCHEMA.format(schema=f'"{self.schema}"'))
            meta = f'"{self.schema}".meta'
            row = conn.execute(f"SELECT value FROM {meta} WHERE name = 'log_partitions'").fetchone()
            if row is None:
                conn.execute(
                    f"INSERT INTO {meta} (name, value) VALUES ('log_partitions', %s)",
                    (self.partitions,),
                )
            elif int(str(row[0])) != self.partitions:
                raise TidingsError(
                    ErrorCode.CONFIG_INVALID,
                    field="store_url",
                    detail=f"schema {self.schema} keeps its queues in {row[0]} partitions, "
                    f"not {self.partitions}: every broker names the same count",
                )

    def _connect(self, search_path: str | None = None) -> Connection:
        options = {"options": f"-c search_path={search_path}"} if search_path else {}
        conn: Connection = psycopg.connect(self._conninfo, autocommit=True, **options)  # type: ignore[arg-type]
        return conn

    # ------------------------------------------------------------------ ownership

    def owned(self) -> set[int]:
        """The partitions this broker serves now."""
        with self._parts_lock:
            return set(self._parts)

    def owns(self, subscriber_id: str) -> bool:
        return inbox.partition_of(subscriber_id, self.partitions) in self._parts

    def _part(self, subscriber_id: str) -> Partition | None:
        return self._parts.get(inbox.partition_of(subscriber_id, self.partitions))

    def _take(self, p: int) -> bool:
        """Own partition `p` if no broker does: its session takes the lock, then its log is
        read (and its inbox taken in)."""
        name = inbox.partition_schema(self.schema, p)
        conn = self._connect(f'"{name}","{self.schema}"')
        try:
            row = conn.execute(
                "SELECT pg_try_advisory_lock(%s)", (lock_key(self.schema, p),)
            ).fetchone()
            if not (row and row[0]):
                conn.close()
                return False
            part = Partition(conn, p, self._arrived)
        except BaseException:
            conn.close()
            raise
        with self._parts_lock:
            if self._stop.is_set():  # closed meanwhile: nothing is served any more
                part.close()
                return False
            self._parts[p] = part
        log.info("partition %d of %s owned here", p, self.schema)
        return True

    def _take_preferred(self) -> None:
        """At the start, the preferred partitions (or a fair share), waited for a moment: a
        killed broker's session (this broker's before a restart) ends as soon as
        PostgreSQL reads its closed socket. What is still owned after that is left to the
        partitions' thread."""
        deadline = time.monotonic() + OWNER_WAIT_S
        missing = sorted(self._preferred)
        while True:
            if self._fair:
                share = self._share()
                for p in range(self.partitions):
                    if len(self._parts) >= share:
                        return
                    if p not in self._parts:
                        self._take(p)
            else:
                missing = [p for p in missing if not self._take(p)]
                if not missing:
                    return
            if time.monotonic() > deadline:
                return
            time.sleep(0.05)

    def _join(self) -> None:
        """Count this broker among the store's (a session lock of its own in `MEMBERS`)."""
        while True:
            member = secrets.randbelow(2**31 - 1) + 1
            row = (
                self._control_session()
                .execute("SELECT pg_try_advisory_lock(%s, %s)", (self._members_space, member))
                .fetchone()
            )
            if row and row[0]:
                return

    def _share(self) -> int:
        """A fair share of the partitions: their count over the brokers', rounded up."""
        row = (
            self._control_session()
            .execute(
                "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted "
                "AND objsubid = 2 AND classid = %s::oid "
                "AND database = (SELECT oid FROM pg_database WHERE datname = current_database())",
                (self._members_space,),
            )
            .fetchone()
        )
        brokers = max(1, int(str(row[0])) if row else 1)
        return -(-self.partitions // brokers)

    def _tend_fairly(self, owned: set[int]) -> None:
        """No partition preferred: one handed on if a broker preferring it waits or if more
        than a fair share are owned here; one taken if fewer and one is free."""
        wanted = [p for p in owned if not self._probe(lock_key(self.schema, p, "want"))]
        if wanted:
            self._release(wanted[0])
            return
        share = self._share()
        if len(owned) > share:
            self._release(max(owned))
            return
        if len(owned) < share:
            for p in range(self.partitions):
                free = p not in owned and self._probe(lock_key(self.schema, p))
                if free and self._probe(lock_key(self.schema, p, "want")) and self._take(p):
                    return

    def _release(self, p: int) -> None:
        """Stop serving partition `p` (another broker prefers it): its operations from now
        on are refused here, and its lock goes with its session once the one running ends."""
        with self._parts_lock:
            part = self._parts.pop(p, None)
        if part is not None:
            with part.store.queues.log.lock:
                part.close()
            log.info("partition %d of %s handed back", p, self.schema)

    def _control_session(self) -> Connection:
        """The control session (the wants it holds, the probes): a broker's, not a writer's."""
        assert self._control is not None
        return self._control

    def _probe(self, key: int) -> bool:
        """Whether nobody holds the lock `key` (taken and let go at once)."""
        row = self._control_session().execute("SELECT pg_try_advisory_lock(%s)", (key,)).fetchone()
        if row and row[0]:
            self._control_session().execute("SELECT pg_advisory_unlock(%s)", (key,))
            return True
        return False

    def _tend(self, now: float) -> None:
        """One look at ownership: drop what lost its session, take what is preferred and
        free (wanting it meanwhile), adopt what has had no owner for a while, hand back what
        its preferrer waits for."""
        with self._parts_lock:
            lost = [part for part in self._parts.values() if part.lost]
        for part in lost:
            self._drop(part)
            log.warning("partition %d lost its session", part.number)
        owned = self.owned()
        if self._fair:
            self._tend_fairly(owned)
            return
        for p in range(self.partitions):
            want = lock_key(self.schema, p, "want")
            if p in owned:
                if p not in self._preferred and not self._probe(want):
                    self._release(p)
                continue
            if p in self._preferred:
                if p not in self._wanting:  # (once held: a session's advisory locks count up)
                    row = (
                        self._control_session()
                        .execute("SELECT pg_try_advisory_lock(%s)", (want,))
                        .fetchone()
                    )
                    if row and row[0]:  # (else an adopter's probe held it a moment: again)
                        self._wanting.add(p)
                if self._take(p):
                    self._control_session().execute("SELECT pg_advisory_unlock(%s)", (want,))
                    self._wanting.discard(p)
                continue
            if not self._probe(lock_key(self.schema, p)):
                self._free_since.pop(p, None)
                continue
            since = self._free_since.setdefault(p, now)
            grace = now - self._started >= ADOPT_AFTER_S and now - since >= ADOPT_AFTER_S
            if grace and self._probe(want) and self._take(p):
                self._free_since.pop(p, None)

    def _run(self) -> None:
        """The partitions' thread: inboxes taken in as soon as they are told of, ownership
        looked at every `TICK_S`."""
        last = 0.0
        while not self._stop.is_set():
            try:
                with self._connect() as conn:
                    conn.execute(f'LISTEN "{self._inbox_channel}"')
                    while not self._stop.is_set():
                        notes = list(conn.notifies(timeout=TICK_S, stop_after=1))
                        notes += conn.notifies(timeout=0.0)
                        told = _told(n.payload for n in notes)
                        now = time.monotonic()
                        due = now - last >= TICK_S
                        if due:
                            self._tend(now)
                            self._tell_depths()
                            last = now
                        self._take_inboxes(told, due)
            except Exception as exc:  # (the thread goes on: ownership must be looked at)
                if self._stop.is_set():
                    return
                log.warning("partitions' look failed (%r); connecting again", exc)
                with contextlib.suppress(psycopg.Error):
                    self._lost()
                self._stop.wait(TICK_S)

    def _take_inboxes(self, told: dict[int, set[str] | None], every: bool) -> None:
        """Partitions told of their subscribers' deliveries wake those (whose leases take
        the inbox in); others, and every one each tick, take their inbox in here."""
        with self._parts_lock:
            parts = list(self._parts.values())
        for part in parts:
            if not every and part.number not in told:
                continue
            part.store.queues.inbox_waiting = True
            subscribers = None if every else told[part.number]
            if subscribers is not None:
                self._arrived(subscribers)
                continue
            try:
                part.take_inbox()
            except Exception as exc:
                if not part.lost:
                    raise
                self._drop(part)  # its session is gone, and the lock with it
                log.warning("partition %d lost its session (%r)", part.number, exc)

    def _drop(self, part: Partition) -> None:
        with self._parts_lock:
            if self._parts.get(part.number) is part:
                del self._parts[part.number]
        part.close()

    def _lost(self) -> None:
        """The control session failed: the wants it held are gone with it."""
        if self._control is not None:
            with contextlib.suppress(psycopg.Error):
                self._control.close()
        self._wanting.clear()
        self._control = self._connect()
        self._join()

    def _tell_depths(self) -> None:
        """Write the depths of the queues owned here that changed since the last tick, for
        other brokers to answer with (the admin's pages through a balancer)."""
        now = time.time()
        depths: dict[str, tuple[int, int, int]] = {}
        for store in self.partition_stores():
            log = store.queues.log
            with log.lock:
                for name, cursor in log.queues():
                    hidden = cursor.hidden(now)
                    depths[name] = (cursor.depth() - hidden, hidden, cursor.queued_bytes())
        changed = [(s, *d) for s, d in depths.items() if self._told.get(s) != d]
        if not changed:
            return
        with self.db.tx() as cur:
            cur.executemany(
                "INSERT INTO log_depths VALUES (%s, %s, %s, %s) ON CONFLICT (subscriber_id) "
                "DO UPDATE SET ready = excluded.ready, leased = excluded.leased, "
                "bytes = excluded.bytes",
                changed,
            )
        self._told.update((s, (r, n, b)) for s, r, n, b in changed)

    def _arrived(self, subscribers: set[str]) -> None:
        change = Change("queued", subscriber_ids=tuple(subscribers))
        for listener in list(self._listeners):
            listener(change)

    # ------------------------------------------------------------------ queue operations

    def apply(self, ops: Sequence[QueueOp]) -> list[Any]:
        """Publishing operations in one transaction of the shared rows and the inboxes; a
        subscriber's operations on its partition (refused unless it is owned here)."""
        answers: list[Any] = [None] * len(ops)
        publishing = [(i, op) for i, op in enumerate(ops) if isinstance(op, PUBLISHING)]
        if publishing:
            published = self._publish([op for _, op in publishing])
            for (i, _), answer in zip(publishing, published, strict=True):
                answers[i] = answer
        by_part: dict[int, list[int]] = {}
        for i, op in enumerate(ops):
            if not isinstance(op, PUBLISHING):
                p = inbox.partition_of(op.subscriber_id, self.partitions)
                by_part.setdefault(p, []).append(i)
        for p, indexes in by_part.items():
            part = self._parts.get(p)
            if part is None:
                for i in indexes:
                    answers[i] = not_here(ops[i].subscriber_id)  # type: ignore[union-attr]
                continue
            done = part.store.apply([ops[i] for i in indexes])
            for i, answer in zip(indexes, done, strict=True):
                answers[i] = answer
        return answers

    def _one(self, op: QueueOp) -> Any:
        answer = self.apply([op])[0]
        if isinstance(answer, Exception):
            raise answer
        return answer

    def _publish(self, ops: Sequence[QueueOp]) -> list[Any]:
        """The publishing operations in one transaction: in the session of a partition
        owned here (its share appended to its log at once, the others' written to their
        inboxes beside it), else in a pooled one; then the inboxes of the other partitions
        owned here taken in (what is published here is leasable here when it returns)."""
        answers: list[Any] = []
        shares: dict[int, inbox.Delivered] = {}
        with self._parts_lock:
            owned = dict(self._parts)
        home = next((part for _, part in sorted(owned.items()) if not part.lost), None)

        def step(cur: Cursor) -> None:
            for op in ops:
                cur.execute("SAVEPOINT op")
                try:
                    answer, share = self._publishing(cur, op)
                except Exception as exc:  # one caller's failure is its answer
                    cur.execute("ROLLBACK TO SAVEPOINT op")
                    answers.append(exc)
                    continue
                cur.execute("RELEASE SAVEPOINT op")
                answers.append(answer)
                for p, delivered in share.items():
                    mine = shares.setdefault(p, inbox.Delivered())
                    mine.fanouts += delivered.fanouts
                    mine.checked += delivered.checked
            if home is not None and (here := shares.pop(home.number, None)):
                home.store.queues.take(cur, here)
            inbox.put(cur, self.schema, shares, self._inbox_channel)

        try:
            if home is None:
                with self.db.tx() as cur:
                    step(cur)
            else:  # what was published elsewhere before goes in first: a publisher's order
                home.store.queues.inbox_waiting = True
                home.store.queues.transaction(step)
        except Exception as exc:
            return [exc] * len(ops)
        for p in shares:
            part = owned.get(p)
            if part is not None and part is not home:
                part.store.queues.inbox_waiting = True
                with contextlib.suppress(Exception):  # (its next transaction takes them)
                    part.take_inbox()
        return answers

    def _publishing(self, cur: Cursor, op: QueueOp) -> tuple[Any, dict[int, inbox.Delivered]]:
        refuse_malformed(op)
        match op:
            case Enqueue(messages, fresh, fanouts):
                if fresh:  # a new publication's: nothing to check, as fan-outs
                    fanned, checked = [*fanouts, *_as_fanouts(messages)], []
                else:  # claimed here, checked against fresh deliveries by the owner
                    fanned = list(fanouts)
                    made = self._made_before(cur, messages)
                    checked = [
                        m
                        for m in messages
                        if (m.subscriber_id, m.dedup_key) not in made
                        and claim_delivery(self.db, cur, m)
                    ]
                share = inbox.split(fanned, checked, self.partitions)
                return sum(d.size() for d in share.values()), share
            case PublishOnce():
                duplicates, new = self._dedup.claim(cur, op)
                return duplicates, inbox.split(new, (), self.partitions)
            case Owe(evaluations):
                return owe_step(self.db, evaluations)(cur), {}
            case Discharge(publication_ids):
                return discharge_step(self.db, publication_ids)(cur), {}
        raise Refused(f"not a publishing operation: {op!r}")

    def _made_before(self, cur: Cursor, messages: Sequence[NewMessage]) -> set[tuple[str, str]]:
        """The (subscriber, key) among `messages` a fresh publication already delivered: in
        the recipients its partition's log remembers (`log_publications`, by number)."""
        by_part: dict[int, list[NewMessage]] = {}
        for m in messages:
            by_part.setdefault(inbox.partition_of(m.subscriber_id, self.partitions), []).append(m)
        made: set[tuple[str, str]] = set()
        for p, wanted in by_part.items():
            name = f'"{inbox.partition_schema(self.schema, p)}"'
            cur.execute("SELECT to_regclass(%s)", (f"{name}.log_publications",))
            if cur.fetchone()[0] is None:
                continue  # never owned: no log yet
            cur.execute(
                f"SELECT dedup_key, recipients FROM {name}.log_publications "
                "WHERE dedup_key = ANY(%s)",
                (list({m.dedup_key for m in wanted}),),
            )
            recipients = {str(k): set(_numbers(bytes(b))) for k, b in cur.fetchall()}
            cur.execute(
                f"SELECT name, number FROM {name}.log_names WHERE name = ANY(%s)",
                (list({m.subscriber_id for m in wanted}),),
            )
            numbers = {str(n): int(i) for n, i in cur.fetchall()}
            for m in wanted:
                if numbers.get(m.subscriber_id, -1) in recipients.get(m.dedup_key, ()):
                    made.add((m.subscriber_id, m.dedup_key))
        return made

    # ------------------------------------------------------------------ one subscriber's queue

    def _owner_of(self, subscriber_id: str) -> PartitionQueues:
        """The queues of the partition holding `subscriber_id`'s, its inbox taken in (a read
        sees what was published before it); refused unless owned here."""
        part = self._part(subscriber_id)
        if part is None:
            raise not_here(subscriber_id)
        if part.store.queues.inbox_waiting:
            part.take_inbox()
        return part.store

    def remove_subscriber(self, subscriber_id: str) -> bool:
        found = super().remove_subscriber(subscriber_id)
        with self.db.tx() as cur:
            cur.execute("DELETE FROM log_depths WHERE subscriber_id = %s", (subscriber_id,))
        self._forget(subscriber_id)  # (elsewhere, its owner hears of it: `watch`)
        return found

    def _forget(self, subscriber_id: str) -> None:
        part = self._part(subscriber_id)
        if part is not None:
            queues = part.store.queues
            with queues.log.lock:
                if queues.log.forget(subscriber_id) is not None:
                    queues.commit_alone()

    def redrive(self, subscriber_id: str, ids: Sequence[int] | None, now: float) -> int:
        return self._owner_of(subscriber_id).redrive(subscriber_id, ids, now)

    def browse(self, subscriber_id: str, after: int, limit: int, now: float) -> QueuedPage:
        return self._owner_of(subscriber_id).browse(subscriber_id, after, limit, now)

    def purge(self, subscriber_id: str, now: float) -> int:
        return self._owner_of(subscriber_id).purge(subscriber_id, now)

    def depth(self, subscriber_id: str, now: float) -> QueueDepth:
        """Its owner's count; elsewhere, the one its owner last told (within a tick)."""
        if self._part(subscriber_id) is not None:
            return self._owner_of(subscriber_id).depth(subscriber_id, now)
        told = self._told_depth(subscriber_id)
        with self.db.read() as cur:
            cur.execute(
                "SELECT COUNT(*) FROM dead_letters WHERE subscriber_id = %s", (subscriber_id,)
            )
            dead = int(cur.fetchone()[0])
        return QueueDepth(told[0], told[1], dead)

    def _told_depth(self, subscriber_id: str) -> tuple[int, int, int]:
        """(ready, leased, bytes) of a queue owned elsewhere, as its owner last wrote them."""
        with self.db.read() as cur:
            cur.execute(
                "SELECT ready, leased, bytes FROM log_depths WHERE subscriber_id = %s",
                (subscriber_id,),
            )
            row = cur.fetchone()
        return (int(row[0]), int(row[1]), int(row[2])) if row else (0, 0, 0)

    def may_lease(self, subscriber_id: str, now: float) -> bool:
        part = self._part(subscriber_id)  # (elsewhere: the lease itself says where it is)
        if part is None or part.store.queues.inbox_waiting:  # (its lease takes it in)
            return True
        return part.store.may_lease(subscriber_id, now)

    def queue_size(self, subscriber_id: str) -> tuple[int, int]:
        """Its owner's count; elsewhere the one its owner last told (so a broker refusing
        new deliveries to a full queue refuses them wherever they are published)."""
        if self._part(subscriber_id) is None:
            ready, leased, size = self._told_depth(subscriber_id)
            return ready + leased, size
        return self._owner_of(subscriber_id).queue_size(subscriber_id)

    def trim_queue(self, subscriber_id: str, max_messages: int, max_bytes: int, now: float) -> int:
        part = self._part(subscriber_id)
        if part is None:
            return 0
        return part.store.trim_queue(subscriber_id, max_messages, max_bytes, now)

    # ------------------------------------------------------------------ every queue here

    def partition_stores(self) -> list[PartitionQueues]:
        """The queues of each partition owned here, by number."""
        with self._parts_lock:
            return [part.store for _, part in sorted(self._parts.items())]

    def expire(self, now: float, retention_s: float) -> int:
        stores = self.partition_stores()  # (each drops the shared dedup rows past it too)
        if not stores:
            with self.db.tx() as cur:
                cur.execute("DELETE FROM dedup WHERE enqueued_at < %s", (now - retention_s,))
        return sum(store.expire(now, retention_s) for store in stores)

    def queue_totals(self, now: float) -> tuple[QueueDepth, float | None]:
        """The queues of the partitions owned here, their dead letters too: each broker's
        metrics count its own, and their sum is the cluster's."""
        stats = [s for store in self.partition_stores() for s in store._stats(now)]
        with self.db.read() as cur:
            cur.execute("SELECT subscriber_id, COUNT(*) FROM dead_letters GROUP BY subscriber_id")
            dead = sum(int(n) for sid, n in cur.fetchall() if self.owns(str(sid)))
        ready = sum(s.ready for s in stats)
        leased = sum(s.leased for s in stats)
        oldest = min((s.oldest_enqueued_at for s in stats), default=None)
        return QueueDepth(ready, leased, dead), oldest

    def deepest_queues(self, now: float, limit: int) -> list[QueueStats]:
        stats = [s for store in self.partition_stores() for s in store._stats(now)]
        stats.sort(key=lambda s: (-(s.ready + s.leased), s.subscriber_id))
        return stats[:limit]

    def publication_progress(self, publication_id: str) -> tuple[bool, int]:
        """Whether it still owes evaluations, and its deliveries so far: in every
        partition's log (appended) and inbox (not yet), whoever owns them."""
        with self.db.read() as cur:
            cur.execute(
                "SELECT COUNT(*) FROM pending_evaluations WHERE publication_id = %s",
                (publication_id,),
            )
            owed = int(cur.fetchone()[0]) > 0
            delivered = 0
            for p in range(self.partitions):
                name = f'"{inbox.partition_schema(self.schema, p)}"'
                cur.execute(f"SELECT to_regclass('{name}.log_publications')")
                if cur.fetchone()[0] is None:
                    continue  # never owned yet: all it received waits in its inbox
                cur.execute(
                    "SELECT COALESCE(SUM(length(recipients)), 0) / 4 FROM "
                    f"{name}.log_publications WHERE dedup_key = %s "
                    "OR (dedup_key > %s AND dedup_key < %s)",
                    (publication_id, f"{publication_id}#", f"{publication_id}$"),
                )
                delivered += int(cur.fetchone()[0])
            for p in range(self.partitions):
                name = f'"{inbox.partition_schema(self.schema, p)}"'
                cur.execute(f"SELECT entries FROM {name}.log_inbox")
                delivered += sum(
                    _deliveries_of(inbox.decode(bytes(r[0])), publication_id)
                    for r in cur.fetchall()
                )
            cur.execute("SELECT COUNT(*) FROM dedup WHERE dedup_key = %s", (publication_id,))
            return owed, delivered + int(cur.fetchone()[0])

    def endpoints(self) -> list[Endpoint]:
        """The webhooks of subscribers whose queues are owned here: pushed by this broker."""
        return [e for e in super().endpoints() if self.owns(e.subscriber_id)]

    # ------------------------------------------------------------------ feed, closing

    def watch(self, on_change: Callable[[Change], None]) -> Callable[[], None]:
        def told(change: Change) -> None:
            if change.kind == "subscriber_removed":
                self._forget(change.subscriber_id)
            on_change(change)

        self._listeners.append(on_change)
        stop = super().watch(told)

        def unwatch() -> None:
            stop()
            with contextlib.suppress(ValueError):
                self._listeners.remove(on_change)

        return unwatch

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5.0)
        if self._control is not None:
            self._control.close()
        with self._parts_lock:
            parts, self._parts = list(self._parts.values()), {}
        for part in parts:
            with part.store.queues.log.lock:
                part.close()
        super().close()


def _numbers(blob: bytes) -> array[int]:
    numbers = array("i")
    numbers.frombytes(blob)
    return numbers


def _as_fanouts(messages: Sequence[NewMessage]) -> list[Fanout]:
    """Fresh deliveries as fan-outs: a run of one publication's (one key, one body) is one,
    as the log makes it one post."""
    out = []
    for (key, body), run in groupby(messages, key=lambda m: (m.dedup_key, m.body)):
        group = list(run)
        first = group[0]
        owners = {m.subscriber_id: m.subscription_ids for m in group}
        out.append(Fanout(first.publication_id, key, body, first.enqueued_at, owners))
    return out


def _told(payloads: Iterable[str]) -> dict[int, set[str] | None]:
    """The partitions notifications named, each with its subscribers (None: some not
    named, so the inbox is taken in by its owner at once)."""
    told: dict[int, set[str] | None] = {}
    for payload in payloads:
        found = inbox.noted(payload)
        if found is None:
            continue
        p, owners = found
        if owners is None or (p in told and told[p] is None):
            told[p] = None
        else:
            told.setdefault(p, set()).update(owners)  # type: ignore[union-attr]
    return told


def _deliveries_of(delivered: inbox.Delivered, publication_id: str) -> int:
    fanned = sum(len(f.owners) for f in delivered.fanouts if f.publication_id == publication_id)
    return fanned + sum(1 for m in delivered.checked if m.publication_id == publication_id)
