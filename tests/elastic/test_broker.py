"""`tidings serve --matching elastic`: the broker publishes through the elastic operators,
whose exit points enqueue into its store; the admin calls show and scale the deployment;
/metrics shows each operator."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from tidings.client import Client
from tidings.config import ElasticSettings, load_settings
from tidings.elastic.hosting.autoscaler import Policy
from tidings.elastic.hosting.seam import ElasticMatching
from tidings.server import EmbeddedServer
from tidings.store.sqlite import SQLiteStore


def test_a_broker_with_elastic_matching_delivers_and_scales_through_the_admin_call(
    zookeeper: str, tmp_path: Path
) -> None:
    settings = load_settings(
        {
            "data_dir": tmp_path,
            "matching": "elastic",
            "elastic__zookeeper": zookeeper,
            "elastic__cluster": "broker-test",
            "elastic__matchers": 2,
            "admin_token": "secret",
        },
        env={},
    )
    admin = {"Authorization": "Bearer secret"}
    with EmbeddedServer(settings) as server, Client(server.url) as client:
        alice, bob = client.register(), client.register()
        alice.subscribe(topics=["news/#"])
        bob.subscribe(predicates=[{"key": "level", "op": ">", "value": 2}])
        first = client.publish({"n": 1}, topics=["news/x"], attributes={"level": 3})
        assert first.deliveries == 2
        scaled = httpx.post(
            f"{server.url}/v1/admin/cluster/scale",
            json={"matchers": 3, "exit_points": 2},
            headers=admin,
            timeout=60,
        )
        assert scaled.status_code == 200, scaled.text
        assert [s["outcome"] for s in scaled.json()["scales"]] == ["done", "done"]
        second = client.publish({"n": 2}, topics=["news/y"], attributes={"level": 1})
        assert second.deliveries == 1
        assert [m.body["data"]["n"] for m in alice.pull(10)] == [1, 2]  # type: ignore[index]
        assert [m.body["data"]["n"] for m in bob.pull(10)] == [1]  # type: ignore[index]
        status = httpx.get(f"{server.url}/v1/admin/cluster", headers=admin).json()
        assert len(status["matchers"]["members"]) == 3
        assert len(status["exit_points"]["members"]) == 2
        assert httpx.get(f"{server.url}/v1/admin/cluster").status_code == 401
        metrics = httpx.get(f"{server.url}/metrics").text
        assert 'tidings_elastic_subscriptions{operator="' in metrics
        assert "tidings_elastic_backlog" in metrics


@pytest.mark.parametrize("autoscale", [True, False])
async def test_the_autoscale_setting_decides_whether_the_brokers_deployment_runs_an_autoscaler(
    zookeeper: str, tmp_path: Path, autoscale: bool
) -> None:
    settings = ElasticSettings(
        zookeeper=zookeeper, cluster=f"auto-{autoscale}", autoscale=autoscale
    )
    store = SQLiteStore(str(tmp_path / "queues.db"))
    elastic = ElasticMatching(settings, store)
    try:
        await elastic.start()
        autoscaler = elastic.running.autoscaler
        assert (autoscaler is not None) == autoscale
        if autoscaler is not None:
            assert autoscaler.policy == Policy()  # the documented defaults
    finally:
        await elastic.close()
        store.close()
