"""The paper's figure-13 run (E-SilboPS, section 6): subscriptions preloaded, publications
and new subscriptions at constant rates, the matchers scaled 1 -> 3 then 3 -> 1 while they
flow; delivered notifications per 100 ms as a PNG timeline with the scaling phases shaded,
and per phase: its duration, lost / duplicated / out-of-order deliveries, the longest pause
between notifications. `python benchmarks/elastic.py --fig13 [--quick]`.

Loss is checked against the single `Matcher` over the preloaded subscriptions (their
subscribers receive nothing else); duplicates and order for every subscriber (publications
are numbered, one publisher). All operators run in this one process.
"""

from __future__ import annotations

import asyncio
import datetime
import itertools
import time
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tidings.elastic.deployment import Deployment
from tidings.matching.engine import Event, Matcher
from tidings.model import Op, Predicate, Publication, Subscription
from tidings.store.base import NewMessage

RESULTS = Path(__file__).resolve().parent / "results"
BUCKET_S = 0.1


@dataclass
class TimedSink:
    """Every delivery with the time its commit was made."""

    batches: list[tuple[float, list[tuple[str, int]]]] = field(default_factory=list)

    async def deliver(self, messages: Sequence[NewMessage]) -> None:
        if messages:
            now = time.monotonic()
            self.batches.append(
                (now, [(m.subscriber_id, int(m.publication_id[1:])) for m in messages])
            )


@dataclass
class Run:
    subscriptions: int
    pub_rate: float
    sub_rate: float
    steady_s: float


def _publication(n: int, x: int) -> Publication:
    return Publication(f"p{n}", 0.0, {"n": n}, (), {"x": x})


async def _paced(rate: float, stop: asyncio.Event, each: Any) -> int:
    """Call `each(i)` `rate` times a second (in 10 ms ticks) until `stop`; how many."""
    done, started, tick = 0, time.monotonic(), 0.01
    while not stop.is_set():
        due = int((time.monotonic() - started) * rate)
        while done < due:
            each(done)
            done += 1
        await asyncio.sleep(tick)
    return done


async def timeline(zk: str, run: Run, preload: list[Subscription], xs: list[int]) -> dict[str, Any]:
    sink = TimedSink()
    async with Deployment(zk, lambda: sink, matchers=1, exit_points=1) as d:
        for sub in preload:
            d.subscribe(sub)
        await d.publish([_publication(-1, 0)])  # every preloaded subscription is in place
        sink.batches.clear()
        stop = asyncio.Event()
        futures: list[asyncio.Future[int]] = []

        sent: list[float] = []  # publication n's time, from t0

        def publish(n: int) -> None:
            sent.append(time.monotonic() - t0)
            futures.append(d.ap.publish_nowait(_publication(n, xs[n % len(xs)])))

        def subscribe(k: int) -> None:
            low = (k * 37) % 10_000
            predicates = (Predicate("x", Op.GE, low), Predicate("x", Op.LT, low + 20))
            d.subscribe(Subscription(f"c{k}", f"churn{k % 100}", "content", (), predicates))

        t0 = time.monotonic()
        pubs = asyncio.create_task(_paced(run.pub_rate, stop, publish))
        subs = asyncio.create_task(_paced(run.sub_rate, stop, subscribe))
        windows: list[dict[str, Any]] = []
        await asyncio.sleep(run.steady_s)  # the steady state before, between and after
        for target in (3, 1):
            began = time.monotonic()
            (report,) = await d.scale(matchers=target)
            windows.append(
                {
                    "scale": f"{1 if target == 3 else 3} -> {target}",
                    "from_s": began - t0,
                    "to_s": time.monotonic() - t0,
                    "report": report.to_json(),
                }
            )
            await asyncio.sleep(run.steady_s)
        stop.set()
        published = await pubs
        await subs
        await asyncio.gather(*futures)
    return {"t0": t0, "published": published, "windows": windows, "sink": sink, "sent": sent}


def expected_deliveries(preload: list[Subscription], xs: list[int], n: int) -> set[tuple[str, int]]:
    matcher = Matcher()
    matcher.add_contents((s.id, s.subscriber_id, s.predicates) for s in preload)
    matcher.wait()
    out: set[tuple[str, int]] = set()
    events = [Event((), {"x": xs[i % len(xs)]}) for i in range(n)]
    for start in range(0, n, 500):
        for i, matches in enumerate(matcher.match_batch(events[start : start + 500]), start):
            out.update((subscriber, i) for subscriber in matches)
    return out


def audit(
    sink: TimedSink, expected: set[tuple[str, int]], lo: float, hi: float, t0: float
) -> dict[str, Any]:
    """Lost / duplicated / out of order among the deliveries of publications committed in
    [lo, hi) (seconds from t0), and the longest pause between commits in that span."""
    seen: set[tuple[str, int]] = set()
    last: dict[str, int] = {}
    duplicated = out_of_order = 0
    times: list[float] = []
    for at, items in sink.batches:
        inside = lo <= at - t0 < hi
        if inside:
            times.append(at - t0)
        for key in items:
            subscriber, n = key
            if inside and key in seen:
                duplicated += 1
            if inside and last.get(subscriber, -1) > n:
                out_of_order += 1
            seen.add(key)
            last[subscriber] = max(last.get(subscriber, -1), n)
    gaps = [b - a for a, b in itertools.pairwise(times)]
    return {
        "duplicated": duplicated,
        "out_of_order": out_of_order,
        "longest_pause_ms": round(1000 * max(gaps, default=0.0), 1),
    }


def throughput(sink: TimedSink, t0: float) -> list[tuple[float, int]]:
    buckets: dict[int, int] = defaultdict(int)
    for at, items in sink.batches:
        buckets[int((at - t0) / BUCKET_S)] += len(items)
    last = max(buckets, default=0)
    return [(b * BUCKET_S, buckets.get(b, 0)) for b in range(last + 1)]


def plot(series: list[tuple[float, int]], windows: list[dict[str, Any]], run: Run) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(10, 4))
    ax.plot([t for t, _ in series], [c / BUCKET_S for _, c in series], lw=1)
    colours = {"start": "#f2c14e", "change": "#f78154"}
    for w in windows:
        at = w["to_s"] - sum(w["report"]["phases_s"].values())
        for phase, seconds in w["report"]["phases_s"].items():
            ax.axvspan(at, at + seconds, color=colours.get(phase, "#cccccc"), alpha=0.5)
            at += seconds
        ax.text(w["from_s"], ax.get_ylim()[1] * 0.95, f"M {w['scale']}", fontsize=8)
    ax.set_xlabel("seconds")
    ax.set_ylabel("notifications delivered / s (100 ms buckets)")
    ax.set_title(
        f"E-SilboPS figure 13: {run.subscriptions:,} subscriptions, "
        f"{run.pub_rate:g} pub/s, {run.sub_rate:g} sub/s (shaded: start, change)"
    )
    RESULTS.mkdir(exist_ok=True)
    path = RESULTS / f"elastic-fig13-{datetime.date.today().isoformat()}.png"
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def spans(windows: list[dict[str, Any]], end: float) -> list[tuple[str, float, float]]:
    """The run cut into phases: steady, scale-out, steady, scale-in, steady."""
    out, at = [], 0.0
    for w in windows:
        out.append(("steady", at, w["from_s"]))
        out.append((f"scale {w['scale']}", w["from_s"], w["to_s"]))
        at = w["to_s"]
    out.append(("steady", at, end))
    return out


def lost(
    sink: TimedSink, expected: set[tuple[str, int]], sent: list[float], lo: float, hi: float
) -> int:
    delivered = {key for _, items in sink.batches for key in items}
    return sum(1 for key in expected if lo <= sent[key[1]] < hi and key not in delivered)
