"""The broker's metrics as values: a batch-fed histogram renders as prometheus-client's."""

from __future__ import annotations

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
