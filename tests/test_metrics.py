"""The broker's metrics as values: a batch-fed histogram renders as prometheus-client's."""

from __future__ import annotations

import math

import prometheus_client
from prometheus_client import CollectorRegistry, Histogram

from tidings.metrics import LATENCY_BUCKETS_S, Timings

VALUES = [0.0, 0.0004, 0.001, 0.0011, 0.3, 2.5, 7.0, 30.0, 31.0, 1e9]


def test_timings_render_as_a_histogram_observed_value_by_value() -> None:
    theirs, ours = CollectorRegistry(), CollectorRegistry()
    histogram = Histogram("t_seconds", "Time.", buckets=LATENCY_BUCKETS_S, registry=theirs)
    timings = Timings("t_seconds", "Time.", LATENCY_BUCKETS_S)
    ours.register(timings)
    for value in VALUES:
        histogram.observe(value)
    for _ in range(3):
        histogram.observe(0.02)
    timings.observe_each(VALUES[:4])
    timings.observe_each(iter(VALUES[4:]))
    timings.observe(0.02, 3)
    assert prometheus_client.generate_latest(ours) == prometheus_client.generate_latest(theirs)


def test_empty_timings_render_as_an_empty_histogram() -> None:
    theirs, ours = CollectorRegistry(), CollectorRegistry()
    Histogram("t_seconds", "Time.", buckets=(0.5, 1.0), registry=theirs)
    ours.register(Timings("t_seconds", "Time.", (0.5, 1.0)))
    assert prometheus_client.generate_latest(ours) == prometheus_client.generate_latest(theirs)


def test_ages_observed_at_once_render_as_each_age_observed_value_by_value() -> None:
    """Ages of enqueueing times, a time after now counted as 0, many at once or a few; the
    sum is the same up to rounding (it is added up otherwise)."""
    now = 1_795_000_000.0
    ages = [0.0, 0.0004, 0.0011, 0.3, 2.5, 7.0, 31.0, 1e6, -0.5, -3.0, 0.3]
    theirs, ours = CollectorRegistry(), CollectorRegistry()
    histogram = Histogram("t_seconds", "Time.", buckets=LATENCY_BUCKETS_S, registry=theirs)
    timings = Timings("t_seconds", "Time.", LATENCY_BUCKETS_S)
    ours.register(timings)
    for age in ages:
        histogram.observe(max(0.0, age))
    timings.observe_since(now, iter([now - age for age in ages[:10]]))  # bucket by bucket
    timings.observe_since(now, [now - age for age in ages[10:]])  # one by one: a few
    timings.observe_since(now, [])

    def rendered(registry: CollectorRegistry) -> tuple[list[str], float]:
        lines = prometheus_client.generate_latest(registry).decode().splitlines()
        total = next(float(line.split()[1]) for line in lines if line.startswith("t_seconds_sum"))
        return [line for line in lines if not line.startswith("t_seconds_sum")], total

    (our_lines, our_sum), (their_lines, their_sum) = rendered(ours), rendered(theirs)
    assert our_lines == their_lines
    assert math.isclose(our_sum, their_sum, rel_tol=1e-9)
