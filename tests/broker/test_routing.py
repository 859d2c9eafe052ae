"""Routing: each matching mode behind one seam."""

from __future__ import annotations

import asyncio
import dataclasses
from pathlib import Path

from tidings.broker.index import SubscriptionIndex
from tidings.broker.routing import LocalRouting, SparkRouting, match_yielding, routing_for
from tidings.broker.telemetry import Telemetry
from tidings.config import load_settings
from tidings.metrics import Metrics
from tidings.model import Publication, Subscription
from tidings.store.base import Fanout


class Recorder:
    def __init__(self) -> None:
        self.delivered: list[list[Fanout]] = []

    async def __call__(self, fanouts: list[Fanout]) -> None:
        self.delivered.append(fanouts)


def pub(pid: str, *topics: str) -> Publication:
    return Publication(pid, 0.0, None, topics, {}, ())


def local() -> tuple[LocalRouting, Recorder, Metrics]:
    index, metrics, deliver = SubscriptionIndex(), Metrics(), Recorder()
    index.add(Subscription("s", "alice", "topic", ("a",)))
    return LocalRouting(index, Telemetry(metrics, None, index.kind_of), deliver), deliver, metrics


async def test_local_routing_delivers_only_publications_that_matched_in_one_call() -> None:
    routing, deliver, metrics = local()
    assert await routing.route([pub("p1", "a"), pub("p2", "b")]) == [1, 0]
    assert [[f.publication_id for f in call] for call in deliver.delivered] == [["p1"]]
    assert metrics.registry.get_sample_value("tidings_matching_seconds_count") == 2


async def test_local_per_topic_routing_counts_each_matching_topic() -> None:
    routing, deliver, _ = local()
    assert await routing.route_per_topic(pub("p", "a", "b")) == 1
    assert [f.dedup_key for f in deliver.delivered[0]] == ["p#a"]


async def test_spark_routing_enqueues_nothing_and_runs_no_functions() -> None:
    routing = SparkRouting()
    assert await routing.route([pub("p1", "a"), pub("p2")]) == [0, 0]
    assert await routing.route_per_topic(pub("p", "a")) == 0
    assert not routing.runs_functions


def test_the_mode_chooses_the_routing(tmp_path: Path) -> None:
    settings = load_settings({"data_dir": tmp_path}, env={})
    index, deliver = SubscriptionIndex(), Recorder()
    telemetry = Telemetry(Metrics(), None, index.kind_of)
    spark = dataclasses.replace(settings, matching="spark")
    elastic_without_deployment = dataclasses.replace(settings, matching="elastic")
    assert isinstance(routing_for(spark, index, telemetry, deliver, None), SparkRouting)
    assert isinstance(routing_for(settings, index, telemetry, deliver, None), LocalRouting)
    chosen = routing_for(elastic_without_deployment, index, telemetry, deliver, None)
    assert isinstance(chosen, LocalRouting)


async def test_a_large_batch_is_matched_with_the_event_loop_running_between_its_chunks() -> None:
    routing, deliver, _ = local()
    matching = asyncio.ensure_future(routing.route([pub(f"p{n}", "a") for n in range(1000)]))
    turns = 0
    while not matching.done():  # a turn of this loop is one turn of the event loop
        turns += 1
        await asyncio.sleep(0)
    assert await matching == [1] * 1000
    assert sum(len(call) for call in deliver.delivered) == 1000
    assert turns > 2  # the first chunk is 8 publications: never the whole batch at once


async def test_matching_in_chunks_answers_as_matching_at_once() -> None:
    index = SubscriptionIndex()
    index.add(Subscription("s1", "alice", "topic", ("a/*",)))
    index.add(Subscription("s2", "bob", "topic", ("a/#",)))
    pubs = [pub(f"p{n}", f"a/{n % 3}", "b") if n % 2 else pub(f"p{n}", "a") for n in range(300)]
    assert await match_yielding(index, pubs) == index.match_batch(pubs)
