"""The embedded default: SQLite in WAL mode.

`synchronous=NORMAL` keeps every committed transaction across a crash of the process
(`kill -9`); `?synchronous=full` in the URL also survives a power loss, at a cost per commit.
One connection serves all threads, one transaction at a time.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tidings.store.sql import Dialect, SQLStore

DIALECT = Dialect(
    param="?",
    serial="INTEGER PRIMARY KEY AUTOINCREMENT",
    insert_ignore="INSERT OR IGNORE INTO",
    on_conflict_ignore="",
    concat_receipt="seq || '.' || (attempt + 1) || '.' || ?",
    skip_locked="",
    clustered="WITHOUT ROWID",
)


class SQLiteStore(SQLStore):
    def __init__(self, path: str, synchronous: str = "NORMAL") -> None:
        if path != ":memory:":
            Path(path).parent.mkdir(parents=True, exist_ok=True)
        self._conn = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
        self._conn.execute("PRAGMA journal_mode=WAL")
        self._conn.execute(f"PRAGMA synchronous={synchronous.upper()}")
        self._conn.execute("PRAGMA busy_timeout=10000")
        self._conn.execute("PRAGMA cache_size=-65536")  # 64 MiB: the queue's hot pages stay
        self._guard = threading.Lock()
        super().__init__(DIALECT, self._transaction)
        self.create_schema()

    @contextmanager
    def _transaction(self) -> Iterator[sqlite3.Cursor]:
        with self._guard:
            cur = self._conn.cursor()
            cur.execute("BEGIN IMMEDIATE")
            try:
                yield cur
            except BaseException:
                cur.execute("ROLLBACK")
                raise
            cur.execute("COMMIT")

    def close(self) -> None:
        with self._guard:
            self._conn.close()
