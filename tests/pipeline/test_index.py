from __future__ import annotations

import gc

import pytest
from pyspark.sql import SparkSession

from tidings import heap
from tidings.config import FunctionSettings
from tidings.model import FunctionSpec, Op, Predicate, Publication, Subscription
from tidings.pipeline import index

from .workloads import line

CODE = "def match(publication):\n    return {body}\n"


def function_sub(sid: str, function_type: str, body: str, **options: object) -> Subscription:
    spec = FunctionSpec(
        function_type,
        "code",
        CODE.format(body=body),
        fail_open=bool(options.pop("fail_open", False)),
    )
    return Subscription(sid, f"owner-{sid}", "function", function=spec, **options)  # type: ignore[arg-type]


def function_matches(subs: list[Subscription], pubs: list[Publication]) -> list[index.Found]:
    snapshot = index.SnapshotIndex(index.pack(1, subs))
    found: list[index.Found] = [{} for _ in pubs]
    host = index.RunnerHost(FunctionSettings())
    try:
        host.call(index.add_function_matches(host.runner, snapshot, pubs, found))
    finally:
        host.close()
    return found


def test_a_failed_call_matches_only_when_failing_open_and_a_suspended_function_never() -> None:
    subs = [
        function_sub("yes", "text", "True"),
        function_sub("open", "text", "1 / 0", fail_open=True),
        function_sub("closed", "text", "1 / 0"),
        function_sub("odd", "text", "'not a bool'"),
        function_sub("off", "text", "True", status="suspended"),
        function_sub("image", "image", "True"),
    ]
    pubs = [
        Publication("p1", 1.0, "hi", (), {}, ("text",)),
        Publication("p2", 2.0, "hi", (), {}, ()),
    ]
    first, second = function_matches(subs, pubs)
    assert first == {"owner-yes": {"yes"}, "owner-open": {"open"}}
    assert second == {}


def test_one_pass_gives_deliveries_the_malformed_lines_with_reasons_and_the_count() -> None:
    subs = [Subscription("t1", "alice", "topic", topics=("a/#",))]
    snapshot = index.SnapshotIndex(index.pack(1, subs))
    pubs = [Publication("p1", 1.0, None, ("a",)), Publication("p2", 2.0, None, ("b",))]
    lines = [line(pubs[0]), '{"id": 3}', "", line(pubs[1]), "{torn"]
    options = index.MatchOptions("t", None)  # type: ignore[arg-type]  # the snapshot is given
    rows = index.match_lines_batch(lines, snapshot, options).to_pylist()
    assert [(r["publication_id"], r["subscriber_id"], r["subscription_ids"]) for r in rows[:1]] == [
        ("p1", "alice", ["t1"])
    ]
    assert [r["line"] for r in rows if r["error"]] == ['{"id": 3}', "{torn"]
    assert [r["valid"] for r in rows if r["valid"] is not None] == [2]


@pytest.mark.spark
def test_a_worker_matches_a_new_snapshot_with_a_new_index_even_at_the_same_version(
    spark: SparkSession,
) -> None:
    pub = Publication("p1", 1.0, None, ("a/b",), {"n": 5})
    lines = spark.createDataFrame([(line(pub),)], "value string").coalesce(1)
    broadcaster = index.Broadcaster(spark)

    def delivered(subs: list[Subscription]) -> set[tuple[str, tuple[str, ...]]]:
        packed = index.pack(7, subs)
        options = index.MatchOptions(packed.token, broadcaster.share(packed))
        rows = index.match_lines(lines, options).where("subscriber_id IS NOT NULL").collect()
        return {(r.subscriber_id, tuple(r.subscription_ids)) for r in rows}

    before = [Subscription("t1", "alice", "topic", topics=("a/#",))]
    after = [
        Subscription("t2", "bob", "topic", topics=("a/*",)),
        Subscription("c1", "bob", "content", predicates=(Predicate("n", Op.GT, 4),)),
    ]
    assert delivered(before) == {("alice", ("t1",))}
    assert delivered(after) == {("bob", ("c1", "t2"))}


def test_a_process_settles_its_heap_after_building_a_large_index(
    monkeypatch: pytest.MonkeyPatch, unfrozen: None
) -> None:
    subs = [
        Subscription("t1", "alice", "topic", topics=("a/#",)),
        Subscription("c1", "bob", "content", predicates=(Predicate("n", Op.GT, 4),)),
    ]
    packed = index.pack(8, subs)
    gc.unfreeze()
    monkeypatch.setattr(heap, "SETTLE_FROM", 3)
    index.cached_index("small-" + packed.token, lambda: packed)
    assert gc.get_freeze_count() == 0
    monkeypatch.setattr(heap, "SETTLE_FROM", 2)
    built = index.cached_index("large-" + packed.token, lambda: packed)
    assert gc.get_freeze_count() > 0
    assert built.match([Publication("p", 1.0, None, ("a/b",), {"n": 5})]) == [
        {"alice": {"t1"}, "bob": {"c1"}}
    ]
