"""Elastic matching (E-SilboPS): notification throughput per deployment shape against the
single-process Matcher measured in the same run, with speedup S(n), efficiency E(n) = S(n)/n
and the Karp-Flatt metric e = (1/S - 1/n) / (1 - 1/n), n = matchers.

`python benchmarks/elastic.py [--quick] [--loads N ...] [--shapes 1-M-E ...] [--processes]`;
JSON lines out. By default every operator runs in this one process (asyncio tasks, one GIL),
so the shapes measure the protocol's overhead, not the parallel speedup the paper's separate
machines give; `--processes` runs the matchers as `tidings matcher` processes (the access
point and exit points stay here), so the two cores are used. On this 2-core machine the point
is the shape of the curves and the overhead. `--fig13 [--quick] [--in-process] [--png PATH]
[--trace DIR]`: the scaling timeline (benchmarks/elastic_timeline.py), matchers in processes
unless `--in-process`; `--trace` times the operators' steps (benchmarks/elastic_trace.py) and
prints each scale's. `tidings pipeline report DIR` recomputes S, E and Karp-Flatt from these
lines with Spark. Needs Debian's zookeeper (started here).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import random
import sys
import time
from collections.abc import Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from common import emit, machine, versions
from elastic_remote import matcher_processes, move_to

from tidings import heap
from tidings.elastic.coordination.zookeeper import local_zookeeper
from tidings.elastic.hosting.deployment import Deployment
from tidings.matching.engine import Event, Matcher
from tidings.model import Op, Predicate, Publication, Subscription
from tidings.store.base import Fanout, encode_body

SHAPES = [(1, 1), (2, 1), (2, 2), (3, 1)]
CORES: dict[str, float] = {}  # of the last timed run


class CountingSink:
    def __init__(self) -> None:
        self.delivered = 0

    async def deliver(self, fanouts: Sequence[Fanout], fresh: bool = True) -> None:
        self.delivered += sum(len(f.owners) for f in fanouts)


def workload(subs: int, pubs: int, seed: int = 7) -> tuple[list[Subscription], list[Publication]]:
    """Content subscriptions `x` in a random interval of width 20 of 0..10000, one subscriber
    each of 1,000; publications with a random x (about 0.2% of subscriptions match each)."""
    rng = random.Random(seed)
    subscriptions = []
    for i in range(subs):
        low = rng.randrange(0, 10_000)
        predicates = (Predicate("x", Op.GE, low), Predicate("x", Op.LT, low + 20))
        subscriptions.append(Subscription(f"s{i}", f"u{i % 1000}", "content", (), predicates))
    publications = [
        Publication(f"p{i}", 0.0, {"i": i}, (), {"x": rng.randrange(0, 10_000)})
        for i in range(pubs)
    ]
    return subscriptions, publications


def baseline(subscriptions: list[Subscription], pubs: list[Publication], batch: int) -> float:
    matcher = Matcher()
    matcher.add_contents((s.id, s.subscriber_id, s.predicates) for s in subscriptions)
    matcher.wait()
    matcher.match_batch([Event(p.topics, p.attributes) for p in pubs[:batch]])  # warm (JIT)
    started = time.perf_counter()
    for i in range(0, len(pubs), batch):
        chunk = pubs[i : i + batch]
        for pub, matches in zip(
            chunk, matcher.match_batch([Event(p.topics, p.attributes) for p in chunk]), strict=True
        ):
            # what the broker does with a publication's answer (`Broker._fanout`)
            Fanout(pub.id, pub.id, encode_body(pub.to_wire()), 0.0, matches)
    return len(pubs) / (time.perf_counter() - started)


async def elastic(
    zk: str,
    shape: tuple[int, int],
    subscriptions: list[Subscription],
    pubs: list[Publication],
    batch: int,
) -> float:
    sink = CountingSink()
    async with Deployment(zk, lambda: sink, matchers=shape[0], exit_points=shape[1]) as d:
        return await timed(d, subscriptions, pubs, batch)


async def timed(
    d: Deployment, subscriptions: list[Subscription], pubs: list[Publication], batch: int
) -> float:
    """Publications/s through `d` once it holds `subscriptions`."""
    for sub in subscriptions:
        d.subscribe(sub)
    await d.publish(pubs[:batch])  # warm: every subscription is in place after this
    # as the broker does after loading: the subscriptions held here out of the collector's
    # sight (at 10^6, each full collection would walk them: about a second)
    heap.settle_heap()
    from elastic_timeline import cpu_seconds

    machine, _ = cpu_seconds()
    own = time.process_time()
    started = time.perf_counter()
    for i in range(0, len(pubs), batch):
        await d.publish(pubs[i : i + batch])
    wall = time.perf_counter() - started
    # cores busy meanwhile: this process (the access point and exit points), the machine
    CORES["this_process"] = round((time.process_time() - own) / wall, 2)
    CORES["machine"] = round((cpu_seconds()[0] - machine) / wall, 2)
    return len(pubs) / wall


async def elastic_processes(
    zk: str,
    shape: tuple[int, int],
    subscriptions: list[Subscription],
    pubs: list[Publication],
    batch: int,
) -> float:
    """As `elastic`, with the matchers in processes of their own (`tidings matcher`), the
    access point and exit points in this one: the two cores are used."""
    sink = CountingSink()
    async with Deployment(zk, lambda: sink, matchers=1, exit_points=shape[1], transport="tcp") as d:
        with matcher_processes(zk, d.cluster, shape[0]) as ids:
            await move_to(d, ids)  # the remote matchers alone match
            return await timed(d, subscriptions, pubs, batch)


def load_average() -> list[float]:
    """The 1, 5 and 15 minute load averages (other work on this 2-core machine shows here)."""
    return [round(x, 2) for x in os.getloadavg()]


def parse_shape(text: str) -> tuple[int, int]:
    """`1-2-1` (access points - matchers - exit points; one access point) -> (2, 1)."""
    parts = text.split("-")
    if len(parts) != 3 or parts[0] != "1" or not all(p.isdigit() and int(p) > 0 for p in parts):
        raise argparse.ArgumentTypeError(f"{text!r}: expected 1-M-E, e.g. 1-2-1")
    return int(parts[1]), int(parts[2])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--fig13", action="store_true", help="the scaling timeline (figure 13)")
    parser.add_argument("--pub-rate", type=float, default=None)
    parser.add_argument(
        "--in-process",
        action="store_true",
        help="--fig13 with every operator in this process (default: matchers in processes)",
    )
    parser.add_argument(
        "--png",
        type=Path,
        default=None,
        help="--fig13: where the timeline goes (default: the temporary directory)",
    )
    parser.add_argument(
        "--trace",
        type=Path,
        default=None,
        help="--fig13: time the operators' steps into this directory, print each scale's",
    )
    parser.add_argument(
        "--scaler-here",
        action="store_true",
        help="--fig13: scale from this process's loop (default: a scaler process of its own)",
    )
    parser.add_argument("--loads", type=int, nargs="*", help="subscription counts to run")
    parser.add_argument(
        "--shapes",
        type=parse_shape,
        nargs="*",
        help="deployment shapes 1-M-E (default: 1-1-1 1-2-1 1-2-2 1-3-1)",
    )
    parser.add_argument(
        "--processes", action="store_true", help="matchers in processes of their own"
    )
    args = parser.parse_args()
    if args.fig13:
        fig13(
            args.quick, args.pub_rate, not args.in_process, args.png, args.trace, args.scaler_here
        )
        return
    loads = args.loads or ([1_000, 10_000] if args.quick else [10_000, 100_000, 1_000_000])
    shapes = args.shapes or SHAPES
    if (1, 1) not in shapes:
        shapes = [(1, 1), *shapes]  # S(n) is against 1-1-1
    pubs_n, batch = (1_000, 100) if args.quick else (5_000, 100)
    placed = "processes" if args.processes else "this process"
    emit(
        {
            "benchmark": "elastic",
            "machine": machine(),
            "versions": versions("pyzmq", "kazoo", "msgspec"),
            "load_average": load_average(),
            "note": "matchers in processes of their own, access point and exit points in one"
            if args.processes
            else "all operators in one process: overhead and shape, not parallel speedup",
        }
    )
    with local_zookeeper() as zk:
        for load in loads:
            began = time.monotonic()
            subscriptions, pubs = workload(load, pubs_n)
            base = baseline(subscriptions, pubs, batch)
            emit(
                {
                    "workload": {"subscriptions": load, "publications": pubs_n, "batch": batch},
                    "shape": "single Matcher",
                    "throughput_per_s": round(base, 1),
                    "load_average": load_average(),
                    "elapsed_s": round(time.monotonic() - began, 1),
                }
            )
            one = None
            for shape in shapes:
                began = time.monotonic()
                run = elastic_processes if args.processes else elastic
                rate = asyncio.run(run(zk, shape, subscriptions, pubs, batch))
                one = rate if shape == (1, 1) else one
                n = shape[0]
                s = rate / one if one else 1.0
                e = s / n
                karp = (1 / s - 1 / n) / (1 - 1 / n) if n > 1 else None
                emit(
                    {
                        "workload": {"subscriptions": load, "publications": pubs_n, "batch": batch},
                        "shape": f"1-{shape[0]}-{shape[1]}",
                        "matchers_in": placed,
                        "throughput_per_s": round(rate, 1),
                        "vs_single_matcher": round(rate / base, 3),
                        "speedup": round(s, 3),
                        "efficiency": round(e, 3),
                        "karp_flatt": None if karp is None else round(karp, 3),
                        "cores_busy": dict(CORES),
                        "load_average": load_average(),
                        "elapsed_s": round(time.monotonic() - began, 1),
                    }
                )


def fig13(
    quick: bool,
    pub_rate: float | None,
    processes: bool,
    png: Path | None,
    trace: Path | None,
    scaler_here: bool = False,
) -> None:
    from elastic_timeline import Run, audit, expected_deliveries, plot, spans, throughput, timeline

    run = Run(
        subscriptions=10_000 if quick else 100_000,
        pub_rate=pub_rate or (1_000.0 if quick else 2_000.0),
        sub_rate=1_000.0,
        steady_s=2.0 if quick else 3.0,
    )
    preload, _ = workload(run.subscriptions, 0)
    xs = [random.Random(11).randrange(0, 10_000) for _ in range(4096)]
    emit(
        {
            "benchmark": "elastic-fig13",
            "machine": machine(),
            "versions": versions("pyzmq", "kazoo", "msgspec"),
            "run": run.__dict__,
            "matchers_in": "processes" if processes else "this process",
            "scaler_in": "a process of its own"
            if processes and not scaler_here
            else "this process",
            "load_average": load_average(),
        }
    )
    with local_zookeeper() as zk:
        try:
            out = asyncio.run(timeline(zk, run, preload, xs, processes, trace, not scaler_here))
        except RuntimeError as exc:  # it fell behind, or a scale did not end `done`
            emit({"run_stopped": str(exc), "load_average": load_average()})
            raise SystemExit(1) from exc
    sink, t0, sent, windows = out["sink"], out["t0"], out["sent"], out["windows"]
    emit(
        {
            "preload_s": round(out["preload_s"], 2),
            "load_average": load_average(),
            "cpu_during_timeline": out["cpu"],  # others_s: other work on the machine meanwhile
            "backlog_max": max((n for _, n in out["backlog"]), default=0),
        }
    )
    gc.disable()  # the checks below hold millions of objects; nothing is timed any more
    expected = expected_deliveries(preload, xs, out["published"])
    end = max(sink.times, default=t0) - t0 + 1.0
    phases = spans(windows, end)
    for (name, lo, hi), found in zip(phases, audit(sink, expected, sent, phases, t0), strict=True):
        emit({"phase": name, "from_s": round(lo, 3), "duration_s": round(hi - lo, 3), **found})
    for w in windows:
        emit({"scale": w["scale"], "window_s": round(w["to_s"] - w["from_s"], 3), **w["report"]})
    if trace is not None:
        import elastic_trace

        elastic_trace.write(trace)
        for scale in elastic_trace.breakdown(trace, windows, t0):
            emit({"trace": str(trace), **scale})
    (overall,) = audit(sink, expected, sent, [("all", 0.0, end)], t0)
    emit(
        {
            "published": out["published"],
            "delivered": sink.delivered(),
            "expected_preloaded": len(expected),
            **{f"overall_{k}": v for k, v in overall.items()},
            "png": str(
                plot(
                    throughput(sink, t0),
                    windows,
                    run,
                    png,
                    out["backlog"],
                    ", matchers in processes" if processes else ", one process",
                )
            ),
        }
    )


if __name__ == "__main__":
    main()
