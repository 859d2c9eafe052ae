"""PostgreSQL, for several broker processes sharing the queues.

Leasing uses `FOR UPDATE SKIP LOCKED`, so two brokers never hand out the same message.
A `schema` query parameter in the URL puts the tables in their own schema.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import psycopg
from psycopg_pool import ConnectionPool

from tidings.store import feed
from tidings.store.base import Change, NewMessage
from tidings.store.sql import Cursor, Dialect, SQLStore, message_rows

# Brokers starting at once on a fresh database would race to create the same tables
# (`CREATE ... IF NOT EXISTS` is not safe against a concurrent creator): a transaction-scoped
# advisory lock makes schema creation one at a time.
SCHEMA_LOCK = "SELECT pg_advisory_xact_lock(7105642195401337)"

# One statement for a whole batch, whatever its size: the rows travel as five arrays, the
# keys not seen before are claimed in `dedup`, and only those rows join into `messages`
# (the first of any repeats within the batch, in the caller's order, so FIFO holds).
ENQUEUE = """
WITH v AS (
    SELECT DISTINCT ON (sub, key) * FROM unnest(
        %s::text[], %s::text[], %s::text[], %s::text[], %s::text[], %s::float8[]
    ) WITH ORDINALITY AS v(sub, key, pub, sids, body, at, n) ORDER BY sub, key, n),
d AS (
    INSERT INTO dedup SELECT sub, key, at FROM v ON CONFLICT DO NOTHING
    RETURNING subscriber_id, dedup_key)
INSERT INTO messages (subscriber_id, publication_id, subscription_ids, body, enqueued_at)
SELECT v.sub, v.pub, v.sids, v.body, v.at FROM v
JOIN d ON d.subscriber_id = v.sub AND d.dedup_key = v.key ORDER BY v.n
"""

DIALECT = Dialect(
    param="%s",
    serial="BIGSERIAL PRIMARY KEY",
    insert_ignore="INSERT INTO",
    on_conflict_ignore="ON CONFLICT DO NOTHING",
    concat_receipt="seq::text || '.' || (attempt + 1)::text || '.' || %s",
    skip_locked="FOR UPDATE SKIP LOCKED",
    schema_lock=SCHEMA_LOCK,
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

    def enqueue_op(
        self, messages: Sequence[NewMessage], fresh: bool = False
    ) -> Callable[[Cursor], int]:
        """One round trip per batch (`fresh` or not), instead of one per row."""
        rows = message_rows(messages)
        columns = [
            [m.subscriber_id for m in messages],
            [m.dedup_key for m in messages],
            *([row[i] for row in rows] for i in (1, 2, 3, 4)),
        ]

        def op(cur: Cursor) -> int:
            cur.execute(ENQUEUE, columns)
            return int(cur.rowcount)

        return op

    def watch(self, on_change: Callable[[Change], None]) -> Callable[[], None]:
        listener = feed.ChangeFeed(self._conninfo, self._channel, on_change)
        return listener.stop

    def _notify(self, cur: Cursor, change: Change) -> None:
        cur.execute("SELECT pg_notify(%s, %s)", (self._channel, feed.payload(change)))

    def close(self) -> None:
        self._pool.close()
