"""Fixtures shared by the whole suite: local services and the one SparkSession."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import socket
import ssl
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

SERVICES = {
    "postgres": ("127.0.0.1", 5432),
    "redis": ("127.0.0.1", 6379),
    "rabbitmq": ("127.0.0.1", 5672),
    "mqtt": ("127.0.0.1", 1883),
    "nats": ("127.0.0.1", 4222),
}


async def until(condition: Callable[[], bool], timeout_s: float = 30) -> None:
    """Wait, on the event loop, until `condition()` holds (failing after `timeout_s`)."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "the condition never held"
        await asyncio.sleep(0.01)


def _reachable(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=1.0):
            return True
    except OSError:
        return False


def require_service(name: str) -> tuple[str, int]:
    """Skip locally when a service is absent; under CI (CI=true) its absence is a failure."""
    host, port = SERVICES[name]
    if not _reachable(host, port):
        reason = f"{name} is not reachable at {host}:{port}"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"{reason} (required under CI)")
        pytest.skip(reason)
    return host, port


# `make test` runs the suite on two xdist workers, each taking whole files (a module's
# fixtures start once), and every file using the Spark session on one worker: one session for
# the suite. (xdist's own `loadgroup` marks do not reach pytest 9's node ids.)
SPARK_FILES = (
    "tests/pipeline/",
    "tests/broker/test_operations.py",
    "tests/broker/test_routing.py",
    "tests/cli/test_pipeline.py",
    "tests/cli/test_placement.py",
    "tests/placement/test_many_topics.py",
    "tests/test_extras.py",
)

# Each file's seconds in a run of the whole suite (`--record-durations` writes them): the
# scheduler hands out the longest file waiting first, so a long file never starts last and the
# two workers finish together. A file not listed yet counts as UNKNOWN_S.
DURATIONS = Path(__file__).with_name("durations.json")
UNKNOWN_S = 5.0


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--record-durations",
        action="store_true",
        help=f"write each file's seconds in this run to {DURATIONS.name} (for the scheduler)",
    )


def _scope(nodeid: str) -> str:
    path = nodeid.split("::", 1)[0]
    return "spark" if path.startswith(SPARK_FILES) else path


def _known_seconds() -> dict[str, float]:
    """Recorded seconds by scope (the Spark files summed into one)."""
    try:
        by_file: dict[str, float] = json.loads(DURATIONS.read_text())
    except (OSError, ValueError):
        return {}
    seconds: dict[str, float] = {}
    for path, took in by_file.items():
        scope = _scope(path)
        seconds[scope] = seconds.get(scope, 0.0) + took
    return seconds


def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object:
    from xdist.scheduler import LoadScopeScheduling

    seconds = _known_seconds()

    class ByFile(LoadScopeScheduling):  # type: ignore[misc]
        def _split_scope(self, nodeid: str) -> str:
            return _scope(nodeid)

        def _assign_work_unit(self, node: object) -> None:
            # the longest scope waiting goes next (xdist takes the queue's first)
            longest = max(self.workqueue, key=lambda scope: seconds.get(scope, UNKNOWN_S))
            self.workqueue.move_to_end(longest, last=False)
            super()._assign_work_unit(node)

    return ByFile(config, log)


class _Recorder:
    """Sums each file's setup, call and teardown seconds as the reports come in (on xdist's
    controller, every worker's) and writes them once the whole suite has run."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        path = report.nodeid.split("::", 1)[0]
        self.seconds[path] = self.seconds.get(path, 0.0) + report.duration

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        """The files of this run updated, the others kept (a run of a few files does not
        forget the rest), files gone dropped."""
        if session.testsfailed or not self.seconds:
            return
        try:
            known: dict[str, float] = json.loads(DURATIONS.read_text())
        except (OSError, ValueError):
            known = {}
        known.update(self.seconds)
        root = Path(session.config.rootpath)
        kept = {p: round(s, 1) for p, s in sorted(known.items()) if (root / p).is_file()}
        DURATIONS.write_text(json.dumps(kept, indent=1) + "\n")


def _one_default_tls_context() -> None:
    """httpx makes an SSL context, loading the whole CA bundle (~50 ms here), for every client
    it builds, each `httpx.get(...)` included, though the suite speaks plain HTTP to loopback
    nearly everywhere: ~1,000 contexts took 60 s of tests/api, tests/delivery and
    tests/client. The default one (verify=True, no client certificate) is made once per test
    process and shared by every client, as httpx's documentation advises for many clients (and
    as `tidings.http1` keeps one). Any other `verify` (False, a test's own context) is made as
    asked. Processes the tests start make their own, as before."""
    import functools

    import httpx._transports.default as transports

    make = transports.create_ssl_context

    @functools.cache
    def default(trust_env: bool) -> ssl.SSLContext:
        return make(verify=True, cert=None, trust_env=trust_env)

    def create_ssl_context(
        verify: ssl.SSLContext | str | bool = True, cert: object = None, trust_env: bool = True
    ) -> ssl.SSLContext:
        if verify is True and cert is None:
            return default(trust_env)
        return make(verify=verify, cert=cert, trust_env=trust_env)

    transports.create_ssl_context = create_ssl_context


def pytest_configure(config: pytest.Config) -> None:
    _one_default_tls_context()
    worker = hasattr(config, "workerinput")
    if config.getoption("record_durations") and not worker:
        config.pluginmanager.register(_Recorder(), "tidings-durations")


def pytest_runtest_setup(item: pytest.Item) -> None:
    if "spark" in getattr(item, "fixturenames", ()) and not item.nodeid.startswith(SPARK_FILES):
        pytest.fail(f"{item.nodeid} uses the Spark session: add its file to SPARK_FILES")


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    """One local[2] SparkSession for the whole suite."""
    if shutil.which("java") is None:
        pytest.fail("Java 17+ is required by Spark: apt-get install openjdk-17-jre-headless")
    from pyspark.sql import SparkSession

    from tidings.pipeline.session import RAW_LOCAL_FILES

    # Local Python workers start with $PYSPARK_PYTHON (default `python3`, which cannot import
    # tidings from the venv); Spark ignores `spark.pyspark.python` here.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    session = (
        SparkSession.builder.master("local[2]")
        .appName("tidings-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "4")
        .config("spark.default.parallelism", "4")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.driver.memory", "2g")
        .config("spark.sql.execution.arrow.pyspark.enabled", "true")
        .config(map=RAW_LOCAL_FILES)  # the file system the pipeline's own session uses
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


PG = "postgresql://postgres@127.0.0.1:5432/test"


@pytest.fixture
def schema() -> Iterator[str]:
    """A PostgreSQL schema no broker has created yet (`?schema=` in a store URL), dropped
    afterwards."""
    require_service("postgres")
    import uuid

    name = f"t_{uuid.uuid4().hex[:12]}"
    yield name
    drop_schemas(name)


def drop_schemas(schema: str) -> None:
    """A test's schema, and each of its partitions' (a store cut into partitions keeps
    each in a schema of its own)."""
    import psycopg

    with psycopg.connect(PG, autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
        partitions = conn.execute(
            "SELECT nspname FROM pg_namespace WHERE nspname LIKE %s", (f"{schema}\\_p%",)
        ).fetchall()
        for (partition,) in partitions:
            conn.execute(f'DROP SCHEMA IF EXISTS "{partition}" CASCADE')


@pytest.fixture
def unfrozen() -> Iterator[None]:
    """For a test that settles the heap (`tidings.heap`): nothing stays frozen after it."""
    yield
    import gc

    gc.unfreeze()
