"""Region managers beside real brokers: counting once per publication, forwarding when routed."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import numpy as np
import pytest

from tidings.client.multiregion import MultiRegionClient, Placement
from tidings.placement.controller import Constraint, Controller
from tidings.placement.emulation import brokers
from tidings.placement.model import Floats
from tidings.placement.regions import RegionManager

pytestmark = pytest.mark.slow
TOPIC = "scores/live"


@pytest.fixture
async def regions() -> AsyncIterator[list[RegionManager]]:
    async with brokers(2) as ports:
        urls = [f"http://127.0.0.1:{p}" for p in ports]
        managers = [
            RegionManager(0, urls[0], {1: urls[1]}),
            RegionManager(1, urls[1], {0: urls[0]}),
        ]
        for m in managers:
            await m.start()
        yield managers
        for m in managers:
            await m.close()


async def settle(condition: object, timeout: float = 10.0) -> None:
    for _ in range(int(timeout / 0.05)):
        if callable(condition) and condition():
            return
        await asyncio.sleep(0.05)


async def test_routed_publications_are_forwarded_and_counted_once(
    regions: list[RegionManager],
) -> None:
    urls = [m.url for m in regions]
    routed = Placement(2, (0, 1), "routed")
    L, LR, alpha, beta = _world()
    controller = Controller(regions, L, LR, alpha, beta, {TOPIC: Constraint(75.0, 100.0)})
    controller.deployed[TOPIC] = routed
    await controller.announce(TOPIC)
    await settle(lambda: all(TOPIC in m.placements for m in regions))
    publisher = MultiRegionClient(0, TOPIC, urls, [1.0, 9.0], routed, subscriber=False)
    far = MultiRegionClient(1, TOPIC, urls, [9.0, 1.0], routed, subscriber=True)
    await publisher.start()
    await far.start()
    ids = [await publisher.publish({"n": n}) for n in range(5)]
    await settle(lambda: len(far.deliveries) == 5)
    assert [d.placement_id for d in far.deliveries] == ids
    assert {d.region for d in far.deliveries} == {1}  # forwarded by region 0's manager
    counts = [m.counts() for m in regions]
    assert list(counts[0][TOPIC].publishers) == [0]  # at the publisher's home only
    assert len(counts[0][TOPIC].publishers[0]) == 5
    assert TOPIC not in counts[1] or not counts[1][TOPIC].publishers
    assert counts[1][TOPIC].subscribers == frozenset({1})
    await publisher.close()
    await far.close()


def _world() -> tuple[Floats, Floats, Floats, Floats]:
    L = np.array([[1.0, 9.0], [9.0, 1.0]])
    LR = np.array([[0.0, 5.0], [5.0, 0.0]])
    return L, LR, np.array([1e-11, 1e-11]), np.array([1e-10, 1e-10])
