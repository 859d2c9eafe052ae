"""The embedded default: SQLite in WAL mode.

`synchronous=NORMAL` keeps every committed transaction across a crash of the process
(`kill -9`); `?synchronous=full` in the URL also survives a power loss, at a cost per commit.
One writer connection serves all threads, one transaction at a time (group commit gathers
many callers' writes into one, see `Store.apply`). Reads of a file database go through a
connection per thread, so they never wait for the writer (WAL lets them read the last
committed state meanwhile).
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tidings.private import DIR_MODE, create_private
from tidings.store.base import Busy
from tidings.store.database import Database
from tidings.store.dialect import SQLITE
from tidings.store.sql import SQLStore


class SQLiteStore(SQLStore):
    def __init__(self, path: str, synchronous: str = "NORMAL") -> None:
        self._path, self._synchronous = path, synchronous.upper()
        if path != ":memory:":
            Path(path).parent.mkdir(parents=True, exist_ok=True, mode=DIR_MODE)
            create_private(Path(path))  # SQLite gives its WAL and -shm files the same mode
        self._conn = self._connect()
        self._guard = threading.Lock()
        self._local = threading.local()
        # each thread's read connection, and the lock it holds while reading: `close` takes
        # it, so it never closes a connection another thread is reading from (sqlite3 then
        # crashed the process: a maintenance read outliving the server's shutdown)
        self._readers: list[tuple[sqlite3.Connection, threading.Lock]] = []
        self._readers_guard = threading.Lock()
        # (one database in memory is one connection: its reads go through the writer's)
        reader = self._read_transaction if path != ":memory:" else self._transaction
        super().__init__(Database(SQLITE, self._transaction, reader))
        self.create_schema()

    def _connect(self) -> sqlite3.Connection:
        conn = sqlite3.connect(self._path, check_same_thread=False, isolation_level=None)
        conn.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute(f"PRAGMA synchronous={self._synchronous}")
        conn.execute("PRAGMA cache_size=-65536")  # 64 MiB: the queue's hot pages stay
        return conn

    @contextmanager
    def _transaction(self) -> Iterator[sqlite3.Cursor]:
        """The writer's transaction; on a thread in `nowait` (`apply_now`), `Busy` instead
        of waiting for another thread's transaction or another process's write."""
        nowait = getattr(self._local, "nowait", False)
        if not self._guard.acquire(blocking=not nowait):
            raise Busy
        try:
            cur = self._conn.cursor()
            _begin(cur, nowait)
            try:
                yield cur
            except BaseException:
                cur.execute("ROLLBACK")
                raise
            cur.execute("COMMIT")
        finally:
            self._guard.release()

    @contextmanager
    def nowait(self) -> Iterator[None]:
        """This thread's transactions raise `Busy` rather than wait, for the block."""
        self._local.nowait = True
        try:
            yield
        finally:
            self._local.nowait = False

    @contextmanager
    def _read_transaction(self) -> Iterator[sqlite3.Cursor]:
        """A read transaction on this thread's own connection: one consistent snapshot."""
        reader: tuple[sqlite3.Connection, threading.Lock] | None = getattr(
            self._local, "reader", None
        )
        if reader is None:
            reader = self._local.reader = (self._connect(), threading.Lock())
            with self._readers_guard:  # not the writer's lock: a read never waits for it
                self._readers.append(reader)
        conn, in_use = reader
        with in_use:
            cur = conn.cursor()
            cur.execute("BEGIN")
            try:
                yield cur
            finally:
                cur.execute("COMMIT")

    def close(self) -> None:
        with self._guard, self._readers_guard:
            self._conn.close()
            for conn, in_use in self._readers:
                with in_use:  # (a read under way ends first)
                    conn.close()


BUSY_TIMEOUT_MS = 10_000  # how long a transaction waits for another process's write


def _begin(cur: sqlite3.Cursor, nowait: bool) -> None:
    if not nowait:
        cur.execute("BEGIN IMMEDIATE")
        return
    cur.execute("PRAGMA busy_timeout=0")  # no wait for another process's write lock
    try:
        cur.execute("BEGIN IMMEDIATE")
    except sqlite3.OperationalError as exc:
        if exc.sqlite_errorcode == sqlite3.SQLITE_BUSY:
            raise Busy from None
        raise
    finally:
        cur.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
