"""Pending function evaluations in the SQL store (`tidings.broker.functions`).

A publication's function evaluations are recorded (`Owe`) in the same group commit as its
topic and content deliveries, claimed by one broker at a time as a queue message is leased
(a claimant and a time the claim runs out), and removed (`Discharge`) once every evaluation
is done. A broker that dies holding claims leaves them to run out; any broker, or the same
one restarted, then claims and finishes them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import orjson

from tidings.store.base import PendingEvaluation
from tidings.store.database import Cursor, Database

COLUMNS = "publication_id, publication, subscription_ids, claimed_by, claimed_until"


def owe_step(db: Database, evaluations: Sequence[PendingEvaluation]) -> Callable[[Cursor], int]:
    rows = [
        (e.publication_id, e.publication.decode(), orjson.dumps(list(e.subscription_ids)).decode(),
         e.claimed_by, e.claimed_until)
        for e in evaluations
    ]  # fmt: skip
    sql = db.dialect.ignoring_duplicates(
        f"pending_evaluations ({COLUMNS})", "VALUES (?, ?, ?, ?, ?)"
    )

    def op(cur: Cursor) -> int:
        new = 0
        for row in rows:
            cur.execute(sql, row)
            new += max(int(cur.rowcount), 0)
        return new

    return op


def discharge_step(db: Database, publication_ids: Sequence[str]) -> Callable[[Cursor], int]:
    ids = list(dict.fromkeys(publication_ids))
    sql = db.q(
        f"DELETE FROM pending_evaluations WHERE publication_id IN ({', '.join('?' * len(ids))})"
    )

    def op(cur: Cursor) -> int:
        if not ids:
            return 0
        cur.execute(sql, ids)
        return int(cur.rowcount)

    return op


class Pending:
    """Claiming and renewing; each call is one transaction."""

    def __init__(self, db: Database) -> None:
        self._db = db

    def claim(self, claimant: str, now: float, until: float, limit: int) -> list[PendingEvaluation]:
        d = self._db.dialect
        with self._db.tx() as cur:
            # `m`: the alias the dialect's row locking names (two brokers never claim one row)
            cur.execute(
                d.skipping_locked(
                    "SELECT m.publication_id FROM pending_evaluations m "
                    "WHERE m.claimed_until <= ? ORDER BY m.claimed_until LIMIT ?"
                ),
                (now, limit),
            )
            ids = [str(r[0]) for r in cur.fetchall()]
            if not ids:
                return []
            cur.execute(
                d.q(
                    "UPDATE pending_evaluations SET claimed_by = ?, claimed_until = ? "
                    f"WHERE publication_id IN ({', '.join('?' * len(ids))}) RETURNING {COLUMNS}"
                ),
                (claimant, until, *ids),
            )
            return sorted((_evaluation(r) for r in cur.fetchall()), key=lambda e: e.publication_id)

    def renew(self, claimant: str, publication_ids: Sequence[str], until: float) -> int:
        ids = list(dict.fromkeys(publication_ids))
        if not ids:
            return 0
        with self._db.tx() as cur:
            cur.execute(
                self._db.q(
                    "UPDATE pending_evaluations SET claimed_until = ? WHERE claimed_by = ? "
                    f"AND publication_id IN ({', '.join('?' * len(ids))})"
                ),
                (until, claimant, *ids),
            )
            return int(cur.rowcount)


def _evaluation(row: Sequence[Any]) -> PendingEvaluation:
    text = row[1]
    return PendingEvaluation(
        str(row[0]),
        text.encode() if isinstance(text, str) else bytes(text),
        tuple(orjson.loads(row[2])),
        str(row[3]),
        float(row[4]),
    )
