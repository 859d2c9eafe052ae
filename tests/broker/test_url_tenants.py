"""One tenant's URL functions cannot hold back another's: through the HTTP API of a real
broker, a subscriber whose many URL functions' endpoint holds every call has at most its
share of calls open there, and a neighbour's URL function answers and its match is
delivered meanwhile."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import orjson
import pytest
from tests.api.conftest import Sub

from tidings.config import load_settings
from tidings.server import EmbeddedServer

SUBSCRIPTIONS = 40  # the first tenant's, each to a path of its own (no breaker shared)


class Endpoint:
    """A URL function answering `{"match": true}` on any path: at once, or, holding, once
    the test releases it; it counts the calls it got and the most it held at once."""

    def __init__(self, holding: bool) -> None:
        self.release = threading.Event()
        if not holding:
            self.release.set()
        self.lock = threading.Lock()
        self.calls = self.open_now = self.most_open = 0
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}{path}"

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        endpoint = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # kept alive, as a real endpoint would

            def do_POST(self) -> None:
                self.rfile.read(int(self.headers["Content-Length"]))
                with endpoint.lock:
                    endpoint.calls += 1
                    endpoint.open_now += 1
                    endpoint.most_open = max(endpoint.most_open, endpoint.open_now)
                endpoint.release.wait(300)
                with endpoint.lock:
                    endpoint.open_now -= 1
                answer = orjson.dumps({"match": True})
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def log_message(self, *args: object) -> None:
                pass

        return Handler

    def close(self) -> None:
        self.release.set()
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def held() -> Iterator[Endpoint]:
    endpoint = Endpoint(holding=True)
    yield endpoint
    endpoint.close()


@pytest.fixture
def fast() -> Iterator[Endpoint]:
    endpoint = Endpoint(holding=False)
    yield endpoint
    endpoint.close()


def until(condition: Callable[[], bool], timeout_s: float = 60) -> bool:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def delivered(sub: Sub, publication_id: str, timeout_s: float = 60) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if any(m["publication_id"] == publication_id for m in sub.drain()):
            return True
        time.sleep(0.05)
    return False


def test_a_tenant_whose_url_calls_are_held_has_its_share_open_and_its_neighbour_is_delivered(
    tmp_path: Path, held: Endpoint, fast: Endpoint
) -> None:
    settings = load_settings(
        {
            "data_dir": tmp_path,
            "functions__url_allow_networks": "127.0.0.0/8",  # the endpoints are on loopback
            "functions__url_timeout_s": 300,  # held calls are released by the test, not cut
        },
        env={},
    )
    share = settings.functions.url_concurrency_per_subscriber
    assert share < SUBSCRIPTIONS < settings.functions.url_concurrency
    json = {"Content-Type": "application/json"}
    with (
        EmbeddedServer(settings) as server,
        httpx.Client(base_url=server.url, timeout=30, headers=json) as http,
    ):
        hog, neighbour = Sub(http), Sub(http)
        for n in range(SUBSCRIPTIONS):
            hog.subscribe(function={"function_type": "t", "url": held.url(f"/hog/{n}")})
        neighbour.subscribe(function={"function_type": "t", "url": fast.url("/match")})
        answer = http.post("/v1/publications", json={"data": "hello", "function_types": ["t"]})
        assert answer.status_code == 201, answer.text
        publication = answer.json()["id"]

        assert until(lambda: held.open_now == share), held.open_now
        assert delivered(neighbour, publication)
        assert (held.open_now, held.calls) == (share, share)  # still held; the rest wait

        held.release.set()
        assert until(lambda: held.calls == SUBSCRIPTIONS), held.calls
        assert delivered(hog, publication)
    assert held.most_open == share
