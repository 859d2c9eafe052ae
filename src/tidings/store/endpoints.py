"""Webhook endpoints in the SQL store (`tidings.delivery.webhooks`): at most one per
subscriber, stored only for a subscriber that exists, deleted with it."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tidings.store.base import Endpoint, EndpointState
from tidings.store.database import Database

# endpoints of subscribers that exist (a deletion racing a PUT on another broker may leave one)
ENDPOINTS = (
    "SELECT e.subscriber_id, e.url, e.secret, e.state, e.reason, e.failures, e.updated_at, "
    "e.retention_s "
    "FROM endpoints e JOIN subscribers s ON s.id = e.subscriber_id"
)
ENDPOINT_SET = ", ".join(
    f"{c} = excluded.{c}"
    for c in ("url", "secret", "state", "reason", "failures", "updated_at", "retention_s")
)


class Endpoints:
    """The `EndpointStore` part of the Store; each call is one transaction."""

    def __init__(self, db: Database) -> None:
        self._db = db

    def set(self, subscriber_id: str, endpoint: Endpoint | None) -> bool:
        q = self._db.q
        with self._db.tx() as cur:
            if endpoint is None:
                cur.execute(q("DELETE FROM endpoints WHERE subscriber_id = ?"), (subscriber_id,))
                return bool(cur.rowcount)
            cur.execute(  # only for a subscriber that exists
                q(
                    "INSERT INTO endpoints (subscriber_id, url, secret, state, reason, failures, "
                    "updated_at, retention_s) SELECT id, ?, ?, ?, ?, ?, ?, ? FROM subscribers "
                    f"WHERE id = ? ON CONFLICT (subscriber_id) DO UPDATE SET {ENDPOINT_SET}"
                ),
                (*_endpoint_row(endpoint)[1:], subscriber_id),
            )
            return bool(cur.rowcount)

    def get(self, subscriber_id: str) -> Endpoint | None:
        with self._db.read() as cur:
            cur.execute(self._db.q(f"{ENDPOINTS} WHERE e.subscriber_id = ?"), (subscriber_id,))
            row = cur.fetchone()
        return _endpoint(row) if row else None

    def all(self) -> list[Endpoint]:
        with self._db.read() as cur:
            cur.execute(f"{ENDPOINTS} ORDER BY e.subscriber_id")
            return [_endpoint(row) for row in cur.fetchall()]

    def set_state(
        self,
        subscriber_id: str,
        state: EndpointState,
        reason: str | None,
        failures: int,
        now: float,
    ) -> bool:
        with self._db.tx() as cur:
            cur.execute(
                self._db.q(
                    "UPDATE endpoints SET state = ?, reason = ?, failures = ?, updated_at = ? "
                    "WHERE subscriber_id = ?"
                ),
                (state, reason, failures, now, subscriber_id),
            )
            return bool(cur.rowcount)


def _endpoint_row(e: Endpoint) -> tuple[Any, ...]:
    return (e.subscriber_id, e.url, e.secret, e.state, e.reason, e.failures, e.updated_at,
            e.retention_s)  # fmt: skip


def _endpoint(row: Sequence[Any]) -> Endpoint:
    state: EndpointState = "paused" if row[3] == "paused" else "active"
    retention = None if row[7] is None else float(row[7])
    return Endpoint(row[0], row[1], row[2], state, row[4], int(row[5]), float(row[6]), retention)
