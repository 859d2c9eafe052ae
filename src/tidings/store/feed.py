"""PostgreSQL's LISTEN/NOTIFY as the change feed between brokers sharing one database.

A writer calls `pg_notify(channel, payload)` inside its transaction, so a change is told
exactly when it commits; every broker holds one extra connection that LISTENs on the
channel. A dropped connection may have missed notifications: after reconnecting, the feed
tells `resync`, and the broker drops every cache it derived from the store.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

import psycopg
from psycopg import sql
from psycopg.conninfo import make_conninfo

from tidings.store.base import Change

log = logging.getLogger("tidings.store")
POLL_S = 0.25  # how often the listener looks at its stop flag while nothing arrives
RETRY_S = 0.5
# TCP keepalives: a connection that died without a word (a host gone, a firewall dropping
# it) raises within about 20 s instead of never, and the reconnect says `resync`
KEEPALIVE = {"keepalives": 1, "keepalives_idle": 5, "keepalives_interval": 5, "keepalives_count": 3}


def channel(schema: str | None) -> str:
    """One channel per schema: deployments sharing a database do not hear each other."""
    return f"tidings.{schema or 'public'}"[:63]


def payload(change: Change) -> str:
    return f"{change.kind}:{change.subscriber_id}"


def parse(text: str) -> Change | None:
    kind, _, subscriber_id = text.partition(":")
    if kind == "subscriber_removed":
        return Change("subscriber_removed", subscriber_id)
    return None  # a newer broker's kind of change: not ours to act on


class ChangeFeed:
    """A daemon thread LISTENing on `name`, calling `on_change` for each notification."""

    def __init__(self, conninfo: str, name: str, on_change: Callable[[Change], None]) -> None:
        self._conninfo = make_conninfo(conninfo, **KEEPALIVE)
        self._listen = sql.SQL("LISTEN {}").format(sql.Identifier(name))
        self._on_change = on_change
        self._stop = threading.Event()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, name="tidings-feed", daemon=True)
        self._thread.start()
        # LISTEN in place before the broker serves; if it is late, whatever happened before
        # it was in place may have been missed: the first connection then says `resync` too
        self._late = not self._ready.wait(5.0)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5.0)

    def _run(self) -> None:
        first = True
        while not self._stop.is_set():
            try:
                with psycopg.connect(self._conninfo, autocommit=True) as conn:
                    conn.execute(self._listen)
                    self._ready.set()
                    if not first or getattr(self, "_late", False):
                        self._on_change(Change("resync"))
                    first = False
                    self._drain(conn)
            except psycopg.Error as exc:
                log.warning("store change feed lost its connection (%s); reconnecting", exc)
                self._stop.wait(RETRY_S)

    def _drain(self, conn: psycopg.Connection[tuple[object, ...]]) -> None:
        while not self._stop.is_set():
            for note in conn.notifies(timeout=POLL_S):
                change = parse(note.payload)
                if change is not None:
                    self._on_change(change)
