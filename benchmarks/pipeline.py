"""The Spark pipeline: batch content matching (workload W-A, the `index` algorithm) against
the in-process Matcher in the same run, and the streaming matcher's publish-to-queue
latency at 100 and 1,000 publications/s. JSON lines on stdout.

    .venv/bin/python benchmarks/pipeline.py [--quick]

Full: 10^6 W-A subscriptions x 10^5 publications; quick: 10^5 x 10^4.
"""

from __future__ import annotations

import argparse
import gc
import os
import random
import resource
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import orjson

sys.path.insert(0, str(Path(__file__).parent))
from common import emit, machine, percentile, versions

from tidings.heap import settle_heap
from tidings.matching.content import ContentIndex
from tidings.matching.engine import Event, Matcher
from tidings.matching.synthetic import (
    event_arrays,
    events_of,
    named,
    predicates_of,
    subscription_arrays,
)
from tidings.model import Op, Predicate, Publication, Subscriber, Subscription

KEYS = [f"k{i}" for i in range(10)]
COLOURS = [f"c{i}" for i in range(50)]
RANGE = 2  # width of each subscription's range on x (of 100): about 4 deliveries per publication


def content_subs(rng: random.Random, n: int, owners: int) -> list[Subscription]:
    """A colour equality and a range on x: each matches 1/50 x RANGE/100 of publications."""
    out = []
    for i in range(n):
        low = rng.randrange(0, 100 - RANGE)
        preds = (
            Predicate(rng.choice(KEYS[:3]), Op.EQ, rng.choice(COLOURS)),
            Predicate("x", Op.GE, low),
            Predicate("x", Op.LT, low + RANGE),
        )
        out.append(Subscription(f"s{i:07d}", f"u{i % owners:05d}", "content", predicates=preds))
    return out


def publication(rng: random.Random, i: int, at: float) -> Publication:
    attrs: dict[str, Any] = {k: rng.choice(COLOURS) for k in KEYS[:3]}
    attrs.update(x=rng.randrange(0, 100), y=rng.random())
    return Publication(f"p{i:08d}", at, {"i": i}, ("bench/t",), attrs)


MATCH_CHUNK = 64  # as tidings.pipeline.index.MATCH_CHUNK


def wa_workload(
    n_subs: int, n_pubs: int
) -> tuple[Callable[[], Iterator[Subscription]], list[Publication]]:
    """W-A subscriptions as a stream (made again on each call, never all held as objects:
    10^6 of them take gigabytes), and the publications."""
    w = named("W-A")
    rng = np.random.default_rng(1)
    attrs, lows = subscription_arrays(w, n_subs, rng)

    def stream() -> Iterator[Subscription]:
        for i, preds in enumerate(predicates_of(w, attrs, lows)):
            yield Subscription(f"s{i:07d}", f"u{i % 1000:04d}", "content", predicates=preds)

    events = events_of(w, event_arrays(w, n_pubs, rng))
    return stream, [Publication(f"p{i:08d}", 0.0, None, (), e) for i, e in enumerate(events)]


def local_batch(subs: Iterable[Subscription], pubs: list[Publication]) -> tuple[float, float, int]:
    """(build seconds, match seconds, matches) of the in-process Matcher."""
    started = time.perf_counter()
    content = ContentIndex()
    matcher = Matcher(content=content)
    for s in subs:
        matcher.add_content(s.id, s.subscriber_id, s.predicates)
    content.intervals.wait()  # merges and rebuilds run in the background: let them finish
    content.intervals.rebuild()  # as a bulk build leaves it, as in each Spark worker
    built = time.perf_counter()
    settle_heap()  # as the broker and the pipeline's workers do after loading
    events = [Event(p.topics, p.attributes) for p in pubs]
    matches = 0
    for i in range(0, len(events), MATCH_CHUNK):  # the chunk the pipeline uses
        matches += sum(
            len(ids) for a in matcher.match_batch(events[i : i + MATCH_CHUNK]) for ids in a.values()
        )
    elapsed = time.perf_counter() - built
    return built - started, elapsed, matches


def spark_batch(spark: Any, packed: Any, shared: Any, lines: Any) -> tuple[float, int]:
    """Seconds to parse, match and count every delivery's subscriptions (the index pass)."""
    from pyspark.sql import functions as F

    from tidings.pipeline import index

    started = time.perf_counter()
    rows = index.match_lines(lines, index.MatchOptions(packed.token, shared))
    found = rows.where("subscriber_id IS NOT NULL")
    total = found.agg(F.sum(F.size("subscription_ids"))).collect()[0][0] or 0
    return time.perf_counter() - started, int(total)


def descendants(pid: int) -> list[int]:
    """Every process below `pid` (the JVM and its Python workers), from /proc."""
    parent: dict[int, int] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        parent[int(stat.parent.name)] = int(fields[1])
    found, frontier = [], [pid]
    while frontier:
        below = [p for p, pp in parent.items() if pp in frontier]
        found += below
        frontier = below
    return found


def rss_mib() -> dict[str, float]:
    """Peak resident size of this process, and the current size of its descendants."""
    children = 0
    for pid in descendants(os.getpid()):
        try:
            status = Path(f"/proc/{pid}/status").read_text()
        except OSError:
            continue
        children += next(
            (int(x.split()[1]) for x in status.splitlines() if x.startswith("VmRSS:")), 0
        )
    return {
        "driver_peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
        "children_rss_mib": round(children / 1024),
    }


def lines_of(spark: Any, pubs: list[Publication]) -> Any:
    text = [(orjson.dumps(p.to_json()).decode(),) for p in pubs]
    lines = spark.createDataFrame(text, "value string").repartition(2).cache()
    lines.count()
    return lines


def batch_case(spark: Any, n_subs: int, n_pubs: int) -> None:
    from tidings.pipeline import index

    subs, events = wa_workload(n_subs, n_pubs + 1000)
    pubs, warm = events[:n_pubs], events[n_pubs:]  # warm-up events are not timed again
    local_build_s, local_s, local_n = local_batch(subs(), pubs)
    gc.collect()
    started = time.perf_counter()
    packed = index.pack(1, subs())  # as the driver packs a snapshot streamed from the store
    pack_s = time.perf_counter() - started
    shared = spark.sparkContext.broadcast(packed)
    broadcast_s = time.perf_counter() - started - pack_s
    cold_s, _ = spark_batch(spark, packed, shared, lines_of(spark, warm))  # workers build
    lines = lines_of(spark, pubs)
    spark_s, spark_n = spark_batch(spark, packed, shared, lines)
    emit(
        {
            "case": "batch_content",
            "algorithm": "index",
            "workload": "W-A (d=20, k=10, w=0.5, domain 10^6)",
            "subscriptions": n_subs,
            "publications": n_pubs,
            "matches": spark_n,
            "matches_agree": spark_n == local_n,
            "publications_per_s": n_pubs / spark_s,
            "local_publications_per_s": n_pubs / local_s,
            "ratio_vs_local": local_s / spark_s,
            "seconds": spark_s,
            "cold_seconds_1000_other_publications": cold_s,
            "local_seconds": local_s,
            "local_build_seconds": local_build_s,
            "pack_seconds": pack_s,
            "broadcast_seconds": broadcast_s,
            "columns": len(packed.columns),
            "p50_ms": None,
            "p99_ms": None,
            "master": "local[2]",
            **rss_mib(),
            "load_average_at_end": os.getloadavg()[0],
        }
    )
    shared.unpersist()
    lines.unpersist()


def write_file(log_dir: Path, name: str, pubs: list[Publication]) -> None:
    """A finished log file, as the broker's rotation leaves it (renamed when complete)."""
    (log_dir / f"_inprogress-{name}").write_bytes(
        b"".join(orjson.dumps(p.to_json()) + b"\n" for p in pubs)
    )
    os.replace(log_dir / f"_inprogress-{name}", log_dir / name)


def writer(log_dir: Path, rate: int, seconds: float, rng: random.Random) -> list[Publication]:
    """Log `rate` publications per second, one finished file every 100 ms."""
    written: list[Publication] = []
    per_tick, began = max(1, rate // 10), time.time()
    while time.time() - began < seconds:
        tick = time.time()
        pubs = [publication(rng, len(written) + j, time.time()) for j in range(per_tick)]
        write_file(log_dir, f"{int(tick * 1000):013d}-{os.getpid()}-{len(written):08d}.jsonl", pubs)
        written += pubs
        time.sleep(max(0.0, 0.1 - (time.time() - tick)))
    return written


def expected_deliveries(subs: list[Subscription], pubs: list[Publication]) -> int:
    """(publication, subscriber) pairs the in-process Matcher finds."""
    matcher = Matcher()
    for s in subs:
        matcher.add_content(s.id, s.subscriber_id, s.predicates)
    return sum(len(a) for a in matcher.match_batch([Event(p.topics, p.attributes) for p in pubs]))


def streaming_case(
    spark: Any,
    rate: int,
    n_subs: int,
    seconds: float,
    quick: bool,
    trigger_s: float,
    driver_lines: int,
) -> None:
    from tidings.pipeline.jobs import Matching, Paths, Subscriptions, start_stream, stop
    from tidings.pipeline.sink import QueueSink
    from tidings.store import open_store

    work = Path(tempfile.mkdtemp(prefix="tidings-bench-"))
    store = open_store(f"sqlite:///{work / 'tidings.db'}")
    owners = 100
    for i in range(owners):
        store.add_subscriber(Subscriber(f"u{i:05d}", "hash", 0.0))
    subs = content_subs(random.Random(2), n_subs, owners)
    for sub in subs:
        store.add_subscription(sub)
    paths = Paths(work / "log", work / "quarantine", work / "checkpoint")
    paths.publications.mkdir(parents=True)
    warm = [publication(random.Random(4), 10**7 + i, time.time()) for i in range(50)]
    for half in (0, 1):  # two files: whoever matches builds its index before the clock
        write_file(paths.publications, f"000000000000{half}-0-warmup.jsonl", warm[half::2])
    matching = Matching(
        Subscriptions(spark, store), QueueSink(store), paths.quarantine, driver_lines=driver_lines
    )
    query = start_stream(spark, matching, paths, trigger_s)
    query.processAllAvailable()  # snapshot, broadcast and worker indexes ready: clock starts
    for i in range(owners):
        store.lease(f"u{i:05d}", 1_000_000, 3600.0, 5, time.time())  # the warm-up's
    written = writer(paths.publications, rate, seconds, random.Random(3))
    query.processAllAvailable()
    stop(query)
    latencies = [
        (m.enqueued_at - m.body["published_at"]) * 1000
        for i in range(owners)
        for m in store.lease(f"u{i:05d}", 1_000_000, 60.0, 5, time.time())
    ]
    emit(
        {
            "case": f"streaming_{rate}_per_s",
            "algorithm": "index",
            "subscriptions": n_subs,
            "publications": len(written),
            "deliveries": len(latencies),
            "deliveries_agree": len(latencies) == expected_deliveries(subs, written),
            "publications_per_s": len(written) / seconds,
            "ratio_vs_local": None,
            "p50_ms": percentile(latencies, 50),
            "p99_ms": percentile(latencies, 99),
            "max_ms": max(latencies) if latencies else None,
            "trigger_s": trigger_s,
            "driver_lines": driver_lines,
            "seconds": seconds,
            "store": "sqlite",
            "master": "local[2]",
            "quick": quick,
            "deliveries_per_publication": len(latencies) / max(1, len(written)),
            "workload": f"k0..k2 = one of 50 colours and x in a {RANGE}-wide range of 0..99",
        }
    )
    store.close()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="smaller workloads")
    parser.add_argument("--skip-batch", action="store_true", help="only the streaming cases")
    parser.add_argument("--trigger", type=float, default=0.25, help="micro-batch interval, s")
    parser.add_argument(
        "--driver-lines",
        type=int,
        default=2000,
        help="batches of at most this many lines are matched in the driver (0: never)",
    )
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
            "command": "python benchmarks/pipeline.py " + " ".join(sys.argv[1:]),
        }
    )
    if not args.skip_batch:
        batch_case(spark, *((100_000, 10_000) if args.quick else (1_000_000, 100_000)))
    seconds = 8.0 if args.quick else 20.0
    for rate in (100, 1000):
        streaming_case(spark, rate, 10_000, seconds, args.quick, args.trigger, args.driver_lines)
    emit({"bench": "pipeline", "load_average_at_end": os.getloadavg()[0]})
    spark.stop()


if __name__ == "__main__":
    main()
