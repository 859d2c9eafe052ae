"""Queue admission through the API (issue #28): one subscriber pulling and nacking from many
connections at once takes turns (`queues.max_concurrent_ops_per_subscriber`), and loses
nothing by it, while another tenant publishes and is delivered everything."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from tests.api.conftest import start

from tidings.config import load_settings
from tidings.errors import ErrorCode, TidingsError
from tidings.server import EmbeddedServer

CONNECTIONS = 8
ROUNDS = 10
CALM = 30


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedServer]:
    srv = start(
        tmp_path_factory.mktemp("broker"), max_attempts=1000, max_concurrent_ops_per_subscriber=1
    )
    yield srv
    srv.__exit__(None, None, None)


async def test_a_flooders_nacks_are_all_honoured_while_a_bystanders_publications_are_delivered(
    server: EmbeddedServer,
) -> None:
    limits = httpx.Limits(max_connections=CONNECTIONS + 2)
    async with httpx.AsyncClient(base_url=server.url, timeout=60, limits=limits) as http:
        flooder, calm = await _subscriber(http, "flood/x"), await _subscriber(http, "calm/x")
        flood = [{"topics": ["flood/x"], "data": i} for i in range(CONNECTIONS * 5)]
        assert (await http.post("/v1/publications/batch", json={"publications": flood})).is_success
        nacked = await asyncio.gather(
            *(_nack_rounds(http, flooder) for _ in range(CONNECTIONS)), _publish_calm(http)
        )
        delivered = await _pull_all(http, calm, CALM)
        metrics = (await http.get("/metrics")).text
    assert sorted(m["body"]["data"] for m in delivered) == list(range(CALM))
    assert _metric(metrics, "tidings_deliveries_nacked_total") == sum(nacked) > 0
    assert _metric(metrics, "tidings_queue_ops_waited_total") > 0  # the flooder took turns


async def _subscriber(http: httpx.AsyncClient, topic: str) -> dict[str, Any]:
    sub = (await http.post("/v1/subscribers")).json()
    auth = {"Authorization": f"Bearer {sub['token']}"}
    base = f"/v1/subscribers/{sub['id']}"
    said = await http.post(f"{base}/subscriptions", json={"topics": [topic]}, headers=auth)
    assert said.status_code == 201, said.text
    return {"base": base, "auth": auth}


async def _nack_rounds(http: httpx.AsyncClient, sub: dict[str, Any]) -> int:
    """Pull (no waiting) and nack at once what came, `ROUNDS` times: the nacks honoured."""
    honoured = 0
    for _ in range(ROUNDS):
        got = await http.get(
            f"{sub['base']}/messages", params={"max": 5, "wait": 0}, headers=sub["auth"]
        )
        receipts = [m["receipt"] for m in got.json()["messages"]]
        said = await http.post(
            f"{sub['base']}/messages/nack", json={"receipts": receipts}, headers=sub["auth"]
        )
        assert said.status_code == 200, said.text
        assert sorted(said.json()["acked"]) == sorted(receipts)
        honoured += len(receipts)
    return honoured


async def _publish_calm(http: httpx.AsyncClient) -> int:
    for i in range(CALM):
        said = await http.post("/v1/publications", json={"topics": ["calm/x"], "data": i})
        assert said.status_code == 201, said.text
    return 0


async def _pull_all(http: httpx.AsyncClient, sub: dict[str, Any], count: int) -> list[Any]:
    got: list[Any] = []
    while len(got) < count:
        answer = await http.get(
            f"{sub['base']}/messages", params={"max": 100, "wait": 5}, headers=sub["auth"]
        )
        got += answer.json()["messages"]
    return got


def _metric(text: str, name: str) -> float:
    lines = [line for line in text.splitlines() if line.startswith(name + " ")]
    return float(lines[0].split()[-1]) if lines else 0.0


def test_a_negative_bound_of_queue_operations_is_refused() -> None:
    with pytest.raises(TidingsError) as refused:
        load_settings({"queues__max_concurrent_ops_per_subscriber": -1}, env={})
    assert refused.value.code == ErrorCode.CONFIG_INVALID
    assert refused.value.field == "queues__max_concurrent_ops_per_subscriber"
