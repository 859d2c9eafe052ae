"""PostgreSQL, for several broker processes sharing the queues.

Leasing uses `FOR UPDATE SKIP LOCKED`, so two brokers never hand out the same message.
A `schema` query parameter in the URL puts the tables in their own schema.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import psycopg
from psycopg_pool import ConnectionPool

from tidings.store import feed
from tidings.store.base import Change, Fanout, NewMessage
from tidings.store.sql import Cursor, Dialect, SQLStore, body_rows, message_rows

# Brokers starting at once on a fresh database would race to create the same tables
# (`CREATE ... IF NOT EXISTS` is not safe against a concurrent creator): a transaction-scoped
# advisory lock makes schema creation one at a time.
SCHEMA_LOCK = "SELECT pg_advisory_xact_lock(7105642195401337)"

# One statement for a whole batch, whatever its size: the rows travel as arrays, the keys
# not seen before are claimed in `dedup`, only those rows join into `messages` (the first of
# any repeats within the batch, in the caller's order, so FIFO holds), and each distinct body
# (two more arrays) is stored once if a new row refers to it.
ENQUEUE = """
WITH v AS (
    SELECT DISTINCT ON (sub, key) * FROM unnest(
        %s::text[], %s::text[], %s::text[], %s::text[], %s::text[], %s::float8[]
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
    INSERT INTO bodies SELECT k, body FROM unnest(%s::text[], %s::text[]) AS b(k, body)
    WHERE k IN (SELECT body_key FROM m))
SELECT count(*) FROM m
"""

DIALECT = Dialect(
    param="%s",
    serial="BIGSERIAL PRIMARY KEY",
    insert_ignore="INSERT INTO",
    on_conflict_ignore="ON CONFLICT DO NOTHING",
    concat_receipt="seq::text || '.' || (attempt + 1)::text || '.' || %s",
    skip_locked="FOR UPDATE OF m SKIP LOCKED",
    schema_lock=SCHEMA_LOCK,
    reseed=(
        "SELECT setval(pg_get_serial_sequence('{table}', '{column}'), "
        "COALESCE((SELECT MAX({column}) FROM {table}), 0) + 1, false)"
    ),
    columns_of=(
        "SELECT column_name FROM information_schema.columns "
        "WHERE table_schema = current_schema() AND table_name = '{table}'"
    ),
    concurrent_writers=True,
)


def split_schema(url: str) -> tuple[str, str | None]:
    """The connection URL without `schema=`, and the schema it named."""
    parts = urlsplit(url)
    query = dict(parse_qsl(parts.query))
    schema = query.pop("schema", None)
    return urlunsplit(parts._replace(query=urlencode(query))), schema


class PostgresStore(SQLStore):
    def __init__(self, url: str, max_connections: int = 8) -> None:
        conninfo, schema = split_schema(url)
        if schema:
            with psycopg.connect(conninfo) as conn, conn.transaction():
                conn.execute(SCHEMA_LOCK)
                conn.execute(f'CREATE SCHEMA IF NOT EXISTS "{schema}"')
        self._conninfo = conninfo
        self._channel = feed.channel(schema)
        kwargs = {"options": f"-c search_path={schema}"} if schema else {}
        self._pool = ConnectionPool(
            conninfo, min_size=1, max_size=max_connections, kwargs=kwargs, open=True
        )
        super().__init__(DIALECT, self._transaction)
        self.create_schema()

    @contextmanager
    def _transaction(self) -> Iterator[psycopg.Cursor[tuple[object, ...]]]:
        with self._pool.connection() as conn, conn.transaction(), conn.cursor() as cur:
            yield cur

    def _enqueue(
        self, messages: Sequence[NewMessage], fresh: bool, fanouts: Sequence[Fanout] = ()
    ) -> Callable[[Cursor], int]:
        """One round trip per batch (`fresh` or not), instead of one per row; fan-outs
        travel in the same arrays (a row each there: the statement checks every key)."""
        if fanouts:
            messages = [*messages, *(m for f in fanouts for m in f.messages())]
        nonce = "" if fresh else os.urandom(6).hex()
        rows = message_rows(messages, nonce)
        bodies = body_rows(messages, nonce)
        columns = [
            [m.subscriber_id for m in messages],
            [m.dedup_key for m in messages],
            *([row[i] for row in rows] for i in (1, 2, 3, 4)),
            list(bodies),
            list(bodies.values()),
        ]

        def op(cur: Cursor) -> int:
            cur.execute(ENQUEUE, columns)
            return int(cur.fetchone()[0])

        return op

    def watch(self, on_change: Callable[[Change], None]) -> Callable[[], None]:
        listener = feed.ChangeFeed(self._conninfo, self._channel, on_change)
        return listener.stop

    def _notify(self, cur: Cursor, change: Change) -> None:
        cur.execute("SELECT pg_notify(%s, %s)", (self._channel, feed.payload(change)))

    def close(self) -> None:
        self._pool.close()
