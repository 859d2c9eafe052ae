"""The OpenAPI document describes the routes the server really has."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from starlette.routing import Route

from tidings.api import compat, functions, v1
from tidings.model import Op

HTTP_ROUTES = {
    (method.lower(), route.path)
    for route in [*v1.routes, *compat.routes, *functions.routes]
    if isinstance(route, Route)
    for method in route.methods or ()
    if method != "HEAD"
}


@pytest.fixture(scope="module")
def spec(server: Any) -> dict[str, Any]:
    return httpx.get(server.url + "/openapi.json").json()  # type: ignore[no-any-return]


def operations(spec: dict[str, Any]) -> dict[tuple[str, str], dict[str, Any]]:
    return {(m, path): op for path, ops in spec["paths"].items() for m, op in ops.items()}


def test_every_route_is_documented(spec: dict[str, Any]) -> None:
    assert set(operations(spec)) >= HTTP_ROUTES


def test_every_operation_said_to_need_a_token_refuses_a_call_without_one(
    http: httpx.Client, spec: dict[str, Any]
) -> None:
    me = http.post("/v1/subscribers").json()
    for (method, path), op in operations(spec).items():
        if "security" not in op:
            continue
        body = {"subscriberId": me["id"]}
        url = path.format(subscriber_id=me["id"], subscription_id="x")
        response = http.request(method, url, json=body if method == "post" else None)
        assert response.status_code == 401, (method, path)


def test_the_pull_parameters_are_documented(spec: dict[str, Any]) -> None:
    pull = spec["paths"]["/v1/subscribers/{subscriber_id}/messages"]["get"]
    assert {p["name"] for p in pull["parameters"]} == {"subscriber_id", "max", "wait", "visibility"}


def test_the_documented_operators_are_the_models(spec: dict[str, Any]) -> None:
    body = spec["paths"]["/v1/subscribers/{subscriber_id}/subscriptions"]["post"]["requestBody"]
    schema = body["content"]["application/json"]["schema"]
    [predicates] = [s for s in schema["oneOf"] if "predicates" in s["properties"]]
    ops = predicates["properties"]["predicates"]["items"]["properties"]["op"]["enum"]
    assert set(ops) == {op.value for op in Op}
