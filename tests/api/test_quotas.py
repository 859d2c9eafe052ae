"""Quotas through the API on a real server: registrations per client address, open streams
per subscriber and in all."""

from __future__ import annotations

import contextlib
import dataclasses
import json
from collections.abc import Iterator

import httpx
import pytest
from websockets.sync.client import ClientConnection, connect

from tidings.config import Limits, load_settings
from tidings.server import EmbeddedServer


def started(tmp: pytest.TempPathFactory, limits: Limits) -> EmbeddedServer:
    settings = load_settings({"data_dir": tmp.mktemp("quotas")}, env={})
    return EmbeddedServer(dataclasses.replace(settings, limits=limits))


@pytest.fixture
def limited(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedServer]:
    limits = Limits(registrations_per_minute=3, rate_limit_loopback=True)
    with started(tmp_path_factory, limits) as srv:
        yield srv


@pytest.fixture
def streams(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedServer]:
    with started(tmp_path_factory, Limits(max_streams=2, max_streams_per_subscriber=1)) as srv:
        yield srv


def test_registrations_from_one_address_are_rate_limited_with_retry_after(
    limited: EmbeddedServer,
) -> None:
    made = [httpx.post(f"{limited.url}/v1/subscribers") for _ in range(3)]
    refused = httpx.post(f"{limited.url}/v1/subscribers")
    thesis = httpx.post(f"{limited.url}/api/RegisterSubscriber")  # the same bucket
    assert [r.status_code for r in made] == [201, 201, 201]
    assert (refused.status_code, refused.json()["error"]["code"]) == (429, "rate_limited")
    assert int(refused.headers["retry-after"]) >= 1
    assert thesis.status_code == 429


def test_loopback_clients_are_not_rate_limited_unless_asked(streams: EmbeddedServer) -> None:
    codes = {httpx.post(f"{streams.url}/v1/subscribers").status_code for _ in range(70)}
    assert codes == {201}


@contextlib.contextmanager
def opened(server: EmbeddedServer) -> Iterator[ClientConnection]:
    """A subscriber's stream, once it delivers: counted by the broker by then."""
    raw = httpx.post(f"{server.url}/v1/subscribers").json()
    auth = {"Authorization": f"Bearer {raw['token']}"}
    base = f"/v1/subscribers/{raw['id']}"
    httpx.post(f"{server.url}{base}/subscriptions", json={"topics": [raw["id"]]}, headers=auth)
    url = server.url.replace("http://", "ws://") + f"{base}/stream"
    with connect(url, additional_headers=auth) as ws:
        httpx.post(f"{server.url}/v1/publications", json={"topics": [raw["id"]]})
        assert json.loads(ws.recv(timeout=10))["type"] == "messages"
        yield ws


def refusal(ws: ClientConnection) -> str:
    said = json.loads(ws.recv(timeout=10))
    assert said["type"] == "error"
    return str(said["error"]["code"])


def test_a_subscriber_s_second_stream_is_refused_and_its_first_kept(
    streams: EmbeddedServer,
) -> None:
    raw = httpx.post(f"{streams.url}/v1/subscribers").json()
    url = streams.url.replace("http://", "ws://") + f"/v1/subscribers/{raw['id']}/stream"
    auth = {"Authorization": f"Bearer {raw['token']}"}
    with (
        connect(url, additional_headers=auth) as first,
        connect(url, additional_headers=auth) as second,
    ):
        assert refusal(second) == "limit_exceeded"
        first.ping().wait(timeout=10)  # the first is still open


def test_streams_past_the_broker_s_limit_are_refused(streams: EmbeddedServer) -> None:
    with opened(streams) as one, opened(streams) as two:
        raw = httpx.post(f"{streams.url}/v1/subscribers").json()
        url = streams.url.replace("http://", "ws://") + f"/v1/subscribers/{raw['id']}/stream"
        with connect(url, additional_headers={"Authorization": f"Bearer {raw['token']}"}) as three:
            assert refusal(three) == "limit_exceeded"
        one.ping().wait(timeout=10)
        two.ping().wait(timeout=10)
