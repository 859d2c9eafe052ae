"""Publishers' dedup ids (docs/guarantees.md): a publication that carries a `dedup_id`
claims it, keyed by its publisher's scope and the id, in `publication_dedup` until its
window ends, in the same step of the same
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

from tidings.store.base import DedupClaim, DedupKey, Fanout, PublishOnce
from tidings.store.database import Cursor, Database
from tidings.store.enqueue import enqueue_step

COLUMNS = "publisher, dedup_id, publication_id, published_at, deliveries, expires_at"
CHUNK = 1000  # claims per statement: 6,000 parameters, within SQLite's 32,766


class DedupIds:
    """The dedup-id claims of one database."""

    def __init__(self, db: Database) -> None:
        self._db = db

    def publish_once(self, op: PublishOnce) -> Callable[[Cursor], dict[DedupKey, DedupClaim]]:
        def step(cur: Cursor) -> dict[DedupKey, DedupClaim]:
            duplicates, fresh = self.claim(cur, op)
            if fresh:
                enqueue_step(self._db, [], True, fresh)(cur)
            return duplicates

        return step

    def claim(
        self, cur: Cursor, op: PublishOnce
    ) -> tuple[dict[DedupKey, DedupClaim], list[Fanout]]:
        """Claim the operation's dedup ids: the claims refused (by key, the holder), and the
        fan-outs of the publications whose claims are new, to enqueue."""
        # in key order, so two transactions claiming the same ids wait rather than deadlock
        # (a stable sort: of one key's claims, the first keeps its place)
        claims = sorted(op.claims, key=lambda c: c.key)
        duplicates: dict[DedupKey, DedupClaim] = {}
        for start in range(0, len(claims), CHUNK):
            duplicates.update(self._claim(cur, claims[start : start + CHUNK], op.now))
        refused = {c.publication_id for c in claims if _refused(c, duplicates)}
        return duplicates, [f for f in op.fanouts if f.publication_id not in refused]

    def _claim(
        self, cur: Cursor, claims: Sequence[DedupClaim], now: float
    ) -> dict[DedupKey, DedupClaim]:
        """Three statements for any number of claims: drop the expired ones among their keys,
        insert them all (a held key is skipped), read the holders of those skipped."""
        db = self._db
        keys = list(dict.fromkeys(c.key for c in claims))
        cur.execute(
            db.q(f"DELETE FROM publication_dedup WHERE expires_at <= ? AND {_among(keys)}"),
            (now, *_flat(keys)),
        )
        values = ", ".join(["(?, ?, ?, ?, ?, ?)"] * len(claims))
        insert = db.dialect.ignoring_duplicates("publication_dedup", f"({COLUMNS}) VALUES {values}")
        cur.execute(f"{insert} RETURNING publisher, dedup_id", [v for c in claims for v in _row(c)])
        taken = {(str(r[0]), str(r[1])) for r in cur.fetchall()}
        held = [k for k in keys if k not in taken] + [
            k for k in keys if k in taken and _repeated(k, claims)
        ]
        if not held:
            return {}
        cur.execute(
            db.q(f"SELECT {COLUMNS} FROM publication_dedup WHERE {_among(held)}"), _flat(held)
        )
        return {(str(r[0]), str(r[1])): _claim(r) for r in cur.fetchall()}

    def prune(self, now: float) -> int:
        with self._db.tx() as cur:
            cur.execute(self._db.q("DELETE FROM publication_dedup WHERE expires_at <= ?"), (now,))
            return int(cur.rowcount)


def _among(keys: Sequence[DedupKey]) -> str:
    """`keys`' rows, as a condition on the table's key (row values: SQLite and PostgreSQL)."""
    return f"(publisher, dedup_id) IN ({', '.join(['(?, ?)'] * len(keys))})"


def _flat(keys: Sequence[DedupKey]) -> list[str]:
    return [part for key in keys for part in key]


def _repeated(key: DedupKey, claims: Sequence[DedupClaim]) -> bool:
    """Claimed more than once in one step: the later claims are duplicates of the first."""
    return sum(1 for c in claims if c.key == key) > 1


def _refused(c: DedupClaim, duplicates: dict[DedupKey, DedupClaim]) -> bool:
    held = duplicates.get(c.key)
    return held is not None and held.publication_id != c.publication_id


def _row(c: DedupClaim) -> tuple[str, str, str, float, int, float]:
    return (c.publisher, c.dedup_id, c.publication_id, c.published_at, c.deliveries, c.expires_at)


def _claim(row: Sequence[object]) -> DedupClaim:
    publisher, dedup_id, publication_id, published_at, deliveries, expires_at = row
    return DedupClaim(
        str(publisher),
        str(dedup_id),
        str(publication_id),
        float(str(published_at)),
        int(str(deliveries)),
        float(str(expires_at)),
    )
