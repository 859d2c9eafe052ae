"""The Matcher's content answer grouped by subscriber, against the path it replaced.

    python benchmarks/matcher_grouping.py [--workload W-A|W-B] [--subscriptions N]
                                          [--events E] [--batch B ...] [--repeat R]

Loads N standard-workload subscriptions (issue 4), 10 per subscriber, into a `Matcher`
(`add_content_arrays`) and settles the heap as the broker does after loading. Then, in the
same process and alternating R times, it times per event:
- `now_ms`: `Matcher.match_batch`, which takes the index's slots and finds subscribers through
  an array of owner codes (`tidings.matching.owners`);
- `baseline_ms`: the path it replaced, timed on the same index: the answer named as ids
  (`ContentIndex.match_batch`), each id's subscriber looked up in a dict of all N ids, and
  the ids grouped by subscriber.
Both answers are checked equal first. Prints JSON lines: a header (machine, versions,
workload), then one line per (repetition, batch) with `ratio` = baseline_ms / now_ms.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict
from operator import itemgetter
from typing import Any

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from common import emit, machine, versions

from tidings.heap import settle_heap
from tidings.matching import synthetic as wl
from tidings.matching.content import ContentIndex
from tidings.matching.engine import Event, Matcher, Matches
from tidings.matching.owners import grouped


def arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--workload", choices=sorted(wl.NAMED), default="W-B")
    parser.add_argument("--subscriptions", type=int, default=1_000_000)
    parser.add_argument("--events", type=int, default=640)
    parser.add_argument("--batch", type=int, nargs="+", default=[1, 64])
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--seed", type=int, default=1)
    return parser.parse_args()


def per_event_ms(match: Callable[[Sequence[Event]], Any], events: list[Event], b: int) -> float:
    start = time.perf_counter()
    for i in range(0, len(events) - b + 1, b):
        match(events[i : i + b])
    return (time.perf_counter() - start) * 1e3 / (len(events) // b * b)


def main() -> None:
    args = arguments()
    w = wl.named(args.workload)
    rng = np.random.default_rng(args.seed)
    attrs, lows = wl.subscription_arrays(w, args.subscriptions, rng)
    events = [Event(attributes=e) for e in wl.events_of(w, wl.event_arrays(w, args.events, rng))]
    ids = [f"s{i}" for i in range(args.subscriptions)]
    owners = [f"u{i // 10}" for i in range(args.subscriptions)]
    index = ContentIndex()
    matcher = Matcher(content=index)
    matcher.add_content_arrays(ids, owners, wl.columns_of(w, attrs, lows))
    index.intervals.wait()
    owner_of = dict(zip(ids, owners, strict=True))
    del ids, owners
    settle_heap()

    def owners_of(found: list[str]) -> Sequence[str]:
        return itemgetter(*found)(owner_of) if len(found) > 1 else [owner_of[i] for i in found]  # type: ignore[no-any-return]

    def baseline(batch: Sequence[Event]) -> list[Matches]:
        named = index.match_batch([e.attributes or {} for e in batch])
        return [grouped(owners_of(found), found) for found in named]

    assert baseline(events[:64]) == matcher.match_batch(events[:64])
    emit({"bench": "matcher_grouping", "header": True, "machine": machine(),
          "versions": versions("numpy", "numba"), "workload": asdict(w),
          "command": " ".join(sys.argv)})  # fmt: skip
    for repetition in range(args.repeat):
        for b in args.batch:
            base_ms = per_event_ms(baseline, events, b)
            now_ms = per_event_ms(matcher.match_batch, events, b)
            emit({"bench": "matcher_grouping", "workload": w.name,
                  "subscriptions": args.subscriptions, "subscribers": args.subscriptions // 10,
                  "batch": b, "repetition": repetition, "events": args.events,
                  "now_ms": round(now_ms, 4), "baseline_ms": round(base_ms, 4),
                  "ratio": round(base_ms / now_ms, 2)})  # fmt: skip


if __name__ == "__main__":
    main()
