"""The log on SQLite: four tables keyed by integers, WAL, one writer.

`synchronous=NORMAL` (the default) keeps every committed transaction across a crash of the
process; `full` also across a power loss. Bodies and records are rows of an integer primary
key (the rowid: one B-tree each, no index beside), so appending is appending to a tree's
right edge and dropping a segment is deleting two key ranges.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Iterator, Sequence

from tidings.store.log.engine import Stored, WriteBatch

SCHEMA = """
CREATE TABLE IF NOT EXISTS names (number INTEGER PRIMARY KEY, name TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS bodies (id INTEGER PRIMARY KEY, body BLOB NOT NULL);
CREATE TABLE IF NOT EXISTS records (id INTEGER PRIMARY KEY, segment INTEGER NOT NULL,
                                    refs BLOB NOT NULL);
CREATE TABLE IF NOT EXISTS states (number INTEGER PRIMARY KEY, state BLOB NOT NULL);
"""


class SQLiteLog:
    def __init__(self, path: str, synchronous: str = "NORMAL") -> None:
        self._path = path
        self._conn = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
        self._conn.execute("PRAGMA journal_mode=WAL")
        self._conn.execute(f"PRAGMA synchronous={synchronous.upper()}")
        self._conn.execute("PRAGMA cache_size=-65536")
        self._conn.executescript(SCHEMA)

    def write(self, batch: WriteBatch) -> None:
        cur = self._conn.cursor()
        cur.execute("BEGIN IMMEDIATE")
        try:
            cur.executemany("INSERT OR REPLACE INTO names VALUES (?, ?)", batch.names)
            cur.executemany("INSERT INTO bodies VALUES (?, ?)", batch.bodies)
            cur.executemany("INSERT INTO records VALUES (?, ?, ?)", batch.records)
            cur.executemany("INSERT OR REPLACE INTO states VALUES (?, ?)", batch.states)
            for span in batch.drops:
                cur.execute(
                    "DELETE FROM bodies WHERE id BETWEEN ? AND ?",
                    (span.first_body, span.last_body),
                )
                cur.execute(
                    "DELETE FROM records WHERE id BETWEEN ? AND ?",
                    (span.first_record, span.last_record),
                )
            gone = [(n,) for n in batch.gone]
            cur.executemany("DELETE FROM names WHERE number = ?", gone)
            cur.executemany("DELETE FROM states WHERE number = ?", gone)
        except BaseException:
            cur.execute("ROLLBACK")
            raise
        cur.execute("COMMIT")

    def read_bodies(self, ids: Sequence[int]) -> dict[int, bytes]:
        found: dict[int, bytes] = {}
        for i in range(0, len(ids), 500):
            chunk = ids[i : i + 500]
            marks = ",".join("?" * len(chunk))
            rows = self._conn.execute(f"SELECT id, body FROM bodies WHERE id IN ({marks})", chunk)
            found.update(rows)
        return found

    def recover(self) -> Stored:
        names = self._conn.execute("SELECT number, name FROM names").fetchall()
        states = self._conn.execute("SELECT number, state FROM states").fetchall()
        return Stored(names, states, self._records())

    def _records(self) -> Iterator[tuple[int, int, bytes]]:
        yield from self._conn.execute("SELECT id, segment, refs FROM records ORDER BY id")

    def count_bodies(self) -> int:
        return int(self._conn.execute("SELECT count(*) FROM bodies").fetchone()[0])

    def count_records(self) -> int:
        return int(self._conn.execute("SELECT count(*) FROM records").fetchone()[0])

    def disk_bytes(self) -> int:
        self._conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        return sum(
            os.path.getsize(p) for p in (self._path, f"{self._path}-wal") if os.path.exists(p)
        )

    def close(self) -> None:
        self._conn.close()
