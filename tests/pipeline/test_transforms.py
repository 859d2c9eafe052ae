from __future__ import annotations

import random

import pytest
from pyspark.sql import DataFrame, SparkSession

from tidings.matching.semantics import any_topic_matches, conjunction_holds
from tidings.model import Op, Predicate, Publication, Subscription
from tidings.pipeline import eventlog, transforms
from tidings.pipeline.snapshot import to_frames

from .workloads import Triple, line, matcher_triples, publications, subscriptions

pytestmark = pytest.mark.spark


def pubs_frame(spark: SparkSession, pubs: list[Publication]) -> DataFrame:
    lines = spark.createDataFrame([(line(p),) for p in pubs], "value string")
    return eventlog.valid(eventlog.parse_publications(lines)).cache()


def spark_triples(
    spark: SparkSession, subs: list[Subscription], pubs: list[Publication]
) -> set[Triple]:
    frames = to_frames(spark, 1, subs)
    found = transforms.all_matches(pubs_frame(spark, pubs), frames, None)
    return {(r.pub_id, r.subscriber_id, r.sub_id) for r in found.collect()}


def oracle_triples(subs: list[Subscription], pubs: list[Publication]) -> set[Triple]:
    return {
        (p.id, s.subscriber_id, s.id)
        for p in pubs
        for s in subs
        if (s.kind == "topic" and any_topic_matches(s.topics, p.topics))
        or (s.kind == "content" and conjunction_holds(s.predicates, p.attributes))
    }


@pytest.mark.parametrize("seed", [7])
def test_spark_deliveries_equal_the_in_process_matchers_on_random_workloads(
    spark: SparkSession, seed: int
) -> None:
    rng = random.Random(seed)
    subs, pubs = subscriptions(rng, 240), publications(rng, 150)
    expected = matcher_triples(subs, pubs)
    assert expected == oracle_triples(subs, pubs)
    assert len(expected) > 100  # the workload really matches things
    assert spark_triples(spark, subs, pubs) == expected


def test_a_trailing_hash_matches_the_parent_topic_and_a_star_exactly_one_segment(
    spark: SparkSession,
) -> None:
    subs = [
        Subscription("hash", "alice", "topic", topics=("a/#",)),
        Subscription("star", "bob", "topic", topics=("a/*",)),
        Subscription("all", "carol", "topic", topics=("#",)),
        Subscription("exact", "dave", "topic", topics=("a",)),
    ]
    pubs = [Publication("p1", 1.0, None, ("a",)), Publication("p2", 2.0, None, ("a/b/c",))]
    assert spark_triples(spark, subs, pubs) == {
        ("p1", "alice", "hash"),
        ("p1", "carol", "all"),
        ("p1", "dave", "exact"),
        ("p2", "alice", "hash"),
        ("p2", "carol", "all"),
    }


def test_exists_false_alone_matches_exactly_the_publications_without_the_key(
    spark: SparkSession,
) -> None:
    absent = Subscription(
        "none", "alice", "content", predicates=(Predicate("k", Op.EXISTS, False),)
    )
    mixed = Subscription(
        "mixed",
        "bob",
        "content",
        predicates=(Predicate("k", Op.EXISTS, False), Predicate("n", Op.GE, 2)),
    )
    pubs = [
        Publication("p1", 1.0, None, (), {"k": 1, "n": 3}),
        Publication("p2", 2.0, None, (), {"n": 2.0}),
        Publication("p3", 3.0, None, (), {}),
    ]
    assert spark_triples(spark, [absent, mixed], pubs) == {
        ("p2", "alice", "none"),
        ("p3", "alice", "none"),
        ("p2", "bob", "mixed"),
    }


def test_deliveries_fold_matches_into_one_row_per_publication_and_subscriber(
    spark: SparkSession,
) -> None:
    subs = [
        Subscription("s2", "alice", "topic", topics=("a",)),
        Subscription("s1", "alice", "content", predicates=(Predicate("x", Op.EQ, "y"),)),
        Subscription("s3", "bob", "topic", topics=("a/#",)),
    ]
    pub = Publication("p1", 5.0, {"hello": 1}, ("a",), {"x": "y"})
    pubs = pubs_frame(spark, [pub])
    found = transforms.all_matches(pubs, to_frames(spark, 1, subs), None)
    rows = transforms.deliveries(found, pubs).orderBy("subscriber_id").collect()
    assert [(r.subscriber_id, r.subscription_ids) for r in rows] == [
        ("alice", ["s1", "s2"]),
        ("bob", ["s3"]),
    ]
    assert rows[0].line == line(pub)
