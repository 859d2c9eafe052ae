"""A simulator's calls carry `Tidings-Simulation: <run name>`: its subscribers are marked
(the admin's list filters them) and its publications are counted apart as well."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
from tests.api.conftest import Sub
from tests.broker.test_operations import settings_for, started

from tidings.api.app import create_app

MARK = {"Tidings-Simulation": "load-test"}


def listed(http: httpx.Client, admin: dict[str, str], origin: str) -> dict[str, Any]:
    answer = http.get("/v1/admin/subscribers", params={"origin": origin}, headers=admin)
    assert answer.status_code == 200, answer.text
    return {s["id"]: s for s in answer.json()["subscribers"]}


def test_the_subscribers_list_tells_a_simulators_subscribers_from_real_ones(
    http: httpx.Client, admin: dict[str, str]
) -> None:
    real = http.post("/v1/subscribers").json()["id"]
    simulated = http.post("/v1/subscribers", headers=MARK).json()["id"]
    everyone = listed(http, admin, "all")
    assert everyone[real]["simulation"] is None
    assert everyone[simulated]["simulation"] == "load-test"
    assert real in listed(http, admin, "real") and simulated not in listed(http, admin, "real")
    only = listed(http, admin, "simulated")
    assert simulated in only and real not in only
    assert http.get("/v1/admin/subscribers", headers=admin).json()["subscribers"]  # all


def test_a_simulated_subscriber_deleted_is_gone_from_the_simulated_list(
    http: httpx.Client, admin: dict[str, str]
) -> None:
    gone = http.post("/v1/subscribers", headers=MARK).json()["id"]
    assert http.delete(f"/v1/admin/subscribers/{gone}", headers=admin).status_code == 204
    assert gone not in listed(http, admin, "simulated")


def test_a_simulators_publications_and_their_deliveries_are_counted_apart(
    http: httpx.Client, admin: dict[str, str]
) -> None:
    watcher = Sub(http)
    watcher.subscribe(topics=["apart/#"])

    def counters() -> dict[str, float]:
        seen = http.get("/v1/admin/overview", headers=admin).json()
        return seen["counters"]  # type: ignore[no-any-return]

    before = counters()
    http.post("/v1/publications", json={"topics": ["apart/real"]})
    http.post("/v1/publications", json={"topics": ["apart/sim"]}, headers=MARK)
    batch = {"publications": [{"topics": ["apart/sim"]}] * 3}
    assert http.post("/v1/publications/batch", json=batch, headers=MARK).status_code == 201
    after = counters()
    assert after["publications"] - before["publications"] == 5
    assert after["simulated_publications"] - before["simulated_publications"] == 4
    assert after["simulated_deliveries"] - before["simulated_deliveries"] == 4
    watcher.drain()


def test_a_simulations_name_past_its_bound_is_refused_naming_the_header(
    http: httpx.Client,
) -> None:
    long = {"Tidings-Simulation": "x" * 101}
    for refused in (
        http.post("/v1/subscribers", headers=long),
        http.post("/v1/publications", json={"topics": ["t"]}, headers=long),
    ):
        assert refused.status_code == 422, refused.text
        assert refused.json()["error"]["field"] == "Tidings-Simulation"


def test_an_unknown_origin_is_refused(http: httpx.Client, admin: dict[str, str]) -> None:
    refused = http.get("/v1/admin/subscribers", params={"origin": "fake"}, headers=admin)
    assert refused.status_code in (400, 422)
    assert refused.json()["error"]["field"] == "origin"


async def test_a_simulation_is_heard_only_from_this_machine(tmp_path: Path) -> None:
    """From elsewhere, the header would let a client hide its subscribers among the
    simulated ones, out of the operator's list of real ones."""
    broker = await started(settings_for(tmp_path))
    try:
        app = create_app(broker)
        for address, origin in (("192.0.2.7", "real"), ("127.0.0.1", "simulated")):
            transport = httpx.ASGITransport(app=app, client=(address, 5000))  # type: ignore[arg-type]
            async with httpx.AsyncClient(transport=transport, base_url="http://t") as http:
                made = await http.post("/v1/subscribers", headers=MARK)
            assert made.status_code == 201, made.text
            page = await broker.overview.subscribers_page("", 100, origin)
            assert made.json()["id"] in {record.id for record, _ in page}, address
    finally:
        await broker.close()
        broker.store.sync.close()
