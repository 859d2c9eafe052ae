from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal

import orjson
import pytest
from pyspark.errors import StreamingQueryException
from pyspark.sql import DataFrame, SparkSession

from tidings.config import FunctionSettings
from tidings.model import FunctionSpec, Op, Predicate, Publication, Subscriber, Subscription
from tidings.pipeline import DRIVER_LINES, eventlog, index
from tidings.pipeline.jobs import (
    Algorithm,
    Matching,
    Paths,
    Subscriptions,
    few_lines,
    match_available,
    replay,
)
from tidings.pipeline.sink import QueueSink
from tidings.store import open_store
from tidings.store.base import Store

from .workloads import (
    function_subscriptions,
    line,
    matcher_triples,
    publications,
    runner_triples,
    subscriptions,
    write_log,
)

pytestmark = pytest.mark.spark


class CrashingSink(QueueSink):
    """Enqueues part of a batch, then dies, as a driver killed in the middle of it would."""

    def enqueue(self, rows: list[Any]) -> int:
        super().enqueue(rows[: len(rows) // 2])
        raise RuntimeError("killed in the middle of a batch")


def make_store(tmp_path: Path) -> Store:
    store = open_store(f"sqlite:///{tmp_path / 'tidings.db'}")
    for name in ("alice", "bob"):
        store.add_subscriber(Subscriber(name, "hash", 0.0))
    store.add_subscription(Subscription("s-a", "alice", "topic", topics=("news/#",)))
    store.add_subscription(
        Subscription("s-b", "bob", "content", predicates=(Predicate("n", Op.GE, 10),))
    )
    return store


def pubs(start: int, count: int) -> list[Publication]:
    return [
        Publication(f"p{i:04d}", 1000.0 + i, {"i": i}, ("news/x",) if i % 2 else (), {"n": i})
        for i in range(start, start + count)
    ]


def expected(publications: list[Publication]) -> set[tuple[str, str]]:
    out = {("alice", p.id) for p in publications if p.topics}
    return out | {("bob", p.id) for p in publications if p.attributes["n"] >= 10}  # type: ignore[operator]


def queued(store: Store) -> list[tuple[str, str]]:
    return [
        (m.subscriber_id, m.publication_id)
        for who in ("alice", "bob")
        for m in store.lease(who, 10_000, 60.0, 5, 2000.0)
    ]


# Where the index pass runs: the driver for a small batch (the default limit), or the
# workers (limit 0); both must keep every promise.
PLACES = {"in the driver": DRIVER_LINES, "in the workers": 0}
place = pytest.mark.parametrize("driver_lines", PLACES.values(), ids=PLACES.keys())
# Both algorithms, the index one in both places.
WAYS = {
    "index in the driver": ("index", DRIVER_LINES),
    "index in the workers": ("index", 0),
    "sql": ("sql", 0),
}
every_way = pytest.mark.parametrize(("algorithm", "driver_lines"), WAYS.values(), ids=WAYS.keys())


def matching(
    spark: SparkSession, store: Store, paths: Paths, sink: QueueSink, driver_lines: int
) -> Matching:
    return Matching(Subscriptions(spark, store), sink, paths.quarantine, driver_lines=driver_lines)


def paths_in(tmp_path: Path) -> Paths:
    return Paths(tmp_path / "log", tmp_path / "quarantine", tmp_path / "checkpoint")


@pytest.mark.slow
@place
def test_a_restart_in_the_middle_of_a_batch_neither_loses_nor_duplicates_a_delivery(
    spark: SparkSession, tmp_path: Path, driver_lines: int
) -> None:
    store, paths = make_store(tmp_path), paths_in(tmp_path)
    first = pubs(0, 40)
    write_log(paths.publications, "0000000000001-1-000001", [line(p) for p in first])
    crashing = matching(spark, store, paths, CrashingSink(store, chunk=7), driver_lines)
    with pytest.raises(StreamingQueryException):
        match_available(spark, crashing, paths)
    job = matching(spark, store, paths, QueueSink(store), driver_lines)
    results = match_available(spark, job, paths)
    assert [r.publications for r in results] == [40]
    second = pubs(40, 10)
    write_log(paths.publications, "0000000000002-1-000001", [line(p) for p in second])
    later = match_available(spark, job, paths)
    assert [r.enqueued for r in later] == [len(expected(second))]
    contents = queued(store)
    assert len(contents) == len(set(contents))
    assert set(contents) == expected(first + second)


@place
def test_a_malformed_line_is_quarantined_with_its_reason_and_the_rest_is_delivered(
    spark: SparkSession, tmp_path: Path, driver_lines: int
) -> None:
    store, paths = make_store(tmp_path), paths_in(tmp_path)
    good = pubs(10, 3)
    torn = line(good[0])[:20]
    lines = [line(good[0]), torn, '{"id": 5}', line(good[1]), "[1, 2]", line(good[2])]
    write_log(paths.publications, "0000000000001-1-000001", lines)
    job = matching(spark, store, paths, QueueSink(store), driver_lines)
    results = match_available(spark, job, paths)
    assert [(r.publications, r.quarantined) for r in results] == [(3, 3)]
    assert set(queued(store)) == expected(good)
    (bad_file,) = paths.quarantine.iterdir()
    bad = [orjson.loads(x) for x in bad_file.read_bytes().splitlines()]
    assert {b["line"] for b in bad} == {torn, '{"id": 5}', "[1, 2]"}
    assert all(b["error"] for b in bad)


@place
def test_replay_enqueues_only_what_a_new_subscription_missed(
    spark: SparkSession, tmp_path: Path, driver_lines: int
) -> None:
    store, paths = make_store(tmp_path), paths_in(tmp_path)
    history = pubs(0, 20)
    write_log(paths.publications, "0000000000001-1-000001", [line(p) for p in history])
    match_available(spark, matching(spark, store, paths, QueueSink(store), driver_lines), paths)
    store.add_subscription(
        Subscription("s-b2", "bob", "content", predicates=(Predicate("n", Op.LT, 3),))
    )
    job = matching(spark, store, paths, QueueSink(store), driver_lines)
    job.since, job.subscriber_id = 1001.0, "bob"
    result = replay(spark, job, paths)
    assert (result.publications, result.enqueued) == (19, 2)  # p0001 and p0002, not p0000
    assert ("bob", "p0002") in queued(store)


class FixedStore:
    """A subscription source that never changes."""

    def __init__(self, subs: list[Subscription]) -> None:
        self.subs = subs

    def iter_subscriptions(self, page: int = 10_000) -> Iterator[Subscription]:
        return iter(self.subs)

    def set_subscription_status(
        self, subscription_id: str, status: Literal["active", "suspended"], reason: str | None
    ) -> bool:
        return any(s.id == subscription_id for s in self.subs)  # never changes

    def subscriptions_version(self) -> int:
        return 1


Workload = tuple[list[Subscription], list[Publication], set[tuple[str, str, str]]]


@pytest.fixture(scope="module")
def three_kinds() -> Workload:
    """Random topic, content and function subscriptions, and what the broker delivers."""
    rng = random.Random(11)
    subs = subscriptions(rng, 200) + function_subscriptions(rng, 6)
    pubs = publications(rng, 80, functions=True)
    return subs, pubs, matcher_triples(subs, pubs) | runner_triples(subs, pubs)


class RecordingSink(QueueSink):
    """Keeps the delivery rows it is given, as well as enqueuing them."""

    rows: list[Any]

    def enqueue(self, rows: list[Any]) -> int:
        self.rows = [*getattr(self, "rows", []), *rows]
        return super().enqueue(rows)


def log_frame(spark: SparkSession, directory: Path, lines: list[str]) -> DataFrame:
    """Lines as the jobs read them: from a log file, in two partitions."""
    write_log(directory, "0000000000001-1-000001", lines)
    return eventlog.read_publication_lines(spark, directory).coalesce(2)


@every_way
def test_every_way_delivers_what_the_broker_would_for_all_three_kinds(
    spark: SparkSession,
    tmp_path: Path,
    algorithm: Algorithm,
    driver_lines: int,
    three_kinds: Workload,
) -> None:
    subs, pubs, expected = three_kinds
    assert {t[2][0] for t in expected} == {"t", "c", "f"}  # every kind really matches
    sink = RecordingSink(make_store(tmp_path))
    job = Matching(
        Subscriptions(spark, FixedStore(subs)), sink, tmp_path, driver_lines=driver_lines
    )
    job.functions, job.algorithm = FunctionSettings(), algorithm
    result = job.run(log_frame(spark, tmp_path / "log", [line(p) for p in pubs]), "batch-1")
    assert (result.publications, result.enqueued) == (len(pubs), len(sink.rows))
    assert len(sink.rows) == len({(r["publication_id"], r["subscriber_id"]) for r in sink.rows})
    found = {
        (r["publication_id"], r["subscriber_id"], s)
        for r in sink.rows
        for s in r["subscription_ids"]
    }
    assert found == expected


def failing_function_store(tmp_path: Path) -> Store:
    store = make_store(tmp_path)
    code = "def match(publication):\n    return 1 / 0\n"
    spec = FunctionSpec("text", "code", code, fail_open=True)
    store.add_subscription(Subscription("f-bad", "bob", "function", function=spec))
    return store


def text_pubs(start: int, count: int) -> list[str]:
    return [
        line(Publication(f"q{i:03d}", 1.0 + i, None, (), {}, ("text",)))
        for i in range(start, start + count)
    ]


@every_way
def test_a_function_failing_again_and_again_is_suspended_with_the_brokers_rule(
    spark: SparkSession, tmp_path: Path, algorithm: Algorithm, driver_lines: int
) -> None:
    store = failing_function_store(tmp_path)
    job = Matching(
        Subscriptions(spark, store), QueueSink(store), tmp_path / "quarantine", algorithm=algorithm
    )
    job.functions, job.driver_lines = FunctionSettings(failures_to_suspend=5), driver_lines
    first = log_frame(spark, tmp_path / "log", text_pubs(0, 7))
    assert job.run(first, "batch-1").enqueued == 7  # fails open: delivered meanwhile
    suspended = store.get_subscription("f-bad")
    assert suspended is not None and suspended.status == "suspended"
    assert suspended.status_reason is not None
    assert suspended.status_reason.startswith("5 consecutive failures; last: ")
    later = log_frame(spark, tmp_path / "later", text_pubs(7, 3))
    assert job.run(later, "batch-2").enqueued == 0


def test_few_lines_are_all_taken_to_the_driver_and_many_are_left_to_the_workers(
    spark: SparkSession,
) -> None:
    texts = [line(p) for p in pubs(0, 10)]
    lines = spark.createDataFrame([(t,) for t in texts], "value string").repartition(3)
    assert sorted(few_lines(lines, 10) or []) == sorted(texts)
    assert few_lines(lines, 9) is None
    assert few_lines(lines, 0) is None  # the driver never matches


def test_a_batch_within_the_driver_limit_is_matched_in_the_driver_and_a_larger_one_is_not(
    spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    passes: list[int] = []
    here = index.match_here

    def counted(lines: list[str | None], *rest: Any) -> Any:
        passes.append(len(lines))
        return here(lines, *rest)

    monkeypatch.setattr(index, "match_here", counted)
    store, paths = make_store(tmp_path), paths_in(tmp_path)
    job = matching(spark, store, paths, QueueSink(store), 10)
    small = log_frame(spark, tmp_path / "small", [line(p) for p in pubs(0, 10)])
    assert job.run(small, "batch-1").publications == 10
    job.driver_lines = 9
    large = log_frame(spark, tmp_path / "large", [line(p) for p in pubs(10, 10)])
    assert job.run(large, "batch-2").publications == 10
    assert passes == [10]  # only the first batch was matched in the driver
    assert set(queued(store)) == expected(pubs(0, 20))
