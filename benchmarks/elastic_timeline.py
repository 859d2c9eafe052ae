"""The paper's figure-13 run (E-SilboPS, section 6): subscriptions preloaded, publications
and new subscriptions at constant rates, the matchers scaled 1 -> 3 then 3 -> 1 while they
flow; delivered notifications per 100 ms as a PNG timeline with the scaling phases shaded,
and per phase: its duration, lost / duplicated / out-of-order deliveries, the longest pause
between notifications. `python benchmarks/elastic.py --fig13 [--quick]`.

Loss is checked against the single `Matcher` over the preloaded subscriptions (their
subscribers receive nothing else); duplicates and order for every subscriber (publications
are numbered, one publisher). The matchers run as `tidings matcher` processes (all three
started and joined before the timeline: the spares wait unassigned), the access point, the
exit point, the publisher and the sink in this one; `--in-process`: all in this one. The
preload is not in the timeline (t0 is after it).
"""

from __future__ import annotations

import array
import asyncio
import bisect
import datetime
import itertools
import os
import tempfile
import time
from collections import defaultdict
from collections.abc import Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from elastic_remote import ScalerProcess, matcher_processes, move_to

from tidings import heap
from tidings.elastic.hosting.deployment import Deployment
from tidings.matching.engine import Event, Matcher
from tidings.model import Op, Predicate, Publication, Subscription
from tidings.store.base import Fanout

BUCKET_S = 0.1


@dataclass
class TimedSink:
    """Every delivery with the time its commit was made: per commit its time, and its
    publications each with their subscribers, joined into one string (an object per commit
    that the garbage collector does not walk, not one per delivery). A tuple per delivery,
    millions in a full run, had this process spend most of its time in the collector's full
    passes (100-700 ms each, dozens of them), which the timeline then showed as pauses of
    the deployment."""

    times: array.array[float] = field(default_factory=lambda: array.array("d"))
    commits: list[str] = field(default_factory=list)  # "pub\tsub\tsub...\npub\t..."
    counts: array.array[int] = field(default_factory=lambda: array.array("l"))

    async def deliver(self, fanouts: Sequence[Fanout], fresh: bool = True) -> None:
        if fanouts:
            self.times.append(time.monotonic())
            self.commits.append(
                "\n".join(["\t".join([f.publication_id, *f.owners]) for f in fanouts])
            )
            self.counts.append(sum(len(f.owners) for f in fanouts))

    def clear(self) -> None:
        del self.times[:], self.counts[:]
        self.commits.clear()

    def delivered(self) -> int:
        return sum(self.counts)

    def batches(self) -> Iterator[tuple[float, list[tuple[str, int]]]]:
        """Per commit, its time and its deliveries (subscriber, publication number)."""
        for at, commit in zip(self.times, self.commits, strict=True):
            items = []
            for line in commit.split("\n"):
                publication, *subscribers = line.split("\t")
                n = int(publication[1:])
                items += [(s, n) for s in subscribers]
            yield at, items


@dataclass
class Run:
    subscriptions: int
    pub_rate: float
    sub_rate: float
    steady_s: float


def cpu_seconds() -> tuple[float, float]:
    """CPU time so far of the whole machine and of this process with its descendants (the
    matcher, scaler and ZooKeeper processes): the difference over a run is what other work
    took meanwhile (Linux /proc)."""
    tick = os.sysconf("SC_CLK_TCK")
    with open("/proc/stat") as f:
        fields = [int(x) for x in f.readline().split()[1:]]
    machine = sum(fields) - fields[3] - fields[4]  # all but idle and iowait
    parents: dict[int, int] = {}
    spent: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    stat = f.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            parents[int(entry)] = int(stat[1])
            spent[int(entry)] = int(stat[11]) + int(stat[12])
    ours, grew = {os.getpid()}, True
    while grew:
        found = {pid for pid, parent in parents.items() if parent in ours} - ours
        ours |= found
        grew = bool(found)
    return machine / tick, sum(spent.get(pid, 0) for pid in ours) / tick


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


async def timeline(
    zk: str,
    run: Run,
    preload: list[Subscription],
    xs: list[int],
    processes: bool = True,
    trace: Path | None = None,
    scaler_process: bool = True,
) -> dict[str, Any]:
    """The run. `processes`: the matchers are `tidings matcher` processes, all three started
    and joined before the timeline (the spares unassigned), one of them in the view; the
    access point and the exit point stay in this process. Else all in this process.
    `trace`: a directory for the timestamps of `elastic_trace` (every process's).
    `scaler_process`: (with `processes`) the scales are driven from a process of its own, as
    `tidings cluster scale` does, not from this loop, where they wait behind the exit point's
    batches (0.1-0.3 s each once it has a backlog)."""
    sink = TimedSink()
    transport = "tcp" if processes else "ipc"
    command: list[str] = []
    if trace is not None:
        import elastic_trace

        elastic_trace.install("benchmark", trace)
        command = elastic_trace.matcher_command(trace)
    async with Deployment(zk, lambda: sink, matchers=1, exit_points=1, transport=transport) as d:
        with matcher_processes(zk, d.cluster, 3 if processes else 0, command) as remote:
            if not remote:
                return await _timeline(d, sink, run, preload, xs, _local_scales(d))
            await move_to(d, remote[:1])  # before the preload: no state to move
            scaler = ScalerProcess(zk, d.cluster, trace) if scaler_process else None
            try:
                scales = _scales(d, scaler, [remote, remote[:1]])
                return await _timeline(d, sink, run, preload, xs, scales)
            finally:
                if scaler is not None:
                    scaler.close()


Scale = Callable[[], Awaitable[tuple[float, float, dict[str, Any]]]]


def _local_scales(d: Deployment) -> list[Scale]:
    """Matchers 1 -> 3 -> 1 by the deployment's own scaler, on this loop (starting local
    matchers); each answers its start and end times and its report."""

    def to(n: int) -> Scale:
        async def scale() -> tuple[float, float, dict[str, Any]]:
            began = time.monotonic()
            (report,) = await d.scale(matchers=n)
            return began, time.monotonic(), report.to_json()

        return scale

    return [to(3), to(1)]


def _scales(d: Deployment, scaler: ScalerProcess | None, views: list[list[str]]) -> list[Scale]:
    """The matcher view moved to each of `views` in turn: by the scaler process, or by the
    deployment's scaler on this loop."""

    def to(members: list[str]) -> Scale:
        async def scale() -> tuple[float, float, dict[str, Any]]:
            if scaler is not None:
                done = await scaler.scale(members)
                return done["from"], done["to"], done["report"]
            began = time.monotonic()
            report = await d.scaler.scale_matchers(members)
            return began, time.monotonic(), report.to_json()

        return scale

    return [to(view) for view in views]


async def _timeline(
    d: Deployment,
    sink: TimedSink,
    run: Run,
    preload: list[Subscription],
    xs: list[int],
    scales: list[Scale],
) -> dict[str, Any]:
    loading = time.monotonic()
    for sub in preload:
        d.subscribe(sub)
    await d.publish([_publication(-1, 0)])  # every preloaded subscription is in place
    preload_s = time.monotonic() - loading
    sink.clear()
    # As the broker does after loading: what is alive now (the preloaded subscriptions, here
    # and in the access point) out of the collector's sight; and as `tidings serve` does, a
    # wide young generation.
    heap.settle_heap()
    heap.widen_young_generation()
    stop = asyncio.Event()
    pending: set[asyncio.Future[int]] = set()  # publications not yet committed everywhere

    sent: list[float] = []  # publication n's time, from t0

    def publish(n: int) -> None:
        sent.append(time.monotonic() - t0)
        future = d.ap.publish_nowait(_publication(n, xs[n % len(xs)]))
        pending.add(future)
        future.add_done_callback(answered)

    def answered(future: asyncio.Future[int]) -> None:
        pending.discard(future)
        if not future.cancelled():
            future.exception()  # (one failed as the run stopped itself: seen, not reported)

    def subscribe(k: int) -> None:
        low = (k * 37) % 10_000
        predicates = (Predicate("x", Op.GE, low), Predicate("x", Op.LT, low + 20))
        d.subscribe(Subscription(f"c{k}", f"churn{k % 100}", "content", (), predicates))

    backlog: list[tuple[float, int]] = []  # (seconds from t0, publications in flight)

    async def watch() -> None:
        """Samples the backlog; stops the run when it passes 30 s of publications (the
        deployment does not keep up: it would only grow until memory runs out)."""
        while not stop.is_set():
            backlog.append((time.monotonic() - t0, len(pending)))
            if len(pending) > 30 * run.pub_rate:
                stop.set()
                raise RuntimeError(f"{len(pending)} publications in flight: not keeping up")
            await asyncio.sleep(BUCKET_S)

    cpu_before = cpu_seconds()
    t0 = time.monotonic()
    pubs = asyncio.create_task(_paced(run.pub_rate, stop, publish))
    subs = asyncio.create_task(_paced(run.sub_rate, stop, subscribe))
    watching = asyncio.create_task(watch())
    windows: list[dict[str, Any]] = []
    await asyncio.sleep(run.steady_s)  # the steady state before, between and after
    for name, scale in zip(("1 -> 3", "3 -> 1"), scales, strict=True):
        if watching.done():
            watching.result()
        began, ended, report = await scale()
        if report["outcome"] != "done":
            raise RuntimeError(f"scale {name} ended {report['outcome']}: {report['reason']}")
        windows.append({"scale": name, "from_s": began - t0, "to_s": ended - t0, "report": report})
        await asyncio.sleep(run.steady_s)
    stop.set()
    await watching
    published = await pubs
    await subs
    await asyncio.gather(*pending)
    wall = time.monotonic() - t0
    machine, ours = (b - a for a, b in zip(cpu_before, cpu_seconds(), strict=True))
    cpu = {
        "wall_s": round(wall, 2),
        "this_run_s": round(ours, 2),
        "others_s": round(machine - ours, 2),
    }
    return {
        "t0": t0,
        "published": published,
        "windows": windows,
        "sink": sink,
        "sent": sent,
        "preload_s": preload_s,
        "backlog": backlog,
        "cpu": cpu,
    }


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
    sink: TimedSink,
    expected: set[tuple[str, int]],
    sent: list[float],
    spans: list[tuple[str, float, float]],
    t0: float,
) -> list[dict[str, Any]]:
    """Per span [lo, hi) (seconds from t0): the expected deliveries of the publications
    sent in it that never came (lost), the deliveries committed in it that came before
    (duplicated) or after a later publication's to the same subscriber (out of order), and
    the longest pause between two commits that overlaps it (a pause across a boundary
    counts in both spans: cut at the boundary it would be shorter, or missed)."""
    out = [{"lost": 0, "duplicated": 0, "out_of_order": 0} for _ in spans]
    starts = [lo for _, lo, _ in spans]

    def span_of(at: float) -> int:
        return max(0, bisect.bisect_right(starts, at) - 1)

    seen: set[tuple[str, int]] = set()
    last: dict[str, int] = {}
    for at, items in sink.batches():
        record = out[span_of(at - t0)]
        for key in items:
            subscriber, n = key
            if key in seen:
                record["duplicated"] += 1
            if last.get(subscriber, -1) > n:
                record["out_of_order"] += 1
            seen.add(key)
            last[subscriber] = max(last.get(subscriber, -1), n)
    for key in expected - seen:
        out[span_of(sent[key[1]])]["lost"] += 1
    times = [at - t0 for at in sink.times]
    for record, (_, lo, hi) in zip(out, spans, strict=True):
        gaps = [(b - a, a) for a, b in itertools.pairwise(times) if a < hi and b > lo]
        longest, at = max(gaps, default=(0.0, lo))
        record["longest_pause_ms"] = round(1000 * longest, 1)
        record["longest_pause_from_s"] = round(at, 3)
    return out


def throughput(sink: TimedSink, t0: float) -> list[tuple[float, int]]:
    buckets: dict[int, int] = defaultdict(int)
    for at, count in zip(sink.times, sink.counts, strict=True):
        buckets[int((at - t0) / BUCKET_S)] += count
    last = max(buckets, default=0)
    return [(b * BUCKET_S, buckets.get(b, 0)) for b in range(last + 1)]


def plot(
    series: list[tuple[float, int]],
    windows: list[dict[str, Any]],
    run: Run,
    path: Path | None = None,
    backlog: list[tuple[float, int]] | None = None,
    placement: str = "",
) -> Path:
    """The timeline; `backlog` (publications in flight) on a second axis, in grey."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(10, 4))
    ax.plot([t for t, _ in series], [c / BUCKET_S for _, c in series], lw=1)
    ax.set_ylim(bottom=0)
    if backlog:
        behind = ax.twinx()
        behind.plot([t for t, _ in backlog], [n for _, n in backlog], lw=0.8, color="#888888")
        behind.set_ylim(bottom=0)
        behind.set_ylabel("publications in flight (grey)")
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
        f"{run.pub_rate:g} pub/s, {run.sub_rate:g} sub/s{placement} (shaded: start, change)",
        fontsize=10,
    )
    if path is None:  # (not benchmarks/results: a run must not replace a kept figure)
        stamp = datetime.datetime.now().strftime("%Y-%m-%dT%H%M%S")
        path = Path(tempfile.gettempdir()) / f"elastic-fig13-{stamp}.png"
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
