"""A category and a range: content subscriptions mixing text equality and a numeric range.

    python benchmarks/content_mixed.py [--subscriptions N] [--events E] [--quick]

Each subscription is `kI = "cJ"` (one of 3 keys, one of 50 values) and `lo <= x < lo + 2`
(x in [0, 100)); each event carries all three keys and x, so about N / 2,500 subscriptions
match. `ContentIndex` keeps these in the interval index (text values by code); the same-run
baseline is `CountingIndex`, where such subscriptions went before text equality joined the
interval index (`ratio` = baseline time / index time). Prints JSON lines: a header (machine,
versions, workload), then one result line.
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import time
from typing import Any

sys.path.insert(0, os.path.dirname(__file__))
from common import emit, machine, versions

from tidings.matching.content import ContentIndex, CountingIndex
from tidings.model import Op, Predicate

KEYS = ("k0", "k1", "k2")


def subscriptions(rng: random.Random, n: int) -> list[tuple[str, list[Predicate]]]:
    out = []
    for i in range(n):
        lo = rng.randrange(0, 98)
        colour = Predicate(rng.choice(KEYS), Op.EQ, f"c{rng.randrange(50)}")
        out.append((f"s{i}", [colour, Predicate("x", Op.GE, lo), Predicate("x", Op.LT, lo + 2)]))
    return out


def events(rng: random.Random, n: int) -> list[dict[str, Any]]:
    return [
        {**{k: f"c{rng.randrange(50)}" for k in KEYS}, "x": rng.random() * 100} for _ in range(n)
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--subscriptions", type=int, default=1_000_000)
    parser.add_argument("--events", type=int, default=2000)
    parser.add_argument("--baseline-events", type=int, default=200)
    parser.add_argument("--quick", action="store_true", help="10^5 subscriptions")
    args = parser.parse_args()
    n = 100_000 if args.quick else args.subscriptions
    rng = random.Random(1)
    subs, evs = subscriptions(rng, n), events(rng, args.events)
    emit({"bench": "content_mixed", "header": True, "machine": machine(),
          "versions": versions("numpy"), "load_average": os.getloadavg()[0],
          "command": " ".join(sys.argv)})  # fmt: skip
    index, start = ContentIndex(), time.perf_counter()
    index.add_many(subs)
    index.intervals.wait()
    build_s = time.perf_counter() - start
    counting = CountingIndex()
    for sid, preds in subs:
        counting.add(sid, preds)
    index.match_batch(evs[:64])  # warm-up
    start = time.perf_counter()
    answers = index.match_batch(evs)
    index_ms = (time.perf_counter() - start) * 1e3 / len(evs)
    sample = evs[: args.baseline_events]
    start = time.perf_counter()
    truth = [counting.match(e) for e in sample]
    base_ms = (time.perf_counter() - start) * 1e3 / len(sample)
    same = all(sorted(a) == sorted(t) for a, t in zip(answers, truth, strict=False))
    emit({"bench": "content_mixed", "subscriptions": n, "events": len(evs), "batch": 64,
          "in_interval_index": len(index.intervals), "mean_ms": round(index_ms, 4),
          "baseline": "CountingIndex", "baseline_mean_ms": round(base_ms, 3),
          "ratio": round(base_ms / index_ms, 1), "build_s": round(build_s, 2),
          "matches_per_event": round(sum(map(len, answers)) / len(answers), 1),
          "correct_on_sample": same, "load_average_end": os.getloadavg()[0]})  # fmt: skip


if __name__ == "__main__":
    main()
