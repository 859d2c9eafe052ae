"""Keys an operator can require, through the API on a real server: one to register, and
publisher keys scoped to topic prefixes; with the clients and the CLI."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
from collections.abc import Iterator

import httpx
import pytest

from tidings.client import Client, TidingsClientError
from tidings.config import AccessSettings, load_settings
from tidings.server import EmbeddedServer

ACCESS = AccessSettings(
    registration_key="reg-secret", publish_keys="sensors=sensors/|alerts/,ops=*"
)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedServer]:
    settings = load_settings({"data_dir": tmp_path_factory.mktemp("access")}, env={})
    with EmbeddedServer(dataclasses.replace(settings, access=ACCESS)) as srv:
        yield srv


def bearer(key: str | None) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"} if key else {}


@pytest.mark.parametrize(
    ("path", "key", "status"),
    [
        ("/v1/subscribers", None, 401),
        ("/v1/subscribers", "wrong", 403),
        ("/v1/subscribers", "reg-secret", 201),
        ("/api/RegisterSubscriber", None, 401),
        ("/api/RegisterSubscriber", "reg-secret", 200),
    ],
)
def test_registering_needs_the_registration_key(
    server: EmbeddedServer, path: str, key: str | None, status: int
) -> None:
    assert httpx.post(server.url + path, headers=bearer(key)).status_code == status


@pytest.mark.parametrize(
    ("key", "topics", "status"),
    [
        (None, ["sensors/a"], 401),
        ("wrong", ["sensors/a"], 403),
        ("sensors", ["sensors/a", "alerts/b"], 201),
        ("sensors", ["sensors/a", "billing/x"], 403),  # one topic outside the key's prefixes
        ("sensors", [], 403),  # without topics: only a `*` key
        ("ops", ["billing/x"], 201),
        ("ops", [], 201),
    ],
)
def test_a_publisher_key_publishes_within_its_prefixes(
    server: EmbeddedServer, key: str | None, topics: list[str], status: int
) -> None:
    single = httpx.post(
        server.url + "/v1/publications", json={"data": 1, "topics": topics}, headers=bearer(key)
    )
    batch = httpx.post(
        server.url + "/v1/publications/batch",
        json={"publications": [{"data": 1, "topics": topics}]},
        headers=bearer(key),
    )
    assert (single.status_code, batch.status_code) == (status, status)


def test_the_thesis_s_publishing_needs_a_key_too(server: EmbeddedServer) -> None:
    body = {"message": "x", "topics": ["sensors/a"]}
    assert httpx.post(server.url + "/api/PublishTopics", json=body).status_code == 401
    ok = httpx.post(server.url + "/api/PublishTopics", json=body, headers=bearer("sensors"))
    assert ok.status_code == 200
    content = {"message": "x", "content": [{"key": "a", "value": 1}]}
    scoped = httpx.post(server.url + "/api/PublishContent", json=content, headers=bearer("sensors"))
    assert scoped.status_code == 403  # no topics: the `*` key's alone


def test_the_python_client_sends_its_key(server: EmbeddedServer) -> None:
    with Client(server.url, key="ops") as client:
        assert client.publish({"x": 1}, topics=["any"]).deliveries == 0
    with Client(server.url) as client, pytest.raises(TidingsClientError) as caught:
        client.publish({"x": 1}, topics=["any"])
    assert caught.value.status == 401


def test_the_cli_takes_the_key_from_its_flag_or_the_environment(server: EmbeddedServer) -> None:
    command = [sys.executable, "-m", "tidings.cli.main", "publish", "--url", server.url, "-t"]
    with_flag = subprocess.run(
        [*command, "sensors/a", "--key", "sensors", "x"], capture_output=True, text=True
    )
    from_env = subprocess.run(
        [*command, "alerts/a", "x"],
        capture_output=True,
        text=True,
        env={**os.environ, "TIDINGS_KEY": "sensors"},
    )
    refused = subprocess.run(
        [*command, "billing/a", "--key", "sensors", "x"], capture_output=True, text=True
    )
    assert (with_flag.returncode, from_env.returncode) == (0, 0), with_flag.stderr
    assert refused.returncode != 0 and "Traceback" not in refused.stderr


def test_a_dedup_id_is_its_publisher_keys_own(server: EmbeddedServer) -> None:
    registered = httpx.post(server.url + "/v1/subscribers", headers=bearer("reg-secret")).json()
    auth = {"Authorization": f"Bearer {registered['token']}"}
    base = f"{server.url}/v1/subscribers/{registered['id']}"
    httpx.post(base + "/subscriptions", json={"topics": ["sensors/dedup"]}, headers=auth)

    def publish(key: str, data: int) -> dict[str, object]:
        body = {"data": data, "topics": ["sensors/dedup"], "dedup_id": "reading-1"}
        answer = httpx.post(server.url + "/v1/publications", json=body, headers=bearer(key))
        assert answer.status_code == 201, answer.text
        return answer.json()  # type: ignore[no-any-return]

    # "ops" publishing first cannot take the id "sensors" names its reading by
    assert "duplicate" not in publish("ops", 1)
    assert "duplicate" not in publish("sensors", 2)
    assert publish("sensors", 3)["duplicate"] is True
    messages = httpx.get(base + "/messages", params={"max": 10}, headers=auth).json()["messages"]
    assert sorted(m["body"]["data"] for m in messages) == [1, 2]
