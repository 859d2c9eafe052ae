"""The queue log's tables inside the store's own database (`layout=log`, docs/storage.md).

`SQLLogEngine` is a `LogEngine` whose writes go into the transaction the store's queue
operations run in (`attach`), so a group commit of the log and the rows beside it (dedup-id
claims, pending evaluations, dead letters) commit together or not at all. Beside the log's
four tables: `log_sets` (each distinct tuple of subscription ids a delivery carries, by
number: a delivery's tag) and `log_publications` (each publication's dedup key, id, time and
recipients, kept for the queues' retention: what makes a replay a repeat, and a
publication's progress).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from tidings.store.database import Cursor, Database
from tidings.store.log.engine import Stored, WriteBatch

LOG_SCHEMA = """
CREATE TABLE IF NOT EXISTS log_names (number INTEGER PRIMARY KEY, name TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS log_bodies (id INTEGER PRIMARY KEY, body BLOB NOT NULL);
CREATE TABLE IF NOT EXISTS log_records (id INTEGER PRIMARY KEY, segment INTEGER NOT NULL,
                                        refs BLOB NOT NULL);
CREATE TABLE IF NOT EXISTS log_states (number INTEGER PRIMARY KEY, state BLOB NOT NULL);
CREATE TABLE IF NOT EXISTS log_sets (number INTEGER PRIMARY KEY, ids TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS log_publications (
    dedup_key TEXT PRIMARY KEY, publication_id TEXT NOT NULL, enqueued_at REAL NOT NULL,
    recipients BLOB NOT NULL);
CREATE INDEX IF NOT EXISTS log_publications_age ON log_publications (enqueued_at);
"""


class SQLLogEngine:
    """The log over the store's database: writes in the attached transaction."""

    def __init__(self, db: Database) -> None:
        self._db = db
        self._cur: Cursor | None = None
        with db.tx() as cur:
            for statement in LOG_SCHEMA.split(";"):
                if statement.strip():
                    cur.execute(statement)

    def attach(self, cur: Cursor | None) -> None:
        """Write (and read bodies) through this transaction's cursor from now on; None: none."""
        self._cur = cur

    def write(self, batch: WriteBatch) -> None:
        cur = self._cur
        if cur is None:
            with self._db.tx() as own:
                self._write(own, batch)
        else:
            self._write(cur, batch)

    @staticmethod
    def _write(cur: Cursor, batch: WriteBatch) -> None:
        cur.executemany("INSERT OR REPLACE INTO log_names VALUES (?, ?)", batch.names)
        cur.executemany("INSERT INTO log_bodies VALUES (?, ?)", batch.bodies)
        cur.executemany("INSERT INTO log_records VALUES (?, ?, ?)", batch.records)
        cur.executemany("INSERT OR REPLACE INTO log_states VALUES (?, ?)", batch.states)
        for span in batch.drops:
            cur.execute(
                "DELETE FROM log_bodies WHERE id BETWEEN ? AND ?",
                (span.first_body, span.last_body),
            )
            cur.execute(
                "DELETE FROM log_records WHERE id BETWEEN ? AND ?",
                (span.first_record, span.last_record),
            )
        gone = [(n,) for n in batch.gone]
        cur.executemany("DELETE FROM log_names WHERE number = ?", gone)
        cur.executemany("DELETE FROM log_states WHERE number = ?", gone)

    def read_bodies(self, ids: Sequence[int]) -> dict[int, bytes]:
        if self._cur is not None:
            return _bodies(self._cur, ids)
        with self._db.read() as cur:
            return _bodies(cur, ids)

    def recover(self) -> Stored:
        with self._db.read() as cur:
            cur.execute("SELECT number, name FROM log_names")
            names = [(int(r[0]), str(r[1])) for r in cur.fetchall()]
            cur.execute("SELECT number, state FROM log_states")
            states = [(int(r[0]), bytes(r[1])) for r in cur.fetchall()]
        return Stored(names, states, self._records())

    def _records(self) -> Iterator[tuple[int, int, bytes]]:
        """The kept records, oldest first, a page at a time (a backlog's are not all held)."""
        after = 0
        while True:
            with self._db.read() as cur:
                cur.execute(
                    "SELECT id, segment, refs FROM log_records WHERE id > ? ORDER BY id LIMIT 1000",
                    (after,),
                )
                rows = cur.fetchall()
            for r in rows:
                yield int(r[0]), int(r[1]), bytes(r[2])
            if len(rows) < 1000:
                return
            after = int(rows[-1][0])

    def count_bodies(self) -> int:
        with self._db.read() as cur:
            cur.execute("SELECT count(*) FROM log_bodies")
            return int(cur.fetchone()[0])

    def count_records(self) -> int:
        with self._db.read() as cur:
            cur.execute("SELECT count(*) FROM log_records")
            return int(cur.fetchone()[0])

    def disk_bytes(self) -> int:
        return 0  # the store's database file holds it, with everything else

    def close(self) -> None:
        """The store closes its database."""


def _bodies(cur: Cursor, ids: Sequence[int]) -> dict[int, bytes]:
    found: dict[int, bytes] = {}
    for i in range(0, len(ids), 500):
        chunk = list(ids[i : i + 500])
        marks = ",".join("?" * len(chunk))
        cur.execute(f"SELECT id, body FROM log_bodies WHERE id IN ({marks})", chunk)
        found.update((int(r[0]), bytes(r[1])) for r in cur.fetchall())
    return found
