"""Every difference between the SQL engines, in one place: `SQLITE` and `POSTGRES`.

The rooms of the SQL store (schema, records, queues, ...) write their statements once, with
`?` placeholders, and ask the `Dialect` for what differs: the placeholder, column types,
ignoring a duplicate row, row locking when leasing, the receipt expression, schema-creation
locking, sequences after a migration, the catalogue, and how a batch of deliveries goes in.
Upserts (`ON CONFLICT ... DO UPDATE`), `RETURNING` and savepoints read the same on both.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

# Brokers starting at once on a fresh database would race to create the same tables
# (`CREATE ... IF NOT EXISTS` is not safe against a concurrent creator): a transaction-scoped
# advisory lock makes schema creation one at a time.
PG_SCHEMA_LOCK = "SELECT pg_advisory_xact_lock(7105642195401337)"

# One statement for a whole batch, whatever its size: the rows travel as arrays, the keys
# not seen before are claimed in `dedup`, only those rows join into `messages` (the first of
# any repeats within the batch, in the caller's order, so FIFO holds), and each distinct body
# (two more arrays) is stored once if a new row refers to it.
PG_ENQUEUE = """
WITH v AS (
    SELECT DISTINCT ON (sub, key) * FROM unnest(
        %b::text[], %b::text[], %b::text[], %b::text[], %b::text[], %b::float8[]
    ) WITH ORDINALITY AS v(sub, key, pub, sids, bkey, at, n) ORDER BY sub, key, n),
d AS (
    INSERT INTO dedup SELECT sub, key, at FROM v ON CONFLICT DO NOTHING
    RETURNING subscriber_id, dedup_key),
m AS (
    INSERT INTO messages (subscriber_id, publication_id, subscription_ids, body_key, enqueued_at)
    SELECT v.sub, v.pub, v.sids, v.bkey, v.at FROM v
    JOIN d ON d.subscriber_id = v.sub AND d.dedup_key = v.key ORDER BY v.n
    RETURNING body_key),
b AS (
    INSERT INTO bodies SELECT k, body FROM unnest(%b::text[], %b::text[]) AS b(k, body)
    WHERE k IN (SELECT body_key FROM m))
SELECT count(*) FROM m
"""


@dataclass(frozen=True, slots=True)
class Dialect:
    """What differs between the SQL engines; the rooms ask through its methods."""

    param: str  # "?" or "%s"
    serial: str  # the auto-increment primary key column type
    insert_ignore: str  # "INSERT OR IGNORE INTO" or "INSERT INTO"
    on_conflict_ignore: str  # "" or "ON CONFLICT DO NOTHING"
    lock_rows: str  # "" or "FOR UPDATE OF m SKIP LOCKED" (`m`: the messages table)
    next_receipt: str  # SQL for `seq.attempt.nonce`, the attempt bumped, the nonce a parameter
    catalogue: str  # a query naming a `{table}`'s columns (none if there is no table)
    clustered: str = ""  # "WITHOUT ROWID": a keyed table stored as its own index
    schema_lock: str | None = None  # a statement serialising schema creation across processes
    # after copying rows with their ids into a table (a migration): `{table}` and `{column}`
    reseed_template: str | None = None
    # several processes write at once (PostgreSQL): two last acknowledgements of one body
    # in concurrent transactions can each see the other's row and leave the body behind,
    # so a periodic sweep collects such orphans
    concurrent_writers: bool = False
    # one statement for a whole batch of deliveries, its rows as arrays (PostgreSQL); without
    # it, rows go in one statement each and fan-outs are spread by SQLite's `json_each`
    batch_enqueue: str | None = None
    # a text column's length in bytes (its UTF-8), `{}` the column: SQLite's LENGTH counts
    # characters, and OCTET_LENGTH is only in SQLite 3.43 on
    octets: str = "OCTET_LENGTH({})"
    # the queue log's tables (`logtables.py`): an integer key that is the row's own (SQLite's
    # rowid: no index beside), and a bytes column
    int_key: str = "BIGINT PRIMARY KEY"
    blob: str = "BYTEA"
    # rows inserted as arrays, one statement a batch: `{}` the table, the arrays' SQL types
    # as parameters' casts (PostgreSQL: one round trip, not one per row); None: executemany
    insert_arrays: str | None = None
    # whether another connection committed since this one last looked (SQLite's
    # `PRAGMA data_version`: one number per connection); None: always look
    changed_elsewhere: str | None = None

    def q(self, sql: str) -> str:
        """`sql` written with `?` placeholders, in this engine's placeholder."""
        return sql.replace("?", self.param) if self.param != "?" else sql

    def ddl(self, script: str) -> str:
        """A schema script with this engine's `{serial}` key type and `{clustered}` option."""
        return script.format(serial=self.serial, clustered=self.clustered)

    def ignoring_duplicates(self, table: str, rows: str) -> str:
        """Insert `rows` (`VALUES ...` or a `SELECT`) into `table`, skipping any row whose key
        is there already."""
        return self.q(f"{self.insert_ignore} {table} {rows} {self.on_conflict_ignore}")

    def skipping_locked(self, select: str) -> str:
        """`select` (over `messages m`) taking only rows no other transaction holds, locked
        until this one ends, so two brokers never lease the same message."""
        return self.q(f"{select} {self.lock_rows}")

    def insert_rows(
        self, cur: Any, table: str, types: Sequence[str], rows: list[Any], then: str = ""
    ) -> None:
        """Insert `rows` (tuples of `types`, PostgreSQL's type names) into `table`, `then`
        (an `ON CONFLICT` clause) after: one statement of arrays where the engine takes
        them, else one execution a row."""
        if not rows:
            return
        if self.insert_arrays is None:
            marks = ", ".join("?" * len(types))
            cur.executemany(self.q(f"INSERT INTO {table} VALUES ({marks}) {then}"), rows)
            return
        # (arrays sent in binary: psycopg escapes each element of a text array with a
        # regular expression, 3.7x the client's CPU of a 100-row insert)
        arrays = ", ".join(f"%b::{t}[]" for t in types)
        columns = [list(column) for column in zip(*rows, strict=True)]
        cur.execute(f"{self.insert_arrays.format(table=table, arrays=arrays)} {then}", columns)

    def columns_of(self, table: str) -> str:
        return self.catalogue.format(table=table)

    def reseed(self, table: str, column: str) -> str | None:
        """A statement moving `table`'s sequence past the ids copied into it, or None where
        the engine does that itself."""
        if self.reseed_template is None:
            return None
        return self.reseed_template.format(table=table, column=column)


SQLITE = Dialect(
    param="?",
    serial="INTEGER PRIMARY KEY AUTOINCREMENT",
    insert_ignore="INSERT OR IGNORE INTO",
    on_conflict_ignore="",
    lock_rows="",
    next_receipt="seq || '.' || (attempt + 1) || '.' || ?",
    catalogue="SELECT name FROM pragma_table_info('{table}')",
    clustered="WITHOUT ROWID",
    octets="LENGTH(CAST({} AS BLOB))",
    int_key="INTEGER PRIMARY KEY",
    blob="BLOB",
    changed_elsewhere="PRAGMA data_version",
)

POSTGRES = Dialect(
    param="%s",
    serial="BIGSERIAL PRIMARY KEY",
    insert_ignore="INSERT INTO",
    on_conflict_ignore="ON CONFLICT DO NOTHING",
    lock_rows="FOR UPDATE OF m SKIP LOCKED",
    next_receipt="seq::text || '.' || (attempt + 1)::text || '.' || %s",
    catalogue=(
        "SELECT column_name FROM information_schema.columns "
        "WHERE table_schema = current_schema() AND table_name = '{table}'"
    ),
    schema_lock=PG_SCHEMA_LOCK,
    reseed_template=(
        "SELECT setval(pg_get_serial_sequence('{table}', '{column}'), "
        "COALESCE((SELECT MAX({column}) FROM {table}), 0) + 1, false)"
    ),
    concurrent_writers=True,
    batch_enqueue=PG_ENQUEUE,
    insert_arrays="INSERT INTO {table} SELECT * FROM unnest({arrays})",
)
