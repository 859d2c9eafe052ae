"""PostgreSQL with its queues as a log (`postgresql://...?layout=log`): one broker owns them.

The log's tables go in the store's schema beside the rows, written in the same transactions
(`logtables.py`), and the queues live in the owner's memory as on SQLite: a second broker
opening the same schema as a log is refused (a session advisory lock, which PostgreSQL
drops with the owner's connection, a killed process's too). Several brokers sharing one
schema keep the rows layout (the default on PostgreSQL) until each queue has an owner.
"""

from __future__ import annotations

import hashlib

import psycopg

from tidings.errors import ErrorCode, TidingsError
from tidings.store.loglayout import OWNED_ELSEWHERE, LogLayout
from tidings.store.logqueues import LogQueues
from tidings.store.postgres import PostgresStore, split_schema


def _lock_key(schema: str | None) -> int:
    """A signed 64-bit advisory lock key naming this schema's log."""
    digest = hashlib.sha256(f"tidings log {schema or 'public'}".encode()).digest()
    return int.from_bytes(digest[:8], "big", signed=True)


def _own(url: str) -> psycopg.Connection[tuple[object, ...]]:
    """A connection holding the schema's log lock while the store is open."""
    conninfo, schema = split_schema(url)
    conn = psycopg.connect(conninfo, autocommit=True)
    row = conn.execute("SELECT pg_try_advisory_lock(%s)", (_lock_key(schema),)).fetchone()
    if not row or not row[0]:
        conn.close()
        raise TidingsError(
            ErrorCode.CONFIG_INVALID,
            field="store_url",
            detail=f"schema {schema or 'public'} keeps its queues as a log, and another "
            "broker has it open: " + OWNED_ELSEWHERE,
        )
    return conn


class PostgresLogStore(LogLayout, PostgresStore):
    """PostgreSQL, its queues as a log (one broker owns them)."""

    def __init__(self, url: str, segment_bodies: int = 4096) -> None:
        self._owner = _own(url)
        try:
            super().__init__(url)
            self.queues = LogQueues(self.db, segment_bodies)
        except BaseException:
            self._owner.close()
            raise

    def close(self) -> None:
        super().close()
        self._owner.close()  # the lock goes with the session
