"""Content matching on the standard workload of issue 4 (REIN/TAMA/H-Tree generator).

    python benchmarks/matching.py [--workload W-A|W-B] [--subscriptions N] [--batch B ...]
                                  [--threads T] [--events E] [--zipf A] [--quick]

Builds a `Matcher` of N content subscriptions, 10 per subscriber (columnar bulk path
`Matcher.add_content_arrays`, into a `ContentIndex`), then times matching E events (after a
warm-up), call by call at batch 1 and per batch at larger sizes (per-event time = batch time
/ B; with --threads T a batch is split over T threads). The
same-run baseline is brute force in numpy: per event, every subscription's low/high arrays
compared at once. A sample of events is checked against it. Insert and delete are timed
through the public `add`/`remove` with `Predicate` objects; the insert figures include waiting
for the background merges they trigger (`insert_cpu_us`: process CPU time, all threads).
Prints JSON lines: a header (machine, versions, workload, note), then one line per batch size.
Three answers are timed, each after its own warm-up:
- `mean_ms`/`p99_ms`: `ContentIndex.match_slots_batch`, the index's answer, which the Matcher
  consumes: the matching subscriptions as integer slots (numpy), as the papers' C++
  implementations answer with integer ids;
- `ids_mean_ms`/`ids_p99_ms`: `ContentIndex.match_batch`, the same answer named as Python
  strings (the difference is the cost of making thousands of strings per event);
- `matcher_mean_ms`/`matcher_p99_ms`: `Matcher.match_batch`, the answer the broker builds
  deliveries from: ids grouped by subscriber, each subscriber's sorted.
(Until 2026-11-24, `mean_ms` timed the ids and `slots_mean_ms` the slots.) After the build the
heap is settled (`tidings.heap.settle_heap`, `gc.freeze`) as the broker settles it after
loading: otherwise full collections walk the million-entry containers every few events.
`or_floor_ms` times the memory traffic alone (d random rows of N bits ORed per event, from an
array larger than the caches): the floor of the bitmap method on this machine during the run;
`over_floor` is the index's time over it.
`cpu_mean_ms` is process CPU time per event (all threads), less sensitive than wall time to
other processes sharing the cores. `memory_mib` counts the index's arrays; `rss_mib` is the
process's peak resident size (workload arrays and a million id strings included).
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict
from typing import Any

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from common import emit, machine, percentile, versions

from tidings.heap import settle_heap
from tidings.matching import owners
from tidings.matching import synthetic as wl
from tidings.matching.content import ContentIndex
from tidings.matching.engine import Event as MatcherEvent
from tidings.matching.engine import Matcher
from tidings.model import Scalar

Event = dict[str, Scalar]


def arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--workload", choices=sorted(wl.NAMED), default="W-A")
    parser.add_argument("--subscriptions", type=int, default=1_000_000)
    parser.add_argument("--batch", type=int, nargs="+", default=[1, 64])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--events", type=int, default=2000)
    parser.add_argument("--zipf", type=float, default=0.0)
    parser.add_argument("--baseline-events", type=int, default=30)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--note", default="")
    parser.add_argument("--quick", action="store_true", help="10^5 subscriptions, 1000 events")
    args = parser.parse_args()
    if args.quick:
        args.subscriptions, args.events = 100_000, 1000
    return args


def owner_of(i: int) -> str:
    """Subscription i's subscriber: 10 subscriptions each."""
    return f"u{i // 10}"


def build(
    w: wl.SyntheticWorkload, attrs: np.ndarray, lows: np.ndarray, threads: int
) -> tuple[Matcher, ContentIndex, list[str], float]:
    ids = [f"s{i}" for i in range(len(attrs))]
    subscribers = [owner_of(i) for i in range(len(attrs))]
    columns = wl.columns_of(w, attrs, lows)
    index = ContentIndex(threads=threads)
    matcher = Matcher(content=index)
    start = time.perf_counter()
    matcher.add_content_arrays(ids, subscribers, columns)
    index.intervals.wait()
    built = time.perf_counter() - start
    settle_heap()  # as the broker does after loading many subscriptions
    return matcher, index, ids, built


def per_event_ms(
    match: Callable[[Sequence[Any]], Any], events: Sequence[Any], b: int
) -> tuple[list[float], float]:
    batches = [events[i : i + b] for i in range(0, len(events) - b + 1, b)]
    match(batches[0])  # warm-up
    times, cpu = [], time.process_time()
    for batch in batches:
        start = time.perf_counter()
        match(batch)
        times.append((time.perf_counter() - start) * 1e3 / len(batch))
    return times, (time.process_time() - cpu) * 1e3 / (len(batches) * b)


def or_floor_ms(attributes: int, subscriptions: int, events: int, seed: int) -> float:
    """The memory traffic the bitmap method cannot avoid, timed alone on this machine now:
    per event, OR one random row of `subscriptions` bits per attribute (32 rows per
    attribute, more than the caches hold). Host memory bandwidth varies here from hour to
    hour, and this shows what it was during the run."""
    words = -(-subscriptions // 64)
    rng = np.random.default_rng(seed)
    rows = rng.integers(0, 2**63, size=(attributes * 32, words), dtype=np.uint64)
    picks = rng.integers(0, 32, size=(events, attributes)) + np.arange(attributes) * 32
    acc = np.zeros(words, np.uint64)
    start = time.perf_counter()
    for pick in picks.tolist():
        acc[:] = 0
        for r in pick:
            np.bitwise_or(acc, rows[r], out=acc)
    return (time.perf_counter() - start) * 1e3 / events


def baseline(
    w: wl.SyntheticWorkload, attrs: np.ndarray, lows: np.ndarray, values: np.ndarray
) -> tuple[float, list[np.ndarray]]:
    start = time.perf_counter()
    answers = [wl.brute_force(w, attrs, lows, v) for v in values]
    return (time.perf_counter() - start) * 1e3 / len(values), answers


def insert_delete_us(
    matcher: Matcher, index: ContentIndex, w: wl.SyntheticWorkload, rng: np.random.Generator
) -> tuple[float, float, float]:
    """(insert wall µs, insert CPU µs, delete wall µs) per subscription through the Matcher
    (the broker's path), merges included."""
    attrs, lows = wl.subscription_arrays(w, 4096, rng)
    items = [(f"new{i}", p) for i, p in enumerate(wl.predicates_of(w, attrs, lows))]
    start, cpu = time.perf_counter(), time.process_time()
    for sid, preds in items:
        matcher.add_content(sid, "newcomer", preds)
    index.intervals.wait()
    added, added_cpu = time.perf_counter() - start, time.process_time() - cpu
    start = time.perf_counter()
    for sid, _ in items:
        matcher.remove(sid)
    removed = time.perf_counter() - start
    return added * 1e6 / len(items), added_cpu * 1e6 / len(items), removed * 1e6 / len(items)


def main() -> None:
    args = arguments()
    w = wl.named(args.workload, zipf=args.zipf)
    rng = np.random.default_rng(args.seed)
    attrs, lows = wl.subscription_arrays(w, args.subscriptions, rng)
    values = wl.event_arrays(w, args.events, rng)
    events = wl.events_of(w, values)
    load = os.getloadavg()[0]
    emit({"bench": "matching", "header": True, "machine": machine(),
          "versions": versions("numpy", "numba"), "workload": asdict(w), "load_average": load,
          "note": args.note, "command": " ".join(sys.argv)})  # fmt: skip
    matcher, index, ids, build_s = build(w, attrs, lows, args.threads)
    sample = values[: args.baseline_events]
    base_ms, truth = baseline(w, attrs, lows, sample)
    grouped = [MatcherEvent(attributes=e) for e in events]
    expected = [sorted(ids[i] for i in t) for t in truth]
    named = index.match_batch(events[: len(sample)])
    by_owner = [owners.grouped([owner_of(i) for i in t], [ids[i] for i in t]) for t in truth]
    correct = [sorted(g) for g in named] == expected and (
        matcher.match_batch(grouped[: len(sample)]) == by_owner
    )
    insert_us, insert_cpu_us, delete_us = insert_delete_us(matcher, index, w, rng)
    floor_ms = or_floor_ms(w.attributes, args.subscriptions, 500, args.seed)
    for b in args.batch:
        times, cpu_ms = per_event_ms(index.match_slots_batch, events, b)
        mean = sum(times) / len(times)
        id_times, _ = per_event_ms(index.match_batch, events, b)
        matcher_times, _ = per_event_ms(matcher.match_batch, grouped, b)
        emit({"bench": "matching", "workload": w.name, "zipf": w.zipf,
              "subscriptions": args.subscriptions, "batch": b, "threads": args.threads,
              "events": len(times) * b, "mean_ms": round(mean, 4),
              "p99_ms": round(percentile(times, 99), 4), "cpu_mean_ms": round(cpu_ms, 4),
              "baseline_mean_ms": round(base_ms, 3),
              "ratio": round(base_ms / mean, 1),
              "ids_mean_ms": round(sum(id_times) / len(id_times), 4),
              "ids_p99_ms": round(percentile(id_times, 99), 4),
              "matcher_mean_ms": round(sum(matcher_times) / len(matcher_times), 4),
              "matcher_p99_ms": round(percentile(matcher_times, 99), 4),
              "or_floor_ms": round(floor_ms, 4),
              "over_floor": round(mean / floor_ms, 2),
              "memory_mib": round(index.intervals.memory_bytes() / 2**20, 1),
              "rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
              "build_s": round(build_s, 2), "insert_us": round(insert_us, 1),
              "insert_cpu_us": round(insert_cpu_us, 1),
              "delete_us": round(delete_us, 1),
              "matches_per_event": round(sum(len(t) for t in truth) / len(truth), 1),
              "correct_on_sample": correct, "load_average_end": os.getloadavg()[0]})  # fmt: skip


if __name__ == "__main__":
    main()
