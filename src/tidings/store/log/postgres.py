"""The log on PostgreSQL: the same four tables in a schema, a batch's rows as arrays.

Each kind of row goes in with one statement (`unnest` of arrays), so a group commit is a
handful of statements whatever its size. One connection, one writer: several brokers sharing
these tables need a lease owner per queue (the next step of issue #30), not `SKIP LOCKED`.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import psycopg

from tidings.store.log.engine import Stored, WriteBatch

SCHEMA = """
CREATE TABLE IF NOT EXISTS names (number integer PRIMARY KEY, name text NOT NULL);
CREATE TABLE IF NOT EXISTS bodies (id bigint PRIMARY KEY, body bytea NOT NULL);
CREATE TABLE IF NOT EXISTS records (id bigint PRIMARY KEY, segment bigint NOT NULL,
                                    refs bytea NOT NULL);
CREATE TABLE IF NOT EXISTS states (number integer PRIMARY KEY, state bytea NOT NULL);
"""
TABLES = ("names", "bodies", "records", "states")


class PostgresLog:
    def __init__(self, url: str, schema: str = "tidings_log") -> None:
        self._conn = psycopg.connect(url, autocommit=True)
        self._schema = schema
        with self._conn.transaction():
            self._conn.execute(f'CREATE SCHEMA IF NOT EXISTS "{schema}"')
            self._conn.execute(f'SET search_path TO "{schema}"')
            self._conn.execute(SCHEMA)

    def write(self, batch: WriteBatch) -> None:
        with self._conn.transaction():
            run = self._conn.execute
            if batch.names:
                numbers, names = zip(*batch.names, strict=True)
                run(
                    "INSERT INTO names SELECT * FROM unnest(%s::integer[], %s::text[])"
                    " ON CONFLICT (number) DO UPDATE SET name = excluded.name",
                    (list(numbers), list(names)),
                )
            if batch.bodies:
                ids, bodies = zip(*batch.bodies, strict=True)
                run(
                    "INSERT INTO bodies SELECT * FROM unnest(%s::bigint[], %s::bytea[])",
                    (list(ids), list(bodies)),
                )
            if batch.records:
                ids, segments, refs = zip(*batch.records, strict=True)
                run(
                    "INSERT INTO records SELECT * FROM"
                    " unnest(%s::bigint[], %s::bigint[], %s::bytea[])",
                    (list(ids), list(segments), list(refs)),
                )
            if batch.states:
                numbers, states = zip(*batch.states, strict=True)
                run(
                    "INSERT INTO states SELECT * FROM unnest(%s::integer[], %s::bytea[])"
                    " ON CONFLICT (number) DO UPDATE SET state = excluded.state",
                    (list(numbers), list(states)),
                )
            for span in batch.drops:
                run(
                    "DELETE FROM bodies WHERE id BETWEEN %s AND %s",
                    (span.first_body, span.last_body),
                )
                run(
                    "DELETE FROM records WHERE id BETWEEN %s AND %s",
                    (span.first_record, span.last_record),
                )
            if batch.gone:
                run("DELETE FROM names WHERE number = ANY(%s)", (batch.gone,))
                run("DELETE FROM states WHERE number = ANY(%s)", (batch.gone,))

    def read_bodies(self, ids: Sequence[int]) -> dict[int, bytes]:
        rows = self._conn.execute(
            "SELECT id, body FROM bodies WHERE id = ANY(%s)", (list(ids),)
        ).fetchall()
        return {i: bytes(b) for i, b in rows}

    def recover(self) -> Stored:
        names = self._conn.execute("SELECT number, name FROM names").fetchall()
        states = self._conn.execute("SELECT number, state FROM states").fetchall()
        return Stored(names, [(n, bytes(s)) for n, s in states], self._records())

    def _records(self) -> Iterator[tuple[int, int, bytes]]:
        cur = self._conn.cursor()
        for row in cur.stream("SELECT id, segment, refs FROM records ORDER BY id"):
            yield row[0], row[1], bytes(row[2])

    def count_bodies(self) -> int:
        return self._count("bodies")

    def count_records(self) -> int:
        return self._count("records")

    def _count(self, table: str) -> int:
        row = self._conn.execute(f"SELECT count(*) FROM {table}").fetchone()
        return int(row[0]) if row else 0

    def disk_bytes(self) -> int:
        """The tables' bytes with their indexes and TOAST, after a VACUUM as a running
        database's autovacuum would make them."""
        for table in TABLES:
            self._conn.execute(f"VACUUM {table}")
        row = self._conn.execute(
            "SELECT sum(pg_total_relation_size(format('%%I.%%I', %s::text, t)::regclass))"
            " FROM unnest(%s::text[]) t",
            (self._schema, list(TABLES)),
        ).fetchone()
        return int(row[0]) if row and row[0] else 0

    def drop_schema(self) -> None:
        self._conn.execute(f'DROP SCHEMA IF EXISTS "{self._schema}" CASCADE')

    def close(self) -> None:
        self._conn.close()
