"""The load tool's summary says when the offered rate was not reached."""

from __future__ import annotations

import dataclasses

from tidings.sim.perf.printout import rate_shortfall
from tidings.sim.perf.trial import Summary

RUN = Summary(
    target="tidings", url="http://x", sent=650, received=650, expected=650, lost=0,
    duplicates=0, wasted=0, closed=0, send_errors=0, first_error=None, duration_s=10.0,
    sent_per_s=65.0, received_per_s=65.0, latency_ms=(1, 2, 3, 4, 5), max_ms=6.0,
    stopped_early=False, drain_per_s=None,
)  # fmt: skip


def test_a_run_below_the_offered_rate_says_so_with_both_rates() -> None:
    said = rate_shortfall(RUN, offered_per_s=500)
    assert said is not None and "offered 500 msg/s, sent 65 msg/s (13%)" in said


def test_a_run_at_the_offered_rate_or_unthrottled_says_nothing() -> None:
    assert rate_shortfall(dataclasses.replace(RUN, sent_per_s=490.0), 500) is None
    assert rate_shortfall(RUN, offered_per_s=0) is None  # --rate 0: as fast as it can
