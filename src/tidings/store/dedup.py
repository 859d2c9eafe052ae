"""Publishers' dedup ids (docs/guarantees.md): a publication that carries a `dedup_id`
claims it in `publication_dedup` until its window ends, in the same step of the same
transaction that enqueues its deliveries (`PublishOnce`). A claim that finds the id held
is a duplicate: nothing of it is enqueued, and the step answers the first publication's
claim, so a publish retried after a lost answer is answered as the first was.

Two brokers on one PostgreSQL racing with the same id: the second insert waits on the
first's uncommitted key, then (READ COMMITTED) finds it committed and reads it; if the
first rolled back, the second's insert goes in. SQLite has one writer at a time.
An expired claim is replaced when its id comes again; `prune` drops the rest.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from tidings.store.base import DedupClaim, PublishOnce
from tidings.store.database import Cursor, Database
from tidings.store.enqueue import enqueue_step

COLUMNS = "dedup_id, publication_id, published_at, deliveries, expires_at"


class DedupIds:
    """The dedup-id claims of one database."""

    def __init__(self, db: Database) -> None:
        self._db = db

    def publish_once(self, op: PublishOnce) -> Callable[[Cursor], dict[str, DedupClaim]]:
        db = self._db
        drop_expired = db.q("DELETE FROM publication_dedup WHERE dedup_id = ? AND expires_at <= ?")
        claim = db.dialect.ignoring_duplicates(
            "publication_dedup", f"({COLUMNS}) VALUES (?, ?, ?, ?, ?)"
        )
        holder = db.q(f"SELECT {COLUMNS} FROM publication_dedup WHERE dedup_id = ?")

        def step(cur: Cursor) -> dict[str, DedupClaim]:
            duplicates: dict[str, DedupClaim] = {}
            refused: set[str] = set()
            for c in op.claims:
                cur.execute(drop_expired, (c.dedup_id, op.now))
                cur.execute(claim, _row(c))
                if cur.rowcount == 1:
                    continue
                cur.execute(holder, (c.dedup_id,))
                duplicates[c.dedup_id] = _claim(cur.fetchone())
                refused.add(c.publication_id)
            fresh = [f for f in op.fanouts if f.publication_id not in refused]
            if fresh:
                enqueue_step(db, [], True, fresh)(cur)
            return duplicates

        return step

    def prune(self, now: float) -> int:
        with self._db.tx() as cur:
            cur.execute(self._db.q("DELETE FROM publication_dedup WHERE expires_at <= ?"), (now,))
            return int(cur.rowcount)


def _row(c: DedupClaim) -> tuple[str, str, float, int, float]:
    return (c.dedup_id, c.publication_id, c.published_at, c.deliveries, c.expires_at)


def _claim(row: Sequence[object]) -> DedupClaim:
    dedup_id, publication_id, published_at, deliveries, expires_at = row
    return DedupClaim(
        str(dedup_id),
        str(publication_id),
        float(str(published_at)),
        int(str(deliveries)),
        float(str(expires_at)),
    )
