"""The store with its queues as a log (`layout=log`): the SQL store's rooms for everything
but the queues, whose operations, counts, browsing and expiry read the log
(`logqueues.py`) instead of the `messages` rows. Dead letters stay rows (`dead_letters`),
as they are rare and read by id.

`LogLayout` is that, over either engine; `SQLiteLogStore` is the embedded default (one
process owns the file: `PATH.owner` locked), `pglog.PostgresLogStore` the same on
PostgreSQL (one broker owns the schema: an advisory lock).
"""

from __future__ import annotations

import fcntl
from collections.abc import Sequence
from itertools import islice
from pathlib import Path
from typing import IO, Any

from tidings.errors import ErrorCode, TidingsError
from tidings.model import ID_MAX
from tidings.private import DIR_MODE
from tidings.store.base import (
    Busy,
    QueueDepth,
    QueuedMessage,
    QueuedPage,
    QueueOp,
    QueueStats,
)
from tidings.store.bodies import drop_bodies
from tidings.store.browse import PAGE_BYTES
from tidings.store.checkpoints import Checkpoints
from tidings.store.database import Cursor, loads_or
from tidings.store.log.cursor import Cursor as LogCursor
from tidings.store.log.queuelog import Post, QueueLog
from tidings.store.logqueues import LogQueues, pack, unpack
from tidings.store.queues import within
from tidings.store.sql import SQLStore
from tidings.store.sqlite import SQLiteStore

OWNED_ELSEWHERE = (
    "one process owns such a store (several brokers or writers: layout=rows, or PostgreSQL)"
)


def _own(path: str) -> IO[bytes] | None:
    """Hold `<path>.owner` locked while the store is open: the queues live in this process's
    memory, so a second process opening them would serve its own stale copy."""
    if path == ":memory:":
        return None
    Path(path).parent.mkdir(parents=True, exist_ok=True, mode=DIR_MODE)
    owner = open(f"{path}.owner", "ab")  # noqa: SIM115 (held open while the store is)
    try:
        fcntl.flock(owner, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        owner.close()
        raise TidingsError(
            ErrorCode.CONFIG_INVALID,
            field="store_url",
            detail=f"{path} keeps its queues as a log, and another process has it open: "
            + OWNED_ELSEWHERE,
        ) from None
    return owner


OLDEST_AMONG = 64  # a queue's first deliveries its oldest time is looked for among


class LogLayout(SQLStore):
    """The queue operations, counts and browsing over `queues` (set by the engine's class,
    once its database is open)."""

    queues: LogQueues

    # ---- queue operations

    def apply(self, ops: Sequence[QueueOp]) -> list[Any]:
        return self.queues.apply(ops)

    def _one(self, op: QueueOp) -> Any:
        return self.queues.one(op)

    def remove_subscriber(self, subscriber_id: str) -> bool:
        found = super().remove_subscriber(subscriber_id)
        queues = self.queues
        with queues.memory() as log:
            if log.forget(subscriber_id) is not None:
                queues.commit_alone()  # its name and state gone with its queue
        return found

    # ---- dead letters back into the queue

    def redrive(self, subscriber_id: str, ids: Sequence[int] | None, now: float) -> int:
        q = self.db.q
        where = "d.subscriber_id = ?"
        params: list[Any] = [subscriber_id]
        if ids is not None:
            ids = [i for i in ids if 0 <= i <= ID_MAX]
            if not ids:
                return 0
            where += f" AND d.id IN ({', '.join('?' * len(ids))})"
            params += ids
        queues = self.queues

        def step(cur: Cursor) -> int:
            cur.execute(
                q(
                    "SELECT d.id, d.publication_id, d.subscription_ids, b.body, d.body_key "
                    "FROM dead_letters d "
                    f"LEFT JOIN bodies b ON b.key = d.body_key WHERE {where} ORDER BY d.id"
                ),
                params,
            )
            rows = cur.fetchall()
            posts = [
                Post(
                    pack(str(r[1]), (r[3] or "null").encode()),
                    [subscriber_id],
                    [queues.tag(loads_or(r[2], []))],
                    now,
                )
                for r in rows
            ]
            marks = ", ".join("?" * len(rows))
            if rows:
                cur.execute(
                    q(f"DELETE FROM dead_letters WHERE id IN ({marks})"), [r[0] for r in rows]
                )
                drop_bodies(self.db, cur, [str(r[4]) for r in rows])
                queues.log.append(posts)
            return len(rows)

        return queues.transaction(step)

    # ---- reading and emptying a queue

    def browse(self, subscriber_id: str, after: int, limit: int, now: float) -> QueuedPage:
        with self.queues.memory() as log:
            cursor = log.cursor(subscriber_id)
            if cursor is None:
                return QueuedPage()
            waiting = []
            for seq, body, tag in cursor.entries(after):
                if not cursor.leased_at(seq, now):
                    waiting.append((seq, body, tag))
                    if len(waiting) > limit:
                        break
            sizes = [(seq, log.body_length(body)) for seq, body, _ in waiting[:limit]]
            chosen = set(within(sizes, PAGE_BYTES))
            page_rows = [w for w in waiting if w[0] in chosen]
            bodies = log.read({body for _, body, _ in page_rows})
            page = QueuedPage()
            for seq, body, tag in page_rows:
                publication_id, raw = unpack(bodies.get(body, b"\nnull"))
                at = log.body_time(body)
                page.append(
                    QueuedMessage(
                        seq,
                        subscriber_id,
                        publication_id,
                        self.queues.subscription_ids(tag),
                        loads_or(raw.decode(errors="replace"), None),
                        at,
                        cursor.attempts.get(seq, 0),
                        max(cursor.ready_at(seq) or at, at),
                    )
                )
            page.more = len(waiting) > len(page_rows)
            return page

    def purge(self, subscriber_id: str, now: float) -> int:
        with self.queues.memory() as log:
            cursor = log.cursor(subscriber_id)
            if cursor is None:
                return 0
            return self.queues.settle_out(
                subscriber_id, lambda seq, _: not cursor.leased_at(seq, now), None, now
            )

    def expire(self, now: float, retention_s: float) -> int:
        cutoff = now - retention_s
        with self.queues.memory() as log:
            queues = list(log.queues())
        moved = 0
        for name, cursor in queues:
            with log.lock:  # (the committer's thread changes cursors meanwhile)
                if not cursor.depth() or _oldest(log, cursor) >= cutoff:
                    continue  # (its first deliveries are the oldest: no scan of a young queue)
                moved += self.queues.settle_out(
                    name, lambda _, body: log.body_time(body) < cutoff, "retention", now
                )
        with self.db.tx() as cur:
            cur.execute(self.db.q("DELETE FROM dedup WHERE enqueued_at < ?"), (cutoff,))
            cur.execute(self.db.q("DELETE FROM log_publications WHERE enqueued_at < ?"), (cutoff,))
        return moved

    def may_lease(self, subscriber_id: str, now: float) -> bool:
        queues = self.queues  # (a reload that failed: the lease's transaction reads memory)
        return not queues.loaded or queues.log.may_take(subscriber_id, now)

    def queue_size(self, subscriber_id: str) -> tuple[int, int]:
        with self.queues.memory() as log:
            cursor = log.cursor(subscriber_id)
            return (0, 0) if cursor is None else (cursor.depth(), cursor.queued_bytes())

    def trim_queue(self, subscriber_id: str, max_messages: int, max_bytes: int, now: float) -> int:
        with self.queues.memory() as log:
            cursor = log.cursor(subscriber_id)
            if cursor is None:
                return 0
            newest = list(cursor.entries())  # in sequence order: newest last
            newest.reverse()
            kept, size, first_gone = 0, 0, None
            for seq, body, _ in newest:
                length = log.body_length(body)
                if kept + 1 > max_messages or size + length > max_bytes:
                    first_gone = seq
                    break
                kept, size = kept + 1, size + length
            if first_gone is None:
                return 0
            last = first_gone
            return self.queues.settle_out(
                subscriber_id, lambda seq, _: seq <= last, "overflow", now
            )

    # ---- counts

    def depth(self, subscriber_id: str, now: float) -> QueueDepth:
        with self.queues.memory() as log:
            cursor = log.cursor(subscriber_id)
            total = 0 if cursor is None else cursor.depth()
            hidden = 0 if cursor is None else cursor.hidden(now)
        with self.db.read() as cur:
            cur.execute(
                self.db.q("SELECT COUNT(*) FROM dead_letters WHERE subscriber_id = ?"),
                (subscriber_id,),
            )
            dead = int(cur.fetchone()[0])
        return QueueDepth(total - hidden, hidden, dead)

    def _stats(self, now: float) -> list[QueueStats]:
        out = []
        with self.queues.memory() as log:
            for name, cursor in log.queues():
                total = cursor.depth()
                if total:
                    hidden = cursor.hidden(now)
                    out.append(QueueStats(name, total - hidden, hidden, _oldest(log, cursor)))
        return out

    def queue_totals(self, now: float) -> tuple[QueueDepth, float | None]:
        stats = self._stats(now)
        with self.db.read() as cur:
            cur.execute("SELECT COUNT(*) FROM dead_letters")
            dead = int(cur.fetchone()[0])
        ready = sum(s.ready for s in stats)
        leased = sum(s.leased for s in stats)
        oldest = min((s.oldest_enqueued_at for s in stats), default=None)
        return QueueDepth(ready, leased, dead), oldest

    def deepest_queues(self, now: float, limit: int) -> list[QueueStats]:
        stats = sorted(self._stats(now), key=lambda s: (-(s.ready + s.leased), s.subscriber_id))
        return stats[:limit]

    def publication_progress(self, publication_id: str) -> tuple[bool, int]:
        q = self.db.q
        with self.db.read() as cur:
            cur.execute(
                q("SELECT COUNT(*) FROM pending_evaluations WHERE publication_id = ?"),
                (publication_id,),
            )
            owed = int(cur.fetchone()[0]) > 0
            cur.execute(
                q(
                    "SELECT COALESCE(SUM(length(recipients)), 0) / 4 FROM log_publications "
                    "WHERE dedup_key = ? OR (dedup_key > ? AND dedup_key < ?)"
                ),
                (publication_id, f"{publication_id}#", f"{publication_id}$"),
            )
            fresh = int(cur.fetchone()[0])
            cur.execute(q("SELECT COUNT(*) FROM dedup WHERE dedup_key = ?"), (publication_id,))
            return owed, fresh + int(cur.fetchone()[0])


class SQLiteLogStore(LogLayout, SQLiteStore):
    """SQLite, its queues as a log (one process owns them: the embedded store)."""

    def __init__(self, path: str, synchronous: str = "NORMAL", segment_bodies: int = 4096) -> None:
        self._owner = _own(path)
        try:
            super().__init__(path, synchronous)
            self.queues = LogQueues(self.db, segment_bodies)
        except BaseException:
            if self._owner is not None:
                self._owner.close()
            raise
        self.checkpoints: Checkpoints | None = None  # in memory: no write-ahead log
        if path != ":memory:":  # commits run on the loop's thread: none checkpoints there
            self._conn.execute("PRAGMA wal_autocheckpoint=0")
            self.checkpoints = Checkpoints(self._connect)

    def apply_now(self, ops: Sequence[QueueOp]) -> list[Any] | None:
        if not self.queues.loaded:  # (a reload that failed is done again on a worker thread)
            return None
        with self.nowait():
            try:
                return self.queues.apply(ops, wait=False)
            except Busy:
                return None

    def close(self) -> None:
        if self.checkpoints is not None:
            self.checkpoints.close()
        super().close()
        if self._owner is not None:
            self._owner.close()  # the lock goes with it (and with the process, killed or not)


def _oldest(log: QueueLog, cursor: LogCursor) -> float:
    """The oldest enqueueing time among a queue's first deliveries (times follow the
    queue's order but for a few: a batch's, a redrive's): not a scan of a deep queue."""
    return min(log.body_time(body) for _, body, _ in islice(cursor.entries(), OLDEST_AMONG))
