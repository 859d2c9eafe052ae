"""The paper's workloads: clients close to regions, one message a second, costs per day."""

from __future__ import annotations

import numpy as np

from tidings.placement import scenarios


def test_the_global_spread_puts_publishers_and_subscribers_closest_to_every_region() -> None:
    s = scenarios.global_spread(2, seed=5)
    instance = s.instance(150.0)
    assert (len(instance.publishers), len(instance.subscribers)) == (20, 20)
    closest = np.argmin(instance.L, axis=1)
    assert closest[:20].tolist() == [r for r in range(10) for _ in range(2)]
    assert closest[20:].tolist() == closest[:20].tolist()


def test_a_localised_topic_has_every_client_closest_to_its_region() -> None:
    s = scenarios.localised("sa-east-1", 6, seed=2)
    assert (np.argmin(s.instance(100.0).L, axis=1) == 9).all()


def test_one_message_a_second_makes_a_day_86400_intervals_of_one_message() -> None:
    s = scenarios.global_spread(1, seed=1)
    assert s.per_day == 86_400
    assert s.instance(100.0).sizes[0].tolist() == [1000.0]
