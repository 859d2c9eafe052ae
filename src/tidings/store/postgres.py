"""PostgreSQL, for several broker processes sharing the queues.

Leasing uses `FOR UPDATE SKIP LOCKED`, so two brokers never hand out the same message.
A `schema` query parameter in the URL puts the tables in their own schema.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import psycopg
from psycopg_pool import ConnectionPool

from tidings.store.sql import Dialect, SQLStore

DIALECT = Dialect(
    param="%s",
    serial="BIGSERIAL PRIMARY KEY",
    insert_ignore="INSERT INTO",
    on_conflict_ignore="ON CONFLICT DO NOTHING",
    concat_receipt="seq::text || '.' || (attempt + 1)::text || '.' || %s",
    skip_locked="FOR UPDATE SKIP LOCKED",
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
            with psycopg.connect(conninfo, autocommit=True) as conn:
                conn.execute(f'CREATE SCHEMA IF NOT EXISTS "{schema}"')
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

    def close(self) -> None:
        self._pool.close()
