"""A real Tidings server on loopback (SQLite in a temporary directory) per test module."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tidings.admin import admin_token
from tidings.config import QueueSettings, load_settings
from tidings.server import EmbeddedServer


def start(tmp: Path, **queues: Any) -> EmbeddedServer:
    settings = load_settings({"data_dir": tmp}, env={})
    settings = dataclasses.replace(settings, queues=QueueSettings(**queues))
    return EmbeddedServer(settings).__enter__()


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedServer]:
    srv = start(tmp_path_factory.mktemp("broker"), max_attempts=2)
    yield srv
    srv.__exit__(None, None, None)


@pytest.fixture
def admin(server: EmbeddedServer) -> dict[str, str]:
    """The admin token's header (the one the broker made at its first start)."""
    token, _ = admin_token("", server.settings.data_dir)
    return {"Authorization": f"Bearer {token}"}


@pytest.fixture(scope="module")
def local(tmp_path_factory: pytest.TempPathFactory) -> Iterator[httpx.Client]:
    """A client of a broker whose operator lets webhooks and URL functions reach this
    machine (loopback is denied by default)."""
    loopback = {"webhooks__allow_networks": "127.0.0.0/8"}
    loopback |= {"functions__url_allow_networks": "127.0.0.0/8"}
    settings = load_settings({"data_dir": tmp_path_factory.mktemp("local"), **loopback}, env={})
    with (
        EmbeddedServer(settings) as srv,
        httpx.Client(
            base_url=srv.url, timeout=30, headers={"Content-Type": "application/json"}
        ) as client,
    ):
        yield client


@pytest.fixture
def http(server: EmbeddedServer) -> Iterator[httpx.Client]:
    # raw bodies (`content=`) are declared JSON, as every client of the broker must
    json_type = {"Content-Type": "application/json"}
    with httpx.Client(base_url=server.url, timeout=30, headers=json_type) as client:
        yield client


class Sub:
    """A registered subscriber seen through raw HTTP."""

    def __init__(self, http: httpx.Client) -> None:
        raw = http.post("/v1/subscribers").json()
        self.http, self.id, self.token = http, raw["id"], raw["token"]
        self.auth = {"Authorization": f"Bearer {self.token}"}
        self.base = f"/v1/subscribers/{self.id}"

    def post(self, path: str, body: Any = None) -> httpx.Response:
        return self.http.post(self.base + path, json=body, headers=self.auth)

    def get(self, path: str, **params: Any) -> httpx.Response:
        return self.http.get(self.base + path, params=params, headers=self.auth)

    def subscribe(self, **body: Any) -> dict[str, Any]:
        response = self.post("/subscriptions", body)
        assert response.status_code == 201, response.text
        return response.json()  # type: ignore[no-any-return]

    def pull(self, **params: Any) -> list[dict[str, Any]]:
        params.setdefault("max", 100)
        return self.get("/messages", **params).json()["messages"]  # type: ignore[no-any-return]

    def drain(self) -> list[dict[str, Any]]:
        """Pull and acknowledge everything ready."""
        messages = self.pull()
        if messages:
            self.post("/messages/ack", {"receipts": [m["receipt"] for m in messages]})
        return messages


@pytest.fixture
def sub(http: httpx.Client) -> Sub:
    return Sub(http)
