"""The live system: real region brokers, emulated geography, a topic that spreads.

Three `tidings serve` processes (us-east-1, eu-central-1, ap-northeast-1); every link delayed by
the latency model (x 4, so that the brokers' own milliseconds stay small). Two publishers and
two subscribers in the USA; then as many in Europe join; the controller reconfigures.
"""

from __future__ import annotations

import asyncio

import pytest

from tidings.placement.emulation import Report, Timing, run_spread

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def report() -> Report:
    return asyncio.run(run_spread(seed=1, per_side=2, dilation=4.0, timing=Timing(1.0, 0.25, 2.0)))


def test_the_controller_keeps_one_region_for_one_continent_and_adds_one_for_two(
    report: Report,
) -> None:
    assert [p["regions"] for p in report.placements] == [[0], [0, 1]]
    assert all(p["meets"] for p in report.placements)


def test_every_european_client_moves_to_the_european_region(report: Report) -> None:
    assert report.moves == {c: [(0, 1)] for c in range(4, 8)}


def test_nothing_is_lost_and_nothing_is_delivered_twice(report: Report) -> None:
    assert report.expected > 0
    assert report.lost == 0 and report.received == report.expected


def test_the_measured_percentile_is_within_ten_percent_of_the_models(report: Report) -> None:
    assert report.relative_error <= 0.10, (
        report.measured_percentile_ms,
        report.model_percentile_ms,
    )
