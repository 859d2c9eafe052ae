"""PostgreSQL with its queues as a log (`postgresql://...?layout=log`): one broker owns them.

The log's tables go in the store's schema beside the rows, written in the same transactions
(`logtables.py`), and the queues live in the owner's memory as on SQLite: a second broker
opening the same schema as a log is refused. The owner holds a session advisory lock, which
PostgreSQL drops with the session (a killed broker's too), and writes every queue
transaction through that same session: a broker whose session was lost, and with it the
lock another broker may have taken since, cannot write the queues any more (its
transactions fail), so two owners never write at once. Several brokers sharing one schema
keep the rows layout (the default on PostgreSQL) until each queue has an owner.
"""

from __future__ import annotations

import contextlib
import hashlib
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import psycopg

from tidings.errors import ErrorCode, TidingsError
from tidings.store.database import Database
from tidings.store.loglayout import OWNED_ELSEWHERE, LogLayout
from tidings.store.logqueues import LogQueues
from tidings.store.postgres import PostgresStore, split_schema

Connection = psycopg.Connection[tuple[object, ...]]
# how long an opener waits for the lock before it refuses: a killed owner's session ends as
# soon as PostgreSQL reads the closed socket, a moment after the process is gone
OWNER_WAIT_S = 3.0


def _lock_key(schema: str | None) -> int:
    """A signed 64-bit advisory lock key naming this schema's log."""
    digest = hashlib.sha256(f"tidings log {schema or 'public'}".encode()).digest()
    return int.from_bytes(digest[:8], "big", signed=True)


def _own(url: str, key: int) -> Connection:
    """A session holding the schema's log lock (`key`), for as long as the store is open."""
    conninfo, schema = split_schema(url)
    options = {"options": f"-c search_path={schema}"} if schema else {}
    conn: Connection = psycopg.connect(conninfo, autocommit=True, **options)  # type: ignore[arg-type]
    deadline = time.monotonic() + OWNER_WAIT_S
    while not _locked(conn, key):
        if time.monotonic() < deadline:
            time.sleep(0.05)
            continue
        conn.close()
        raise TidingsError(
            ErrorCode.CONFIG_INVALID,
            field="store_url",
            detail=f"schema {schema or 'public'} keeps its queues as a log, and another "
            "broker has it open: " + OWNED_ELSEWHERE,
        )
    return conn


def _locked(conn: Connection, key: int) -> bool:
    row = conn.execute("SELECT pg_try_advisory_lock(%s)", (key,)).fetchone()
    return bool(row and row[0])


class PostgresLogStore(LogLayout, PostgresStore):
    """PostgreSQL, its queues as a log (one broker owns them)."""

    def __init__(self, url: str, segment_bodies: int = 4096) -> None:
        self._lock_key = _lock_key(split_schema(url)[1])
        self._owner = _own(url, self._lock_key)
        self._owner_guard = threading.Lock()
        try:
            super().__init__(url)
            # the queues' transactions in the owner's session; their reads from the pool
            owned = Database(self.db.dialect, self._owned, self.db.reader, self.db.notify)
            self.queues = LogQueues(owned, segment_bodies)
        except BaseException:
            self._owner.close()
            raise

    @contextmanager
    def _owned(self) -> Iterator[psycopg.Cursor[tuple[object, ...]]]:
        with self._owner_guard, self._owner.transaction(), self._owner.cursor() as cur:
            yield cur

    def close(self) -> None:
        super().close()
        with self._owner_guard, contextlib.suppress(psycopg.Error):
            # unlocked before the session ends: the next opener need not wait for the server
            # to notice the closed connection
            self._owner.execute("SELECT pg_advisory_unlock(%s)", (self._lock_key,))
        self._owner.close()
