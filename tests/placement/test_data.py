"""The shipped data: the paper's table I, region coordinates, the latency model's check."""

from __future__ import annotations

import numpy as np
import pytest

from tidings.placement import data
from tidings.placement.geo import region_latencies


def test_the_ten_regions_of_table_i_are_priced_per_byte() -> None:
    regions = data.ec2_regions()
    assert len(regions.names) == 10
    assert regions.names[0] == "us-east-1" and regions.names[-1] == "sa-east-1"
    assert regions.beta[-1] == pytest.approx(0.25e-9)
    assert regions.alpha[5] == pytest.approx(0.09e-9)


def test_the_latency_model_is_within_a_fifth_of_the_published_round_trips_at_the_median() -> None:
    names, rtt = data.published_round_trips()
    regions = data.ec2_regions()
    assert names == regions.names
    LR = region_latencies(data.latency_model(), regions.lat, regions.lon)
    upper = np.triu_indices(len(names), 1)
    relative = np.abs(2 * LR[upper] - rtt[upper]) / rtt[upper]
    assert np.median(relative) < 0.2


def test_a_world_has_one_row_of_latencies_per_client_and_the_ec2_prices() -> None:
    world = data.world(np.array([40.7, 35.7]), np.array([-74.0, 139.7]))
    assert len(world.L) == 2 and len(world.L[0]) == 10
    assert int(np.argmin(world.L[0])) == 0  # New York: us-east-1
    assert int(np.argmin(world.L[1])) == 5  # Tokyo: ap-northeast-1
