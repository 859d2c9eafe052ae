"""The controller publishes its state, with the world's region names, on `placement/state`
at every region's broker (real brokers, real region managers, real multi-region clients);
the brokers answer it at GET /v1/admin/placement."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest

from tidings.admin import admin_token
from tidings.client.multiregion import MultiRegionClient, Placement
from tidings.config import AccessSettings, load_settings
from tidings.placement.controller import Constraint, Controller
from tidings.placement.regions import RegionManager
from tidings.server import EmbeddedServer

TOPIC = "scores/live"
NAMES = ["us-east-1", "eu-central-1"]
# a publisher near region 0, a subscriber near region 1, 50 ms across: only routing through
# both regions (1 + 5 + 1 ms) meets 20 ms
L = np.array([[1.0, 50.0], [50.0, 1.0]])
LR = np.array([[0.0, 5.0], [5.0, 0.0]])
PRICES = np.array([1e-11, 1e-11]), np.array([1e-10, 1e-10])
CONSTRAINT = Constraint(75.0, 20.0)
WAIT_S = 20.0


def serve(tmp: Path, access: AccessSettings | None = None) -> EmbeddedServer:
    settings = load_settings({"data_dir": tmp}, env={})
    if access is not None:
        settings = dataclasses.replace(settings, access=access)
    return EmbeddedServer(settings)


@pytest.fixture
def servers(tmp_path: Path) -> Iterator[list[EmbeddedServer]]:
    with serve(tmp_path / "us") as us, serve(tmp_path / "eu") as eu:
        yield [us, eu]


async def started(urls: list[str]) -> list[RegionManager]:
    managers = [RegionManager(0, urls[0], {1: urls[1]}), RegionManager(1, urls[1], {0: urls[0]})]
    for m in managers:
        await m.start()
    return managers


@pytest.fixture
async def managers(servers: list[EmbeddedServer]) -> AsyncIterator[list[RegionManager]]:
    found = await started([s.url for s in servers])
    yield found
    for m in found:
        await m.close()


def placement_at(server: EmbeddedServer) -> httpx.Response:
    token = admin_token("", server.settings.data_dir)[0]
    return httpx.get(
        f"{server.url}/v1/admin/placement", headers={"Authorization": f"Bearer {token}"}
    )


async def settle(condition: Any, timeout: float = WAIT_S) -> None:
    for _ in range(int(timeout / 0.05)):
        if condition():
            return
        await asyncio.sleep(0.05)
    raise AssertionError("not settled in time")


async def one_interval(publisher: MultiRegionClient, manager: RegionManager) -> None:
    """A publication, counted at the publisher's home before the interval ends."""
    await publisher.publish({"goal": 1})
    await settle(lambda: manager.seen(TOPIC)[0] >= 1)


async def test_the_state_names_the_regions_the_clients_and_the_decision_at_every_region(
    servers: list[EmbeddedServer], managers: list[RegionManager]
) -> None:
    assert placement_at(servers[0]).json()["error"]["code"] == "placement_unknown"
    urls = [s.url for s in servers]
    controller = Controller(managers, L, LR, *PRICES, {TOPIC: CONSTRAINT}, NAMES, 2.0)
    start = Placement(0, (0,), "direct")  # where the clients begin; the controller decides
    publisher = MultiRegionClient(0, TOPIC, urls, list(L[0]), start, subscriber=False)
    subscriber = MultiRegionClient(1, TOPIC, urls, list(L[1]), start, subscriber=True)
    await publisher.start()
    await subscriber.start()
    await settle(lambda: managers[0].seen(TOPIC)[1] == {1})
    await one_interval(publisher, managers[0])

    await controller.step()

    for server in servers:
        answer = placement_at(server)
        assert answer.status_code == 200, answer.text
        state = answer.json()["state"]
        assert state["regions"] == NAMES and state["interval_s"] == 2.0
        [topic] = state["topics"]
        assert (topic["topic"], topic["version"]) == (TOPIC, 1)
        assert (topic["regions"], topic["mode"]) == (NAMES, "routed")
        # both homed at us-east-1 when the interval ended
        assert topic["clients"] == [{"region": "us-east-1", "publishers": 1, "subscribers": 1}]
        decision = topic["decision"]
        assert (decision["objective"], decision["meets"]) == ("cost", True)
        assert (decision["ratio"], decision["max_ms"], decision["percentile_ms"]) == (75, 20, 7)
    await publisher.close()
    await subscriber.close()


async def test_the_state_is_published_again_when_it_changes_and_not_while_it_does_not(
    servers: list[EmbeddedServer], managers: list[RegionManager]
) -> None:
    urls = [s.url for s in servers]
    controller = Controller(managers, L, LR, *PRICES, {TOPIC: CONSTRAINT}, NAMES, 2.0)
    start = Placement(0, (0,), "direct")
    publisher = MultiRegionClient(0, TOPIC, urls, list(L[0]), start, subscriber=False)
    subscriber = MultiRegionClient(1, TOPIC, urls, list(L[1]), start, subscriber=True, drain_s=0.2)
    await publisher.start()
    await subscriber.start()
    await settle(lambda: managers[0].seen(TOPIC)[1] == {1})
    await one_interval(publisher, managers[0])
    await controller.step()  # routed over both: the subscriber moves to eu-central-1
    first = placement_at(servers[1]).json()["publication_id"]
    await settle(lambda: managers[1].seen(TOPIC)[1] == {1} and not managers[0].seen(TOPIC)[1])
    await one_interval(publisher, managers[0])

    await controller.step()
    moved = placement_at(servers[1]).json()
    assert moved["publication_id"] != first
    assert moved["state"]["topics"][0]["clients"] == [
        {"region": "us-east-1", "publishers": 1, "subscribers": 0},
        {"region": "eu-central-1", "publishers": 0, "subscribers": 1},
    ]

    await one_interval(publisher, managers[0])
    await controller.step()  # the same clients, the same configuration: nothing new
    assert placement_at(servers[1]).json()["publication_id"] == moved["publication_id"]
    await publisher.close()
    await subscriber.close()


async def test_where_brokers_require_keys_only_the_controllers_key_writes_the_state(
    tmp_path: Path,
) -> None:
    access = AccessSettings(publish_keys="controller=placement/,scores=scores/")
    with serve(tmp_path / "us", access) as us, serve(tmp_path / "eu", access) as eu:
        found = await started([us.url, eu.url])
        try:
            keyless = Controller(found, L, LR, *PRICES, {}, NAMES, 2.0)
            await keyless.step()  # refused (401): said in the log, tried again next time
            assert placement_at(us).json()["error"]["code"] == "placement_unknown"
            forged = httpx.post(
                f"{us.url}/v1/publications",
                json={"topics": ["placement/state"], "data": {}},
                headers={"Authorization": "Bearer scores"},
            )
            assert forged.status_code == 403

            keyed = Controller(found, L, LR, *PRICES, {}, NAMES, 2.0, key="controller")
            await keyed.step()
            for server in (us, eu):
                state = placement_at(server).json()["state"]
                assert (state["regions"], state["topics"]) == (NAMES, [])
        finally:
            for m in found:
                await m.close()
