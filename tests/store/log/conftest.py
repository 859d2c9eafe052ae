"""One behaviour suite for the queue log, every engine: SQLite, LMDB, segment files,
PostgreSQL."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from tests.conftest import require_service

from tidings.store.log import LogEngine, QueueLog
from tidings.store.log.files import FilesLog
from tidings.store.log.lmdb import LMDBLog
from tidings.store.log.postgres import PostgresLog
from tidings.store.log.sqlite import SQLiteLog

PG = "postgresql://postgres@127.0.0.1:5432/test"

OpenEngine = Callable[[], LogEngine]


@pytest.fixture(params=["sqlite", "lmdb", "files", "postgres"])
def open_engine(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[OpenEngine]:
    """Opens the same engine's storage again each call (a restart), closing the one before
    (LMDB opens an environment once per process)."""
    opened: list[LogEngine] = []
    schema = f"log_{uuid.uuid4().hex[:12]}"
    if request.param == "postgres":
        require_service("postgres")

    def open_one() -> LogEngine:
        engine: LogEngine
        for old in opened:
            old.close()
        opened.clear()
        if request.param == "sqlite":
            engine = SQLiteLog(str(tmp_path / "log.db"))
        elif request.param == "lmdb":
            engine = LMDBLog(str(tmp_path / "log.lmdb"), map_size=1 << 26)
        elif request.param == "files":
            engine = FilesLog(str(tmp_path / "segments"))
        else:
            engine = PostgresLog(PG, schema)
        opened.append(engine)
        return engine

    yield open_one
    for engine in opened:
        engine.close()
    if request.param == "postgres":
        cleaner = PostgresLog(PG, schema)
        cleaner.drop_schema()
        cleaner.close()


@pytest.fixture
def log(open_engine: OpenEngine) -> QueueLog:
    return QueueLog(open_engine(), segment_bodies=4)
