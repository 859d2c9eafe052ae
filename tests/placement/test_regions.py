"""Region managers beside real brokers: counting once per publication, forwarding when routed."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import numpy as np
import orjson
import pytest

from tidings.client.multiregion import MultiRegionClient, Placement
from tidings.client.types import Message
from tidings.placement.controller import Constraint, Controller
from tidings.placement.emulation import brokers
from tidings.placement.model import Floats
from tidings.placement.regions import RegionManager

pytestmark = pytest.mark.slow
TOPIC = "scores/live"
FORWARDED = 40  # enough that forwards overtaking one another show


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
    constraints = {TOPIC: Constraint(75.0, 100.0)}
    controller = Controller(regions, L, LR, alpha, beta, constraints, ["near", "far"])
    controller.deployed[TOPIC] = routed
    await controller.announce(TOPIC)
    await settle(lambda: all(TOPIC in m.placements for m in regions))
    publisher = MultiRegionClient(0, TOPIC, urls, [1.0, 9.0], routed, subscriber=False)
    far = MultiRegionClient(1, TOPIC, urls, [9.0, 1.0], routed, subscriber=True)
    await publisher.start()
    await far.start()
    ids = [await publisher.publish({"n": n}) for n in range(FORWARDED)]
    await settle(lambda: len(far.deliveries) == FORWARDED)
    assert [d.placement_id for d in far.deliveries] == ids  # in the publisher's order
    assert {d.region for d in far.deliveries} == {1}  # forwarded by region 0's manager
    counts = [m.counts() for m in regions]
    assert list(counts[0][TOPIC].publishers) == [0]  # at the publisher's home only
    assert len(counts[0][TOPIC].publishers[0]) == FORWARDED
    assert TOPIC not in counts[1] or not counts[1][TOPIC].publishers
    assert counts[1][TOPIC].subscribers == frozenset({1})
    await publisher.close()
    await far.close()


async def held_first_broker(completed: list[int]) -> tuple[asyncio.Server, str]:
    """A broker's publish endpoints over HTTP/1.1 (one publication, or a batch) that take
    requests concurrently and hold the one carrying publication 0 for 0.2 s, recording
    each publication when its request completes (as a broker commits)."""

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while head := await reader.readuntil(b"\r\n\r\n"):
            length = next(
                int(line.split(b":")[1])
                for line in head.split(b"\r\n")
                if line.lower().startswith(b"content-length:")
            )
            body = orjson.loads(await reader.readexactly(length))
            items = body.get("publications", [body])
            ns = [item["data"]["n"] for item in items]
            if 0 in ns:
                await asyncio.sleep(0.2)
            completed.extend(ns)
            answers = [{"id": f"p{n}", "published_at": 0.0, "deliveries": 0} for n in ns]
            out = orjson.dumps({"publications": answers} if "publications" in body else answers[0])
            writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n")
            writer.write(b"content-length: %d\r\n\r\n%s" % (len(out), out))
            await writer.drain()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    return server, f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}"


async def test_forwards_to_a_region_reach_it_in_the_order_they_came() -> None:
    completed: list[int] = []
    server, url = await held_first_broker(completed)
    manager = RegionManager(0, "http://127.0.0.1:9", {1: url})  # (its own broker unused)
    manager.placements[TOPIC] = Placement(2, (0, 1), "routed")
    for n in range(5):
        body = {"data": {"n": n}, "topics": [TOPIC]}
        message: Message[Any] = Message(n, f"r{n}", 1, f"p{n}", ["s"], 0.0, body)
        await manager._publication(TOPIC, message, {"placement_forward": 1})
        await asyncio.sleep(0.02)  # the first is on its way (and held) when the others come
    # (the broker records a batch before its answer reaches the manager, which counts it)
    await settle(lambda: len(completed) == 5 and manager.forwarded == 5)
    assert completed == [0, 1, 2, 3, 4] and manager.forwarded == 5  # none overtook the first
    await manager.close()
    server.close()


def _world() -> tuple[Floats, Floats, Floats, Floats]:
    L = np.array([[1.0, 9.0], [9.0, 1.0]])
    LR = np.array([[0.0, 5.0], [5.0, 0.0]])
    return L, LR, np.array([1e-11, 1e-11]), np.array([1e-10, 1e-10])
