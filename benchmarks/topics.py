"""Topic matching throughput: `TopicIndex` at up to 10^6 subscriptions (issue 4).

    python benchmarks/topics.py [--subscriptions N] [--topics T] [--pattern-share P] [--quick]

Workload (seeded): T topic names `r{a}/d{b}/m{c}` in a three-level tree (10 x sqrt(T/10) x
sqrt(T/10)). Of N subscriptions, a share P are patterns built from a random topic, half with
one segment replaced by `*` (matching 10 or about sqrt(T/10) topics), half as `r{a}/d{b}/#`
(about sqrt(T/10) topics); the rest are exact names of uniformly drawn topics. Each publication
carries one topic, drawn uniformly or Zipf (s = 1) over the topics.

Prints JSON lines: a header (machine, versions, note), then one line per (distribution, api,
cache) with `publications_per_s` (a tight loop, after a warm-up pass over the same
publications), `mean_us` and `p99_us` (timed call by call), `matches_per_publication`,
`memory_mib` (resident growth while building; the caller's id and filter strings are not
counted), `build_s`, `add_us` and `remove_us`. APIs: `TopicIndex.match_slots` (the answer as
a cached int32 array of slots), `TopicIndex.match([topic])` (a fresh set of id strings) and
`Matcher.match` (ids grouped by subscriber, 10 subscriptions per subscriber; what the broker
calls; with its caches on, recent grouped answers are served from its own LRU cache, and off:
`Matcher(topic_cache_size=0, answer_cache_matches=0)`). The same-run
baseline is a naive scan testing every subscription's filters with `semantics.topic_matches`,
timed on a sample of subscriptions and extrapolated linearly to N: `ratio_vs_scan` =
publications_per_s / baseline_publications_per_s; cache-on lines also carry
`ratio_vs_no_cache` against the same API with the cache off. After building, the heap is
settled (`tidings.heap.settle_heap`, `gc.freeze`) as the broker settles it after loading.
"""

from __future__ import annotations

import argparse
import gc
import json
import math
import os
import random
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np

from tidings import environment
from tidings.heap import settle_heap
from tidings.matching.engine import Event, Matcher
from tidings.matching.semantics import any_topic_matches
from tidings.matching.topics import DEFAULT_CACHE_SIZE, TopicIndex

SEED = 20261122


def machine() -> dict[str, Any]:
    return {**environment.machine(), "numpy": np.__version__}


def rss_mib() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def make_topics(count: int) -> list[str]:
    wide = max(1, math.ceil(math.sqrt(count / 10)))
    return [f"r{i % 10}/d{(i // 10) % wide}/m{i // (10 * wide)}" for i in range(count)]


def make_filter(rng: random.Random, topics: Sequence[str], pattern: bool) -> str:
    segments = rng.choice(topics).split("/")
    if not pattern:
        return "/".join(segments)
    if rng.random() < 0.5:
        segments[rng.randrange(len(segments))] = "*"
    else:
        segments[-1] = "#"
    return "/".join(segments)


def make_subscriptions(
    rng: random.Random, count: int, topics: Sequence[str], share: float
) -> list[tuple[str, str]]:
    return [(f"{i:024x}", make_filter(rng, topics, rng.random() < share)) for i in range(count)]


def make_publications(
    rng: np.random.Generator, topics: Sequence[str], count: int, zipf: bool
) -> list[str]:
    if not zipf:
        return [topics[i] for i in rng.integers(0, len(topics), count)]
    weights = 1.0 / np.arange(1, len(topics) + 1)
    order = rng.permutation(len(topics))
    ranks = rng.choice(len(topics), size=count, p=weights / weights.sum())
    return [topics[order[r]] for r in ranks]


def build(subs: Sequence[tuple[str, str]], cache_size: int) -> tuple[TopicIndex, float, float]:
    gc.collect()
    before, start = rss_mib(), time.perf_counter()
    index = TopicIndex(cache_size=cache_size)
    for sid, topic_filter in subs:
        index.add(sid, (topic_filter,))
    return index, time.perf_counter() - start, rss_mib() - before


def throughput(match: Callable[[str], object], pubs: Sequence[str]) -> float:
    start = time.perf_counter()
    for topic in pubs:
        match(topic)
    return len(pubs) / (time.perf_counter() - start)


def latencies_us(match: Callable[[str], object], pubs: Sequence[str]) -> np.ndarray:
    clock = time.perf_counter_ns
    out = np.empty(len(pubs))
    for i, topic in enumerate(pubs):
        start = clock()
        match(topic)
        out[i] = clock() - start
    return out / 1000.0


def measure(match: Callable[[str], object], pubs: Sequence[str], count: int) -> dict[str, Any]:
    """`pubs` is one stream: `count` to warm up (the cache reaches its steady state), `count`
    timed for throughput, the rest timed call by call; topics repeat only as drawn."""
    throughput(match, pubs[:count])
    gc.collect()
    rate = throughput(match, pubs[count : 2 * count])
    lat = latencies_us(match, pubs[2 * count :])
    return {
        "publications_per_s": round(rate),
        "mean_us": round(float(lat.mean()), 2),
        "p99_us": round(float(np.percentile(lat, 99)), 2),
    }


def add_remove_us(index: TopicIndex, subs: Sequence[tuple[str, str]]) -> tuple[float, float]:
    start = time.perf_counter()
    for sid, _ in subs:
        index.remove(sid)
    removed = time.perf_counter()
    for sid, topic_filter in subs:
        index.add(sid, (topic_filter,))
    added = time.perf_counter()
    return (added - removed) / len(subs) * 1e6, (removed - start) / len(subs) * 1e6


def scan_baseline(subs: Sequence[tuple[str, str]], pubs: Sequence[str], total: int) -> float:
    """Publications/s of testing all `total` subscriptions, from a timed sample."""
    filters = [(f,) for _, f in subs]
    start = time.perf_counter()
    for topic in pubs:
        one = (topic,)
        for fs in filters:
            any_topic_matches(fs, one)
    per_pub_per_sub = (time.perf_counter() - start) / (len(pubs) * len(filters))
    return 1.0 / (per_pub_per_sub * total)


def index_apis(index: TopicIndex) -> dict[str, Callable[[str], object]]:
    def match(topic: str) -> set[str]:
        return index.match([topic])

    return {"TopicIndex.match_slots": index.match_slots, "TopicIndex.match": match}


def run(args: argparse.Namespace) -> Iterator[dict[str, Any]]:
    rng, nrng = random.Random(SEED), np.random.default_rng(SEED)
    topics = make_topics(args.topics)
    subs = make_subscriptions(rng, args.subscriptions, topics, args.pattern_share)
    workload = {
        "subscriptions": args.subscriptions,
        "topics": args.topics,
        "pattern_share": args.pattern_share,
        "publications": args.publications,
        "cache_size": DEFAULT_CACHE_SIZE,
    }
    index, build_s, memory = build(subs, DEFAULT_CACHE_SIZE)
    add_us, remove_us = add_remove_us(index, rng.sample(subs, min(10_000, len(subs))))
    common = {"build_s": round(build_s, 2), "memory_mib": round(memory, 1)}
    common |= {"add_us": round(add_us, 2), "remove_us": round(remove_us, 2)}
    sample = rng.sample(subs, min(args.scan_sample, len(subs)))
    matchers = {cache: build_matcher(subs, cache) for cache in (False, True)}
    settle_heap()  # as the broker does after loading many subscriptions
    for dist in ("uniform", "zipf"):
        stream = 2 * args.publications + args.latency_sample
        pubs = make_publications(nrng, topics, stream, dist == "zipf")
        baseline = scan_baseline(sample, pubs[:200], args.subscriptions)
        hits = sum(len(index.match_slots(t)) for t in pubs[:2000]) / min(2000, len(pubs))
        base = workload | {"distribution": dist, "matches_per_publication": round(hits, 1)}
        base |= {"baseline": "naive scan (semantics.topic_matches per filter), extrapolated"}
        base["baseline_publications_per_s"] = round(baseline, 2)
        uncached: dict[str, float] = {}
        for cache in (False, True):
            index.resize_cache(DEFAULT_CACHE_SIZE if cache else 0)
            for api, match in index_apis(index).items():
                row = {"bench": "topics", "api": api, "cache": cache} | base | common
                row |= measure(match, pubs, args.publications)
                yield with_ratios(row, baseline, uncached)
        # Matcher.match is slower (it groups ids by subscriber): a shorter stream.
        count, tail = args.publications // 5, args.latency_sample // 5
        for cache, matcher in matchers.items():
            row = {"bench": "topics", "api": "Matcher.match", "cache": cache} | base
            row |= measure(matcher, pubs[: 2 * count + tail], count) | {"publications": count}
            yield with_ratios(row, baseline, uncached)


def with_ratios(row: dict[str, Any], baseline: float, uncached: dict[str, float]) -> dict[str, Any]:
    rate = row["publications_per_s"]
    row["ratio_vs_scan"] = round(rate / baseline, 1)
    if not row["cache"]:
        uncached[row["api"]] = rate
    elif row["api"] in uncached:
        row["ratio_vs_no_cache"] = round(rate / uncached[row["api"]], 2)
    return row


def build_matcher(subs: Sequence[tuple[str, str]], cache: bool) -> Callable[[str], object]:
    """`Matcher.match` on the same workload: ids grouped by subscriber (10 subscriptions each)."""
    matcher = Matcher() if cache else Matcher(topic_cache_size=0, answer_cache_matches=0)
    owners = max(1, len(subs) // 10)
    for i, (sid, topic_filter) in enumerate(subs):
        matcher.add_topic(sid, f"subscriber{i % owners}", (topic_filter,))

    def match(topic: str) -> object:
        return matcher.match(Event(topics=(topic,)))

    return match


def parse(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--subscriptions", type=int, default=1_000_000)
    parser.add_argument("--topics", type=int, default=100_000)
    parser.add_argument("--pattern-share", type=float, default=0.1)
    parser.add_argument("--publications", type=int, default=200_000)
    parser.add_argument("--latency-sample", type=int, default=50_000)
    parser.add_argument("--scan-sample", type=int, default=2_000)
    parser.add_argument("--note", default="", help="free text for the header line")
    parser.add_argument("--quick", action="store_true", help="10^5 subscriptions, 10^4 topics")
    args = parser.parse_args(argv)
    if args.quick:
        args.subscriptions, args.topics = 100_000, 10_000
        args.publications, args.latency_sample = 50_000, 20_000
    return args


def main(argv: Sequence[str] | None = None) -> None:
    args = parse(argv)
    header = {"bench": "topics", "header": True, "machine": machine(), "note": args.note}
    header["started_at"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    print(json.dumps(header), flush=True)
    for row in run(args):
        print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
