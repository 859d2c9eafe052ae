"""One behaviour suite, every backend: memory, SQLite, PostgreSQL."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.conftest import drop_schemas, require_service

from tidings.store import open_store
from tidings.store.base import Store
from tidings.store.loglayout import LogLayout
from tidings.store.partitions import PartitionedLogStore
from tidings.store.sql import SQLStore

PG = "postgresql://postgres@127.0.0.1:5432/test"


def logs_of(store: Store) -> list[LogLayout]:
    """The stores holding queues as a log behind `store`: itself, each partition it owns
    (`layout=log&partitions=N`), or none (the rows layout)."""
    if isinstance(store, LogLayout):
        return [store]
    if isinstance(store, PartitionedLogStore):
        return store.partition_stores()
    return []


def sql_of(store: Store) -> SQLStore:
    """The SQL store behind the protocol, for a test that looks into its tables."""
    assert isinstance(store, SQLStore)
    return store


STORES = ["memory", "sqlite", "sqlite-rows", "postgres", "postgres-log", "postgres-partitions"]


@pytest.fixture(params=STORES)
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    if request.param == "memory":
        s = open_store("memory://")
    elif request.param == "sqlite":
        s = open_store(f"sqlite:///{tmp_path}/t.db")
    elif request.param == "sqlite-rows":
        s = open_store(f"sqlite:///{tmp_path}/t.db?layout=rows")
    else:
        require_service("postgres")
        schema = f"t_{uuid.uuid4().hex[:12]}"
        layout = {
            "postgres-log": "&layout=log",
            "postgres-partitions": "&layout=log&partitions=3",  # one store owning all three
        }.get(request.param, "")
        s = open_store(f"{PG}?schema={schema}{layout}")
    yield s
    s.close()
    if request.param.startswith("postgres"):
        drop_schemas(schema)
