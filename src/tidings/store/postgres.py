"""PostgreSQL, for several broker processes sharing the queues.

Leasing uses `FOR UPDATE SKIP LOCKED` (`dialect.py`), so two brokers never hand out the
same message. A `schema` query parameter in the URL puts the tables in their own schema.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import psycopg
from psycopg_pool import ConnectionPool

from tidings.store import feed
from tidings.store.base import Change
from tidings.store.database import Cursor, Database
from tidings.store.dialect import PG_SCHEMA_LOCK, POSTGRES
from tidings.store.sql import SQLStore


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
                conn.execute(PG_SCHEMA_LOCK)
                conn.execute(f'CREATE SCHEMA IF NOT EXISTS "{schema}"')
        self._conninfo = conninfo
        self._channel = feed.channel(schema)
        kwargs = {"options": f"-c search_path={schema}"} if schema else {}
        self._pool = ConnectionPool(
            conninfo, min_size=1, max_size=max_connections, kwargs=kwargs, open=True
        )
        super().__init__(Database(POSTGRES, self._transaction, self._transaction, self._notify))
        self.create_schema()

    @contextmanager
    def _transaction(self) -> Iterator[psycopg.Cursor[tuple[object, ...]]]:
        with self._pool.connection() as conn, conn.transaction(), conn.cursor() as cur:
            yield cur

    def watch(self, on_change: Callable[[Change], None]) -> Callable[[], None]:
        listener = feed.ChangeFeed(self._conninfo, self._channel, on_change)
        return listener.stop

    def _notify(self, cur: Cursor, change: Change) -> None:
        cur.execute("SELECT pg_notify(%s, %s)", (self._channel, feed.payload(change)))

    def check_connections(self) -> None:
        """Replace the pooled connections the server closed meanwhile (a function instance
        thawed after minutes: the database may have ended its idle connections)."""
        self._pool.check()

    def close(self) -> None:
        self._pool.close()
