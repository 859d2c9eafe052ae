"""Fuzzing every HTTP route with bad bodies: never a 500, always a JSON error that names
its code, its message and a field slot."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from starlette.routing import Route

from tidings.api import thesis, v1
from tidings.api.v1 import admin, webhooks
from tidings.server import EmbeddedServer

OWN_TESTS = {id(r) for r in [*admin.routes, *webhooks.routes]}  # test_schemathesis's
ROUTES = [
    (method, route.path)
    for route in [*v1.routes, *thesis.routes]
    if isinstance(route, Route) and id(route) not in OWN_TESTS
    for method in sorted(route.methods or ())
    if method != "HEAD"
]

FIXED: list[bytes] = [
    b"{nope",
    b"\xff\xfe\xfd",
    b"",
    b"[1, 2]",
    b'"text"',
    b"null",
    b"1e999999",
    b"NaN",
    b"[" * 5000,
    b'{"a": 1, "a": 2}',
    b'{"\xc3\x28": 1}',
]

FIELDS = [
    "subscriberId",
    "queueUrl",
    "topics",
    "content",
    "message",
    "receipts",
    "predicates",
    "function",
    "data",
    "attributes",
    "function_types",
    "publications",
    "ids",
    "delay",
    "functionType",
    "subscriptionTopic",
    "matchingFunction",
    "parameters",
    "subscriptionTopics",
    "key",
    "value",
    "condition",
    "url",
    "text",
    "image",
]

SCALARS = st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20)
VALUES = st.recursive(
    SCALARS,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)


@pytest.fixture(scope="module")
def client(server: EmbeddedServer) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=server.url, timeout=30) as http:
        yield http


class Caller:
    """Sends a body to one route as a registered subscriber, with real ids in the path."""

    def __init__(self, http: httpx.Client, method: str, path: str) -> None:
        me = http.post("/v1/subscribers").json()
        self.http, self.method, self.id = http, method, me["id"]
        self.path = path.format(
            subscriber_id=me["id"], subscription_id="nope", publication_id="nope"
        )
        self.headers = {"Authorization": f"Bearer {me['token']}"}

    def send(self, body: bytes) -> httpx.Response:
        return self.http.request(self.method, self.path, content=body, headers=self.headers)


def assert_client_error_or_success(response: httpx.Response) -> None:
    assert response.status_code < 500, response.text
    if response.status_code >= 400:
        error = response.json()["error"]
        assert isinstance(error["code"], str) and isinstance(error["message"], str)
        assert "field" in error


@pytest.mark.parametrize(("method", "path"), ROUTES)
def test_malformed_bodies_are_client_errors_on_every_route(
    client: httpx.Client, method: str, path: str
) -> None:
    caller = Caller(client, method, path)
    for body in FIXED:
        assert_client_error_or_success(caller.send(body))
    assert client.get("/healthz").status_code == 200


@pytest.mark.slow
@pytest.mark.parametrize(("method", "path"), ROUTES)
def test_json_of_the_wrong_shape_is_a_client_error_on_every_route(
    client: httpx.Client, method: str, path: str
) -> None:
    caller = Caller(client, method, path)

    @settings(max_examples=15, deadline=None, suppress_health_check=list(HealthCheck))
    @given(body=st.dictionaries(st.sampled_from(FIELDS), VALUES | st.just(caller.id), max_size=5))
    def fuzz(body: dict[str, Any]) -> None:
        assert_client_error_or_success(caller.send(json.dumps(body).encode()))

    fuzz()


def test_a_streamed_oversize_body_is_refused_before_it_is_read_whole(
    client: httpx.Client,
) -> None:
    def chunks() -> Iterator[bytes]:
        yield b'{"data": "'
        for _ in range(64):
            yield b"x" * 8192
        yield b'"}'

    json_type = {"Content-Type": "application/json"}
    response = client.post("/v1/publications", content=chunks(), headers=json_type)
    assert (response.status_code, response.json()["error"]["code"]) == (413, "payload_too_large")
