"""One behaviour suite, every backend: memory, SQLite, PostgreSQL."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from tests.conftest import require_service

from tidings.store import open_store
from tidings.store.base import Store
from tidings.store.sql import SQLStore

PG = "postgresql://postgres@127.0.0.1:5432/test"


def sql_of(store: Store) -> SQLStore:
    """The SQL store behind the protocol, for a test that looks into its tables."""
    assert isinstance(store, SQLStore)
    return store


@pytest.fixture(params=["memory", "sqlite", "sqlite-rows", "postgres", "postgres-log"])
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
        layout = "&layout=log" if request.param == "postgres-log" else ""
        s = open_store(f"{PG}?schema={schema}{layout}")
    yield s
    s.close()
    if request.param.startswith("postgres"):
        with psycopg.connect(PG, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA "{schema}" CASCADE')
