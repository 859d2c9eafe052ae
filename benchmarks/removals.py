"""Removing content subscriptions that share a bucket, newest first (issue #28).

    python benchmarks/removals.py [--subscriptions 40000]

One `CountingIndex` (the content index's counting side) holds `--subscriptions`
subscriptions with the same single predicate (`=`, `exists: false`, `>`: each its own
bucket kind); they are removed newest first (a subscriber unsubscribing the last it made
first, or unregistering), then, in a fresh index, oldest first. A bucket kept as a list made
each newest-first removal a scan of the whole bucket: 40,000 took 5-14 s on the event loop,
against 0.1 s oldest first. `ratio` = newest-first time over oldest-first time, same run:
about 1 when a removal costs the same wherever its slot is.

- `unregister-topics`: a `TopicIndex` of `--subscriptions` subscriptions on one filter (`a/b`,
  and again on `a/#`), of which one subscriber's `--owned` (1,000, the most it may hold) are
  removed at once, as unregistering does: one by one (each scans the bucket) against
  `remove_many` (each bucket rewritten once); `ratio` = one by one over at once.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Iterable

from common import emit, machine, versions

from tidings.matching.content import CountingIndex
from tidings.matching.topics import TopicIndex
from tidings.model import Op, Predicate

PREDICATES = {
    "eq": Predicate("k", Op.EQ, "x"),
    "absent": Predicate("k", Op.EXISTS, False),
    "gt": Predicate("k", Op.GT, 5),
}


def removal_s(predicate: Predicate, n: int, order: Iterable[int]) -> float:
    index = CountingIndex()
    for i in range(n):
        index.add(f"s{i}", (predicate,))
    started = time.perf_counter()
    for i in order:
        index.remove(f"s{i}")
    return time.perf_counter() - started


def unregister_s(topic_filter: str, n: int, owned: int, at_once: bool) -> float:
    index = TopicIndex()
    for i in range(n):
        index.add(f"s{i}", (topic_filter,))
    mine = [f"s{i}" for i in range(n - owned, n)]
    started = time.perf_counter()
    if at_once:
        index.remove_many(mine)
    else:
        for sid in mine:
            index.remove(sid)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--subscriptions", type=int, default=40_000)
    parser.add_argument("--owned", type=int, default=1_000)
    args = parser.parse_args()
    n = args.subscriptions
    emit({"bench": "removals", "header": True, "machine": machine(), "versions": versions(),
          "command": " ".join(sys.argv), "workload": {"subscriptions": n}})  # fmt: skip
    for name, predicate in PREDICATES.items():
        newest = removal_s(predicate, n, reversed(range(n)))
        oldest = removal_s(predicate, n, range(n))
        emit({"bench": "removals", "case": name, "newest_first_s": round(newest, 3),
              "oldest_first_s": round(oldest, 3), "ratio": round(newest / oldest, 2)})  # fmt: skip
    for topic_filter in ("a/b", "a/#"):
        one_by_one = unregister_s(topic_filter, n, args.owned, at_once=False)
        at_once = unregister_s(topic_filter, n, args.owned, at_once=True)
        emit({"bench": "removals", "case": "unregister-topics", "filter": topic_filter,
              "owned": args.owned, "one_by_one_s": round(one_by_one, 3),
              "at_once_s": round(at_once, 3), "ratio": round(one_by_one / at_once, 1)})  # fmt: skip


if __name__ == "__main__":
    main()
