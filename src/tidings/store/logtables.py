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

from array import array
from collections.abc import Collection, Iterator, Sequence

from tidings.store.database import Cursor, Database
from tidings.store.log.engine import Stored, WriteBatch

LOG_SCHEMA = """
CREATE TABLE IF NOT EXISTS log_names (number {int_key}, name TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS log_bodies (id {int_key}, body {blob} NOT NULL);
CREATE TABLE IF NOT EXISTS log_records (id {int_key}, segment BIGINT NOT NULL,
                                        refs {blob} NOT NULL);
CREATE TABLE IF NOT EXISTS log_states (number {int_key}, state {blob} NOT NULL);
CREATE TABLE IF NOT EXISTS log_sets (number {int_key}, ids TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS log_publications (
    dedup_key TEXT PRIMARY KEY, publication_id TEXT NOT NULL,
    enqueued_at DOUBLE PRECISION NOT NULL, recipients {blob} NOT NULL) {clustered};
CREATE INDEX IF NOT EXISTS log_publications_age ON log_publications (enqueued_at);
"""

# a name or a state written again replaces the one before (the same on both engines)
PUT_NAMES = (
    "INSERT INTO log_names VALUES (?, ?) ON CONFLICT (number) DO UPDATE SET name = excluded.name"
)
PUT_STATES = (
    "INSERT INTO log_states VALUES (?, ?) ON CONFLICT (number) DO UPDATE SET state = excluded.state"
)


class SQLLogEngine:
    """The log over the store's database: writes in the attached transaction."""

    def __init__(self, db: Database) -> None:
        self._db = db
        self._cur: Cursor | None = None
        dialect = db.dialect
        with db.tx() as cur:
            if dialect.schema_lock:
                cur.execute(dialect.schema_lock)
            schema = LOG_SCHEMA.format(
                int_key=dialect.int_key, blob=dialect.blob, clustered=dialect.clustered
            )
            for statement in schema.split(";"):
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

    def _write(self, cur: Cursor, batch: WriteBatch) -> None:
        q = self._db.q
        if batch.names:
            cur.executemany(q(PUT_NAMES), batch.names)
        insert = self._db.dialect.insert_rows
        insert(cur, "log_bodies", ("bigint", "bytea"), batch.bodies)
        insert(cur, "log_records", ("bigint", "bigint", "bytea"), batch.records)
        if batch.states:
            cur.executemany(q(PUT_STATES), batch.states)
        for span in batch.drops:
            cur.execute(
                q("DELETE FROM log_bodies WHERE id BETWEEN ? AND ?"),
                (span.first_body, span.last_body),
            )
            cur.execute(
                q("DELETE FROM log_records WHERE id BETWEEN ? AND ?"),
                (span.first_record, span.last_record),
            )
        if batch.gone:
            gone = [(n,) for n in batch.gone]
            cur.executemany(q("DELETE FROM log_names WHERE number = ?"), gone)
            cur.executemany(q("DELETE FROM log_states WHERE number = ?"), gone)

    def read_bodies(self, ids: Sequence[int]) -> dict[int, bytes]:
        if self._cur is not None:
            return _bodies(self._db, self._cur, ids)
        with self._db.read() as cur:
            return _bodies(self._db, cur, ids)

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
                    self._db.q(
                        "SELECT id, segment, refs FROM log_records WHERE id > ? "
                        "ORDER BY id LIMIT 1000"
                    ),
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


def _bodies(db: Database, cur: Cursor, ids: Sequence[int]) -> dict[int, bytes]:
    found: dict[int, bytes] = {}
    for i in range(0, len(ids), 500):
        chunk = list(ids[i : i + 500])
        marks = ",".join("?" * len(chunk))
        cur.execute(db.q(f"SELECT id, body FROM log_bodies WHERE id IN ({marks})"), chunk)
        found.update((int(r[0]), bytes(r[1])) for r in cur.fetchall())
    return found


def recipients(
    db: Database, cur: Cursor, keys: Collection[str], schema: str | None = None
) -> dict[str, set[int]]:
    """The subscriber numbers each of these publications' dedup keys went to, as
    `log_publications` remembers them (`schema`: a partition's, quoted; else the search
    path's)."""
    table = f"{schema}.log_publications" if schema else "log_publications"
    wanted = list(keys)
    found: dict[str, set[int]] = {}
    for i in range(0, len(wanted), 500):
        chunk = wanted[i : i + 500]
        marks = ",".join("?" * len(chunk))
        cur.execute(
            db.q(f"SELECT dedup_key, recipients FROM {table} WHERE dedup_key IN ({marks})"),
            chunk,
        )
        for key, blob in cur.fetchall():
            numbers = array("i")
            numbers.frombytes(bytes(blob))
            found[str(key)] = set(numbers)
    return found
