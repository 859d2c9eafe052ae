"""`matching = "spark"`: the broker only logs, and the pipeline is the path from publish to
queue, for all three kinds of subscription."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from tidings.client.sync import Client
from tidings.config import load_settings
from tidings.pipeline.jobs import Matching, Paths, Subscriptions, match_available
from tidings.pipeline.sink import QueueSink
from tidings.server import EmbeddedServer
from tidings.store import open_store

pytestmark = pytest.mark.spark

HOT = "def match(publication):\n    return 'hot' in publication['data']\n"


def logged_ids(directory: Path) -> str:
    """The text of the finished publication log files (in-progress ones start with `_`)."""
    return "".join(p.read_text() for p in directory.glob("[!_]*.jsonl"))


def wait_until_logged(directory: Path, ids: list[str], timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not all(i in logged_ids(directory) for i in ids):
        if time.monotonic() > deadline:
            raise AssertionError(f"publications {ids} were never rotated into {directory}")
        time.sleep(0.1)


def test_with_spark_matching_the_pipeline_delivers_exactly_what_matches_through_the_api(
    spark: SparkSession, tmp_path: Path
) -> None:
    settings = load_settings({"data_dir": tmp_path, "matching": "spark", "log_rotate_s": 0.0})
    with EmbeddedServer(settings) as server, Client(server.url) as client:
        alice, bob, carol = client.register(), client.register(), client.register()
        alice.subscribe(topics=["home/#"])
        bob.subscribe(predicates=[{"key": "temp", "op": ">", "value": 30}])
        carol.subscribe(function={"function_type": "text", "code": HOT})
        kitchen = client.publish(
            "hot kitchen", topics=["home/kitchen"], attributes={"temp": 35}, function_types=["text"]
        )
        garden = client.publish("cool garden", topics=["garden"], attributes={"temp": 20})
        hall = client.publish("hot hall", attributes={"temp": 31}, function_types=["text"])
        assert [p.deliveries for p in (kitchen, garden, hall)] == [0, 0, 0]  # left to Spark
        assert alice.pull(wait=0) == []
        wait_until_logged(settings.log_dir / "publications", [kitchen.id, garden.id, hall.id])

        store = open_store(settings.resolved_store_url, writer=True)
        paths = Paths.of(settings)
        job = Matching(Subscriptions(spark, store), QueueSink(store), paths.quarantine)
        job.functions = settings.functions
        assert sum(r.enqueued for r in match_available(spark, job, paths)) == 5
        assert sum(r.enqueued for r in match_available(spark, job, paths)) == 0  # checkpoint
        store.close()

        received = {
            name: sorted(m.publication_id for m in who.pull(max_messages=10, wait=5))
            for name, who in (("alice", alice), ("bob", bob), ("carol", carol))
        }
    assert received == {
        "alice": [kitchen.id],
        "bob": sorted([kitchen.id, hall.id]),
        "carol": sorted([kitchen.id, hall.id]),
    }
