"""Counts over the SQL store's queues, for the admin and the metrics: one queue's depth,
every queue together, and the deepest queues."""

from __future__ import annotations

from tidings.store.base import QueueDepth, QueueStats
from tidings.store.database import Database


class QueueCounts:
    """Read-only counts; each call is one read transaction."""

    def __init__(self, db: Database) -> None:
        self._db = db

    def depth(self, subscriber_id: str, now: float) -> QueueDepth:
        q = self._db.q
        with self._db.read() as cur:
            cur.execute(
                q(
                    "SELECT COALESCE(SUM(CASE WHEN visible_at <= ? THEN 1 ELSE 0 END), 0), "
                    "COALESCE(SUM(CASE WHEN visible_at > ? THEN 1 ELSE 0 END), 0) "
                    "FROM messages WHERE subscriber_id = ?"
                ),
                (now, now, subscriber_id),
            )
            ready, leased = cur.fetchone()
            cur.execute(
                q("SELECT COUNT(*) FROM dead_letters WHERE subscriber_id = ?"), (subscriber_id,)
            )
            dead = cur.fetchone()[0]
        return QueueDepth(int(ready), int(leased), int(dead))

    def totals(self, now: float) -> tuple[QueueDepth, float | None]:
        with self._db.read() as cur:
            cur.execute(
                self._db.q(
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

    def deepest(self, now: float, limit: int) -> list[QueueStats]:
        with self._db.read() as cur:
            cur.execute(
                self._db.q(
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
