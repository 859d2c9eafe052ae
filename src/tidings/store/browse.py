"""Looking into a subscriber's queue without taking from it, and emptying it: the waiting
messages (every one not leased right now) read in FIFO order a page at a time, their leases
and attempts untouched, and purged in one transaction.

A message is leased while it has a receipt and is hidden (`visible_at > now`); the rest wait:
ready ones, and ones handed back with a delay (a nack's, a webhook's backoff). A lease that
ran out leaves its message waiting again. Purging deletes the waiting messages and leaves the
leased ones to their holders: an acknowledgement of one still counts, and one that comes
back (nacked, or its lease running out) waits in the queue again.
"""

from __future__ import annotations

from tidings.store.base import QueuedMessage, QueuedPage
from tidings.store.bodies import drop_bodies
from tidings.store.database import Database, loads_or
from tidings.store.queues import within

WAITING = "(receipt IS NULL OR visible_at <= ?)"  # not leased at `now`
PAGE_BYTES = 4 * 1024 * 1024  # a page's bodies at most (the first always): 1,000 messages of
# 256 KiB would be read into memory, then answered, in one request


class Browsing:
    """Reads and purges of one database's queues; each call is one transaction."""

    def __init__(self, db: Database) -> None:
        self._db = db

    def page(self, subscriber_id: str, after: int, limit: int, now: float) -> QueuedPage:
        """Up to `limit` waiting messages whose id is past `after`, in FIFO order, their
        bodies `PAGE_BYTES` at most (sizes read first, then only the rows that fit); a body
        that does not decode is read as None, rather than failing the page."""
        joined = "FROM messages m LEFT JOIN bodies b ON b.key = m.body_key"
        with self._db.read() as cur:
            cur.execute(
                self._db.q(
                    f"SELECT m.seq, length(b.body) {joined} WHERE m.subscriber_id = ? "
                    f"AND m.seq > ? AND {WAITING} ORDER BY m.seq LIMIT ?"
                ),
                (subscriber_id, after, now, limit + 1),
            )
            sizes = cur.fetchall()
            seqs = within(sizes[:limit], PAGE_BYTES)
            if not seqs:
                return QueuedPage()
            marks = ", ".join("?" * len(seqs))
            cur.execute(
                self._db.q(
                    "SELECT m.seq, m.publication_id, m.subscription_ids, b.body, m.enqueued_at, "
                    f"m.attempt, m.visible_at {joined} WHERE m.seq IN ({marks}) ORDER BY m.seq"
                ),
                seqs,
            )
            rows = cur.fetchall()
        page = QueuedPage(
            QueuedMessage(
                id=int(r[0]),
                subscriber_id=subscriber_id,
                publication_id=r[1],
                subscription_ids=tuple(loads_or(r[2], ())),
                body=loads_or(r[3], None),
                enqueued_at=float(r[4]),
                attempt=int(r[5]),
                ready_at=max(float(r[6]), float(r[4])),
            )
            for r in rows
        )
        page.more = len(sizes) > len(seqs)
        return page

    def purge(self, subscriber_id: str, now: float) -> int:
        """Delete the waiting messages, then the bodies nothing refers to any more; how many
        went. The dedup keys stay: a replay of a purged publication is still a repeat."""
        with self._db.tx() as cur:
            cur.execute(
                self._db.q(
                    f"DELETE FROM messages WHERE subscriber_id = ? AND {WAITING} RETURNING body_key"
                ),
                (subscriber_id, now),
            )
            keys = [str(r[0]) for r in cur.fetchall()]
            drop_bodies(self._db, cur, keys)
        return len(keys)
