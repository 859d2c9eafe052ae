"""PerfTest-like lines: one per second while running, a summary at the end, or one JSON line."""

from __future__ import annotations

import dataclasses
from typing import Any

from tidings.environment import machine, versions
from tidings.sim.perf.stats import Second
from tidings.sim.perf.traffic import Workload
from tidings.sim.perf.trial import Summary


def _latency(values: tuple[float, ...]) -> str:
    if not values:
        return "-"
    return "/".join(f"{v:.2f}" for v in values) + " ms"


def second_line(second: Second, duration: float) -> str:
    eta = max(0, round(duration - second.at_s - 1))
    return (
        f"time {second.at_s + 1:>4d} s (ETA {eta} s), sent {second.sent:,} msg/s, "
        f"received {second.received:,} msg/s, "
        f"min/median/75th/95th/99th latency {_latency(second.latency_ms)}"
    )


def summary_lines(summary: Summary) -> list[str]:
    lines = [
        f"{summary.target} at {summary.url}: {summary.duration_s:.1f} s"
        + (" (stopped early)" if summary.stopped_early else ""),
        f"sending rate avg: {summary.sent_per_s:,.0f} msg/s ({summary.sent:,} sent)",
        f"receiving rate avg: {summary.received_per_s:,.0f} msg/s ({summary.received:,} received)",
        f"min/median/75th/95th/99th latency: {_latency(summary.latency_ms)}, "
        f"max {summary.max_ms:.2f} ms",
        f"lost {summary.lost:,} of {summary.expected:,} expected, "
        f"{summary.duplicates:,} duplicates, "
        f"{summary.wasted:,} wasted deliveries (filtered out by consumers)",
    ]
    if summary.drain_per_s is not None:
        lines.append(f"backlog drained at {summary.drain_per_s:,.0f} msg/s")
    if summary.closed:
        lines.append(f"{summary.closed:,} consumer streams closed by the broker")
    if summary.send_errors:
        lines.append(f"{summary.send_errors:,} sends failed; the first: {summary.first_error}")
    return lines


def summary_record(summary: Summary, workload: Workload, instance: str | None) -> dict[str, Any]:
    latency = dict(
        zip(("min_ms", "p50_ms", "p75_ms", "p95_ms", "p99_ms"), summary.latency_ms, strict=False)
    )
    record = dataclasses.asdict(summary)
    del record["latency_ms"]
    return {
        **record,
        **latency,
        "instance": instance,
        "workload": {k: v for k, v in dataclasses.asdict(workload).items() if k != "run_id"},
        "machine": machine(),
        "versions": versions(*PEER_PACKAGES),
    }


PEER_PACKAGES = ("nats-py", "redis", "hiredis", "websockets", "uvloop")


SHORTFALL = 0.95  # below this share of the offered rate, the run says it did not reach it


def rate_shortfall(summary: Summary, offered_per_s: float) -> str | None:
    """The warning for a run that sent less than it was asked to (`--rate` per producer,
    `offered_per_s` in all), or None: a figure measured below the offered load is not a
    figure at that load."""
    if offered_per_s <= 0 or summary.sent_per_s >= SHORTFALL * offered_per_s:
        return None
    return (
        f"offered {offered_per_s:,.0f} msg/s, sent {summary.sent_per_s:,.0f} msg/s "
        f"({summary.sent_per_s / offered_per_s:.0%}): the producers or the broker could not "
        "keep up; the figures are for the rate reached, not the one asked"
    )
