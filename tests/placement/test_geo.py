"""Latency from great-circle distance: haversine, propagation, inflation, overheads."""

from __future__ import annotations

import math

import numpy as np
import pytest

from tidings.placement.geo import (
    EARTH_RADIUS_KM,
    LatencyModel,
    client_latencies,
    great_circle_km,
    region_latencies,
)

MODEL = LatencyModel(200.0, 1.5, 2.0, 2.0, 5.0)


def test_half_way_round_the_earth_is_pi_radii() -> None:
    km = great_circle_km(np.array(0.0), np.array(0.0), np.array(0.0), np.array(180.0))
    assert float(km) == pytest.approx(math.pi * EARTH_RADIUS_KM)


def test_paris_to_london_is_about_344_km() -> None:
    km = great_circle_km(np.array(48.8566), np.array(2.3522), np.array(51.5074), np.array(-0.1278))
    assert float(km) == pytest.approx(344, abs=2)


def test_regions_are_zero_ms_from_themselves_and_inflated_with_overhead_apart() -> None:
    LR = region_latencies(MODEL, np.array([0.0, 0.0]), np.array([0.0, 90.0]))
    quarter = math.pi / 2 * EARTH_RADIUS_KM
    assert LR[0, 0] == LR[1, 1] == 0.0
    assert LR[0, 1] == LR[1, 0] == pytest.approx(1.5 * quarter / 200 + 2.0, abs=0.01)


def test_a_client_at_a_region_pays_only_its_access_delay() -> None:
    L = client_latencies(
        MODEL, np.array([10.0]), np.array([20.0]), np.array([10.0]), np.array([20.0])
    )
    assert L.tolist() == [[5.0]]
