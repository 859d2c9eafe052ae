"""The Spark pipeline: batch content matching against the in-process Matcher, and the
streaming matcher's publish-to-queue latency. JSON lines on stdout.

    .venv/bin/python benchmarks/pipeline.py [--quick]
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson

sys.path.insert(0, str(Path(__file__).parent))
from common import emit, machine, percentile, versions

from tidings.matching.engine import Event, Matcher
from tidings.model import Op, Predicate, Publication, Subscriber, Subscription

os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
KEYS = [f"k{i}" for i in range(10)]
COLOURS = [f"c{i}" for i in range(50)]
TRIGGER_S = 0.5


def content_subs(rng: random.Random, n: int, owners: int) -> list[Subscription]:
    """Two predicates each: a colour equality and a numeric range (about 1/50 x 1/10 match)."""
    out = []
    for i in range(n):
        low = rng.randrange(0, 90)
        preds = (
            Predicate(rng.choice(KEYS[:3]), Op.EQ, rng.choice(COLOURS)),
            Predicate("x", Op.GE, low),
            Predicate("x", Op.LT, low + 10),
        )
        out.append(Subscription(f"s{i:07d}", f"u{i % owners:05d}", "content", predicates=preds))
    return out


def publication(rng: random.Random, i: int, at: float) -> Publication:
    attrs: dict[str, Any] = {k: rng.choice(COLOURS) for k in KEYS[:3]}
    attrs.update(x=rng.randrange(0, 100), y=rng.random())
    return Publication(f"p{i:08d}", at, {"i": i}, ("bench/t",), attrs)


def local_batch(subs: list[Subscription], pubs: list[Publication]) -> tuple[float, int]:
    matcher = Matcher()
    for s in subs:
        matcher.add_content(s.id, s.subscriber_id, s.predicates)
    started = time.perf_counter()
    answers = matcher.match_batch([Event(p.topics, p.attributes) for p in pubs])
    elapsed = time.perf_counter() - started
    return elapsed, sum(len(ids) for a in answers for ids in a.values())


def spark_batch(spark: Any, subs: list[Subscription], pubs: list[Publication]) -> tuple[float, int]:
    from tidings.pipeline import logs, transforms
    from tidings.pipeline.snapshot import to_frames

    frames = to_frames(spark, 1, subs)
    frames.predicates.count()
    lines = spark.createDataFrame(
        [(orjson.dumps(p.to_json()).decode(),) for p in pubs], "value string"
    )
    lines = lines.repartition(2).cache()
    lines.count()
    started = time.perf_counter()
    valid = logs.valid(logs.parse_publications(lines)).cache()
    found = transforms.content_matches(valid, frames.predicates, frames.absent).count()
    elapsed = time.perf_counter() - started
    valid.unpersist()
    return elapsed, found


def batch_case(spark: Any, n_subs: int, n_pubs: int, workload: dict[str, Any]) -> None:
    rng = random.Random(1)
    subs = content_subs(rng, n_subs, 1000)
    pubs = [publication(rng, i, 0.0) for i in range(n_pubs)]
    spark_batch(spark, subs[:1000], pubs[:100])  # warm up the Python workers and the JVM
    local_s, local_n = local_batch(subs, pubs)
    spark_s, spark_n = spark_batch(spark, subs, pubs)
    emit(
        {
            "case": "batch_content",
            "subscriptions": n_subs,
            "publications": n_pubs,
            "matches": spark_n,
            "matches_agree": spark_n == local_n,
            "publications_per_s": n_pubs / spark_s,
            "local_publications_per_s": n_pubs / local_s,
            "ratio_vs_local": local_s / spark_s,
            "seconds": spark_s,
            "local_seconds": local_s,
            "p50_ms": None,
            "p99_ms": None,
            "master": "local[2]",
            "workload": workload,
        }
    )


def writer(log_dir: Path, rate: int, seconds: float, rng: random.Random, start: int) -> int:
    """Log `rate` publications per second, one finished file every 100 ms."""
    per_tick, written, began = max(1, rate // 10), 0, time.time()
    while time.time() - began < seconds:
        tick = time.time()
        pubs = [publication(rng, start + written + j, time.time()) for j in range(per_tick)]
        name = f"{int(tick * 1000):013d}-{os.getpid()}-{start + written:08d}.jsonl"
        (log_dir / f"_inprogress-{name}").write_bytes(
            b"".join(orjson.dumps(p.to_json()) + b"\n" for p in pubs)
        )
        os.replace(log_dir / f"_inprogress-{name}", log_dir / name)
        written += per_tick
        time.sleep(max(0.0, 0.1 - (time.time() - tick)))
    return written


def streaming_case(spark: Any, rate: int, n_subs: int, seconds: float, quick: bool) -> None:
    from tidings.pipeline.jobs import Matching, Paths, Subscriptions, start_stream
    from tidings.pipeline.sink import QueueSink
    from tidings.store import open_store

    work = Path(tempfile.mkdtemp(prefix="tidings-bench-"))
    store = open_store(f"sqlite:///{work / 'tidings.db'}")
    owners = 100
    for i in range(owners):
        store.add_subscriber(Subscriber(f"u{i:05d}", "hash", 0.0))
    for sub in content_subs(random.Random(2), n_subs, owners):
        store.add_subscription(sub)
    paths = Paths(work / "log", work / "quarantine", work / "checkpoint")
    paths.publications.mkdir(parents=True)
    matching = Matching(Subscriptions(spark, store), QueueSink(store), paths.quarantine)
    query = start_stream(spark, matching, paths, TRIGGER_S)
    time.sleep(3.0)  # first trigger: snapshot and workers up before the clock starts
    written = writer(paths.publications, rate, seconds, random.Random(3), 0)
    time.sleep(3 * TRIGGER_S + 2.0)
    query.stop()
    latencies = [
        (m.enqueued_at - m.body["published_at"]) * 1000
        for i in range(owners)
        for m in store.lease(f"u{i:05d}", 1_000_000, 60.0, 5, time.time())
    ]
    pubs_seen = len({m for m in latencies})
    emit(
        {
            "case": f"streaming_{rate}_per_s",
            "subscriptions": n_subs,
            "publications": written,
            "deliveries": len(latencies),
            "publications_per_s": written / seconds,
            "ratio_vs_local": None,
            "p50_ms": percentile(latencies, 50),
            "p99_ms": percentile(latencies, 99),
            "max_ms": max(latencies) if latencies else None,
            "trigger_s": TRIGGER_S,
            "seconds": seconds,
            "store": "sqlite",
            "master": "local[2]",
            "quick": quick,
            "distinct_latencies": pubs_seen,
        }
    )
    store.close()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="smaller workloads")
    args = parser.parse_args()
    from tidings.pipeline.session import build_session

    load = os.getloadavg()[0]
    spark = build_session("local[2]", "tidings-bench", shuffle_partitions=4)
    emit(
        {
            "bench": "pipeline",
            "header": True,
            "machine": machine(),
            "versions": versions("pyspark", "pandas", "pyarrow"),
            "started_at": datetime.now(UTC).isoformat(timespec="seconds"),
            "load_average_at_start": load,
            "command": "python benchmarks/pipeline.py" + (" --quick" if args.quick else ""),
        }
    )
    workload = {
        "subscriptions": "3 predicates: key in k0..k2 = one of 50 colours, 10-wide range on x",
        "publications": "3 colour attributes, x in 0..99, y float; about 0.07% of subs match",
    }
    n_subs, n_pubs = (10_000, 2_000) if args.quick else (100_000, 10_000)
    batch_case(spark, n_subs, n_pubs, workload)
    seconds = 8.0 if args.quick else 20.0
    for rate in (100, 1000):
        streaming_case(spark, rate, 10_000, seconds, args.quick)
    spark.stop()


if __name__ == "__main__":
    main()
