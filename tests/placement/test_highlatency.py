"""Section IV-D's rule: a region is added for a client all of whose deliveries are late."""

from __future__ import annotations

import numpy as np

from tidings.placement.highlatency import force_regions
from tidings.placement.model import Configuration, Instance, Mode


def far_subscriber(max_ms: float = 50.0) -> Instance:
    """Clients 0-2 near region 0; client 3 is near region 1 only, 200 ms from region 0."""
    return Instance(
        L=np.array([[5.0, 90.0, 80.0], [5.0, 90.0, 80.0], [5.0, 90.0, 80.0], [200.0, 10.0, 60.0]]),
        LR=np.array([[0.0, 70.0, 60.0], [70.0, 0.0, 50.0], [60.0, 50.0, 0.0]]),
        alpha=np.full(3, 1.0),
        beta=np.full(3, 1.0),
        publishers=np.array([0]),
        sizes=(np.ones(4),),
        subscribers=np.array([1, 2, 3]),
        ratio=60.0,
        max_ms=max_ms,
    )


def test_a_client_whose_every_delivery_is_late_gets_the_region_that_serves_it_best() -> None:
    forced = force_regions(far_subscriber(100.0), Configuration((0,), Mode.DIRECT))
    assert forced.added == (1,)
    assert forced.configuration == Configuration((0, 1), Mode.DIRECT)


def test_routed_stays_routed_when_a_region_is_added() -> None:
    forced = force_regions(far_subscriber(100.0), Configuration((0, 2), Mode.ROUTED))
    assert forced.configuration == Configuration((0, 1, 2), Mode.ROUTED)


def test_no_region_is_added_when_no_client_is_entirely_late() -> None:
    forced = force_regions(far_subscriber(300.0), Configuration((0,), Mode.DIRECT))
    assert forced.added == ()


def test_a_region_that_helps_too_little_is_not_added() -> None:
    # from 205 ms to 105 ms: meets neither 50 ms nor a 60 % improvement
    forced = force_regions(far_subscriber(50.0), Configuration((0,), Mode.DIRECT), 0.6)
    assert forced.added == ()
