"""What every room of the SQL store runs its statements through: an engine's `Dialect` and
its transactions (a writer's, and a reader's, which may be the same).

Each engine (`sqlite.py`, `postgres.py`) makes one `Database` from its connections; the
rooms (`schema`, `records`, `queues`, `stats`, `endpoints`) share it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Protocol

import orjson

from tidings.store.base import Change
from tidings.store.dialect import Dialect


class Cursor(Protocol):
    rowcount: int

    def execute(self, sql: str, params: Sequence[Any] = ...) -> Any: ...
    def executemany(self, sql: str, params: Iterable[Sequence[Any]]) -> Any: ...
    def fetchone(self) -> Any: ...
    def fetchall(self) -> list[Any]: ...


# Tells other brokers about a change when the transaction commits (PostgreSQL's feed);
# an engine no other process shares does nothing.
Notify = Callable[[Cursor, Change], None]


def no_one(cur: Cursor, change: Change) -> None:
    """A change nobody else needs to hear of: no other process shares the store."""


@dataclass(frozen=True, slots=True)
class Database:
    """A dialect and an engine's transactions; every call of a room is one of them."""

    dialect: Dialect
    transaction: Callable[[], Any]  # a context manager factory yielding a cursor
    reader: Callable[[], Any]  # the same, for reads only
    notify: Notify = no_one

    @contextmanager
    def tx(self) -> Iterator[Cursor]:
        with self.transaction() as cur:
            yield cur

    @contextmanager
    def read(self) -> Iterator[Cursor]:
        with self.reader() as cur:
            yield cur

    def q(self, sql: str) -> str:
        return self.dialect.q(sql)


def dumps(value: Any) -> str:
    """A value as the JSON text a column holds."""
    return orjson.dumps(value).decode()


def loads_or(text: str, default: Any) -> Any:
    """A stored JSON text, or `default` when it does not decode: one bad row is listed,
    without its body, rather than failing the listing of the others."""
    try:
        return orjson.loads(text)
    except (orjson.JSONDecodeError, TypeError):
        return default
