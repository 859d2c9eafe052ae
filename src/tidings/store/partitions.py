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
- **Ownership moves** (`ownership.py`): each broker takes the partitions it prefers
  (`own=`; a fair share by default) and, after a grace, adopts any whose owner is gone (its
  session ended: a killed broker's lock goes with it); an adopter hands a partition back
  when the broker preferring it is waiting for it. The new owner reads the partition's log
  from its tables: leases held by the old one are ready again with their attempts counted,
  their receipts refused.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable, Sequence
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
from tidings.store.database import Cursor
from tidings.store.dedup import DedupIds
from tidings.store.dialect import PG_SCHEMA_LOCK
from tidings.store.feed import KEEPALIVE
from tidings.store.logqueues import Refused, claim_delivery, refuse_malformed
from tidings.store.logtables import recipients
from tidings.store.ownership import RETRY_AFTER_S, Ownership, PartitionQueues
from tidings.store.pending import discharge_step, owe_step
from tidings.store.postgres import PostgresStore, split_schema

logger = logging.getLogger("tidings.store")

PUBLISHING = (Enqueue, PublishOnce, Owe, Discharge)
# each queue's depth as its owner last told (every tick): what another broker answers
DEPTHS_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS {schema}.log_depths (subscriber_id TEXT PRIMARY KEY, "
    "ready BIGINT NOT NULL, leased BIGINT NOT NULL, bytes BIGINT NOT NULL)"
)


def not_here(subscriber_id: str) -> TidingsError:
    return TidingsError(
        ErrorCode.UNAVAILABLE,
        detail=f"the queue of {subscriber_id} is held by another broker: try again",
        retry_s=RETRY_AFTER_S,
    )


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
        self.ownership = Ownership(
            self._conninfo, self.schema, partitions, own, self._arrived, self._tell_depths
        )
        self._dedup = DedupIds(self.db)
        self._listeners: list[Callable[[Change], None]] = []
        self._told: dict[str, tuple[int, int, int]] = {}
        try:
            self._prepare()
            if not writer:
                self.ownership.start()
        except BaseException:
            self.close()  # (what was opened, the locks taken)
            raise

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

    def _tell_depths(self) -> None:
        """Write the depths of the queues owned here that changed since the last tick, for
        other brokers to answer with (the admin's pages through a balancer)."""
        now = time.time()
        depths: dict[str, tuple[int, int, int]] = {}
        for store in self.partition_stores():
            try:
                with store.queues.memory() as log:
                    for name, cursor in log.queues():
                        hidden = cursor.hidden(now)
                        depths[name] = (cursor.depth() - hidden, hidden, cursor.queued_bytes())
            except Exception as exc:  # its log unreadable for now: its depths stay as told
                logger.warning("depths of a partition not told: its log was not read (%r)", exc)
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
            part = self.ownership.parts.get(p)
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
        owned, home = self.ownership.home()

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
            inbox.put(cur, self.schema, shares, self.ownership.inbox_channel)

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
            found = recipients(self.db, cur, {m.dedup_key for m in wanted}, name)
            cur.execute(
                f"SELECT name, number FROM {name}.log_names WHERE name = ANY(%s)",
                (list({m.subscriber_id for m in wanted}),),
            )
            numbers = {str(n): int(i) for n, i in cur.fetchall()}
            for m in wanted:
                if numbers.get(m.subscriber_id, -1) in found.get(m.dedup_key, ()):
                    made.add((m.subscriber_id, m.dedup_key))
        return made

    # ------------------------------------------------------------------ one subscriber's queue

    def _owner_of(self, subscriber_id: str) -> PartitionQueues:
        """The queues of the partition holding `subscriber_id`'s, its inbox taken in (a read
        sees what was published before it); refused unless owned here."""
        part = self.ownership.part_of(subscriber_id)
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
        part = self.ownership.part_of(subscriber_id)
        if part is not None:
            queues = part.store.queues
            with queues.memory() as log:
                if log.forget(subscriber_id) is not None:
                    queues.commit_alone()

    def redrive(self, subscriber_id: str, ids: Sequence[int] | None, now: float) -> int:
        return self._owner_of(subscriber_id).redrive(subscriber_id, ids, now)

    def browse(self, subscriber_id: str, after: int, limit: int, now: float) -> QueuedPage:
        return self._owner_of(subscriber_id).browse(subscriber_id, after, limit, now)

    def purge(self, subscriber_id: str, now: float) -> int:
        return self._owner_of(subscriber_id).purge(subscriber_id, now)

    def depth(self, subscriber_id: str, now: float) -> QueueDepth:
        """Its owner's count; elsewhere, the one its owner last told (within a tick)."""
        if self.ownership.part_of(subscriber_id) is not None:
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
        part = self.ownership.part_of(
            subscriber_id
        )  # (elsewhere: the lease itself says where it is)
        if part is None or part.store.queues.inbox_waiting:  # (its lease takes it in)
            return True
        return part.store.may_lease(subscriber_id, now)

    def queue_size(self, subscriber_id: str) -> tuple[int, int]:
        """Its owner's count; elsewhere the one its owner last told (so a broker refusing
        new deliveries to a full queue refuses them wherever they are published)."""
        if self.ownership.part_of(subscriber_id) is None:
            ready, leased, size = self._told_depth(subscriber_id)
            return ready + leased, size
        return self._owner_of(subscriber_id).queue_size(subscriber_id)

    def trim_queue(self, subscriber_id: str, max_messages: int, max_bytes: int, now: float) -> int:
        part = self.ownership.part_of(subscriber_id)
        if part is None:
            return 0
        return part.store.trim_queue(subscriber_id, max_messages, max_bytes, now)

    # ------------------------------------------------------------------ every queue here

    def owned(self) -> set[int]:
        """The partitions this broker serves now."""
        return self.ownership.owned()

    def owns(self, subscriber_id: str) -> bool:
        return self.ownership.part_of(subscriber_id) is not None

    def partition_stores(self) -> list[PartitionQueues]:
        """The queues of each partition owned here, by number."""
        return self.ownership.stores()

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
        self.ownership.close()
        super().close()


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


def _deliveries_of(delivered: inbox.Delivered, publication_id: str) -> int:
    fanned = sum(len(f.owners) for f in delivered.fanouts if f.publication_id == publication_id)
    return fanned + sum(1 for m in delivered.checked if m.publication_id == publication_id)
