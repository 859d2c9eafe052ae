"""A publication's progress in the SQL store: whether function subscriptions still owe it an
evaluation (its record in `pending_evaluations`, removed once every one is done), and how
many deliveries it has made so far (its rows in `dedup`, which remembers every (subscriber,
key) enqueued for as long as the queues' retention; a native publication's key is its id)."""

from __future__ import annotations

from tidings.store.database import Database


def publication_progress(db: Database, publication_id: str) -> tuple[bool, int]:
    """(evaluations still owed, deliveries so far), read in one transaction."""
    with db.read() as cur:
        cur.execute(
            db.q("SELECT COUNT(*) FROM pending_evaluations WHERE publication_id = ?"),
            (publication_id,),
        )
        owed = int(cur.fetchone()[0]) > 0
        cur.execute(db.q("SELECT COUNT(*) FROM dedup WHERE dedup_key = ?"), (publication_id,))
        return owed, int(cur.fetchone()[0])
