"""The escape suite through a real server: hostile code functions subscribed over /v1, run on
publications that tell them where the broker's secrets are, while a benign function and a
topic subscription keep receiving. Whatever the code gets past, it reads or writes no file
outside, spawns nothing, opens no socket and sees none of the broker's environment."""

from __future__ import annotations

import dataclasses
import os
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from tests.api.conftest import Sub
from tests.sandbox.hostile import ATTACK, CLASS_PATTERN_CHAIN, CLASSIC, ENV_CANARY, fmt_route

from tidings.config import FunctionSettings, load_settings
from tidings.server import EmbeddedServer

BENIGN = "def match(publication):\n    return True\n"
SETTLE_S = 60.0


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedServer]:
    data_dir = tmp_path_factory.mktemp("broker-data")
    (data_dir / "secret.txt").write_text(f"canary-{uuid.uuid4()}")
    os.environ[ENV_CANARY] = "the broker's secret"
    settings = load_settings({"data_dir": data_dir}, env={})
    functions = FunctionSettings(workers=1, failures_to_suspend=1000)
    srv = EmbeddedServer(dataclasses.replace(settings, functions=functions)).__enter__()
    yield srv
    srv.__exit__(None, None, None)
    os.environ.pop(ENV_CANARY, None)


@pytest.fixture(scope="module")
def http(server: EmbeddedServer) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=server.url, timeout=30) as client:
        yield client


@pytest.fixture(scope="module")
def watchers(http: httpx.Client) -> tuple[Sub, Sub]:
    """A benign function subscriber (subscribed to each test's function type), and a topic
    subscriber also listening on `pwned`."""
    benign, topical = Sub(http), Sub(http)
    topical.subscribe(topics=["flow", "pwned"])
    return benign, topical


def written(server: EmbeddedServer, ftype: str) -> Path:
    return server.settings.data_dir / f"written-by-{ftype}"


def calls(server: EmbeddedServer) -> float:
    return server.broker.metrics.value("function_calls_total")


def publish_and_settle(
    http: httpx.Client,
    server: EmbeddedServer,
    watchers: tuple[Sub, Sub],
    ftype: str,
    marker: Path,
    n: int,
) -> list[dict[str, Any]]:
    """Publish one bait publication; wait until the benign function and the topic have
    delivered it and all `n` function calls are over; the topic subscriber's messages."""
    data = {
        "secret": str(server.settings.data_dir / "secret.txt"),
        "data_dir": str(server.settings.data_dir),
        "env": ENV_CANARY,
        "marker": str(marker),
        "write_to": str(written(server, ftype)),
        "port": server.settings.port,
    }
    before = calls(server)
    body = {"data": data, "topics": ["flow"], "function_types": [ftype]}
    published = http.post("/v1/publications", json=body)
    assert published.status_code == 201, published.text
    pid = published.json()["id"]
    got: list[list[dict[str, Any]]] = [[], []]
    deadline = time.monotonic() + SETTLE_S
    while time.monotonic() < deadline:
        for mine, sub in zip(got, watchers, strict=True):
            mine += sub.drain()
        flowing = all(any(m["publication_id"] == pid for m in mine) for mine in got)
        if flowing and calls(server) >= before + n:
            break
        time.sleep(0.1)
    assert all(any(m["publication_id"] == pid for m in mine) for mine in got), "flow stopped"
    assert calls(server) >= before + n, "every function call ended"
    time.sleep(0.5)  # a socket's publication would be committed by now
    return got[1] + watchers[1].drain()


def assert_contained(
    http: httpx.Client,
    server: EmbeddedServer,
    watchers: tuple[Sub, Sub],
    source: str,
    tmp_path: Path,
) -> None:
    ftype = f"escape-{uuid.uuid4().hex}"  # this test's hostile code runs on its bait only
    watchers[0].subscribe(function={"function_type": ftype, "code": BENIGN})
    hostile = Sub(http)
    function = {"function_type": ftype, "code": source}
    answer = hostile.post("/subscriptions", {"function": function})
    assert answer.status_code in (201, 422), answer.text
    if answer.status_code == 422:
        assert answer.json()["error"]["code"] == "function_forbidden"
    marker = tmp_path / "spawned"
    n = 2 if answer.status_code == 201 else 1
    seen = publish_and_settle(http, server, watchers, ftype, marker, n)
    assert hostile.pull() == [], "the hostile function matched: it saw a secret"
    assert not marker.exists(), "a process was spawned"
    assert not written(server, ftype).exists(), "a file was written"
    assert not [m for m in seen if "pwned" in m["body"]["topics"]], "a socket reached the broker"


def test_the_class_pattern_chain_to_the_workers_globals_escapes_nothing(
    http: httpx.Client, server: EmbeddedServer, watchers: tuple[Sub, Sub], tmp_path: Path
) -> None:
    assert_contained(http, server, watchers, CLASS_PATTERN_CHAIN + ATTACK, tmp_path)


def test_a_format_string_built_at_run_time_reads_nothing_of_the_environment(
    http: httpx.Client, server: EmbeddedServer, watchers: tuple[Sub, Sub], tmp_path: Path
) -> None:
    assert_contained(http, server, watchers, fmt_route("format"), tmp_path)


def test_format_bound_by_a_class_pattern_reads_nothing_of_the_environment(
    http: httpx.Client, server: EmbeddedServer, watchers: tuple[Sub, Sub], tmp_path: Path
) -> None:
    assert_contained(http, server, watchers, fmt_route("pattern"), tmp_path)


def test_format_map_reads_nothing_of_the_environment(
    http: httpx.Client, server: EmbeddedServer, watchers: tuple[Sub, Sub], tmp_path: Path
) -> None:
    assert_contained(http, server, watchers, fmt_route("format_map"), tmp_path)


@pytest.mark.parametrize("name", CLASSIC)
def test_classic_escapes_are_contained(
    http: httpx.Client, server: EmbeddedServer, watchers: tuple[Sub, Sub], tmp_path: Path, name: str
) -> None:
    assert_contained(http, server, watchers, CLASSIC[name], tmp_path)


def test_the_hostile_routes_are_refused_at_subscribe_time(http: httpx.Client) -> None:
    hostile = Sub(http)
    routes = ("format", "format_map", "pattern")
    for source in (CLASS_PATTERN_CHAIN + ATTACK, *map(fmt_route, routes)):
        answer = hostile.post(
            "/subscriptions", {"function": {"function_type": "escape", "code": source}}
        )
        assert answer.status_code == 422 and answer.json()["error"]["code"] == "function_forbidden"
