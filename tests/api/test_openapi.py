"""The OpenAPI document describes the routes the server really has."""

from __future__ import annotations

import dataclasses
import re
from typing import Any

import httpx
import pytest
from starlette.routing import Route

from tidings.api import openapi, thesis, v1
from tidings.model import Op

HTTP_ROUTES = {
    (method.lower(), route.path)
    for route in [*v1.routes, *thesis.routes]
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


def test_operation_ids_are_unique_snake_case_names(spec: dict[str, Any]) -> None:
    """Clients generated from the document name their methods after these: an endpoint
    made a class must keep its route's name (`publish_batch_post`, not `PublishBatch_post`)."""
    ids = [op["operationId"] for op in operations(spec).values()]
    assert len(ids) == len(set(ids))
    assert [i for i in ids if not re.fullmatch(r"[a-z][a-z0-9_]*", i)] == []
    assert operations(spec)[("post", "/v1/publications/batch")]["operationId"] == (
        "publish_batch_post"
    )


def test_every_operation_said_to_need_a_token_refuses_a_call_without_one(
    http: httpx.Client, spec: dict[str, Any]
) -> None:
    me = http.post("/v1/subscribers").json()
    for (method, path), op in operations(spec).items():
        if "security" not in op:
            continue
        body = {"subscriberId": me["id"]}
        url = path.format(subscriber_id=me["id"], subscription_id="x", simulation_id="x")
        response = http.request(method, url, json=body if method == "post" else None)
        assert response.status_code == 401, (method, path)


def test_the_pull_parameters_are_documented(spec: dict[str, Any]) -> None:
    pull = spec["paths"]["/v1/subscribers/{subscriber_id}/messages"]["get"]
    names = {p["name"] for p in pull["parameters"]}
    documented = {"subscriber_id", "max", "wait", "visibility", "form", "encoding", "max_bytes"}
    assert names == documented


def test_the_documented_operators_are_the_models(spec: dict[str, Any]) -> None:
    predicate = spec["components"]["schemas"]["Predicate"]
    assert set(predicate["properties"]["op"]["enum"]) >= {op.value for op in Op}


def test_every_body_has_a_schema_and_says_whether_it_is_required(spec: dict[str, Any]) -> None:
    for (method, path), op in operations(spec).items():
        if method != "post":
            continue
        if path.endswith("/resume") or path == "/api/RegisterSubscriber":
            assert "requestBody" not in op, path  # they read no body
            continue
        body = op["requestBody"]
        assert body["content"]["application/json"]["schema"], path
        assert body["required"] is (path not in OPTIONAL_BODIES), path


OPTIONAL_BODIES = {"/v1/subscribers", "/v1/subscribers/{subscriber_id}/dead-letters/redrive"}


def test_every_answer_has_a_schema_and_errors_have_the_error_shape(spec: dict[str, Any]) -> None:
    error = spec["components"]["schemas"]["ErrorDetail"]
    assert set(error["required"]) == {"code", "message", "field"}
    for (method, path), op in operations(spec).items():
        [success] = [code for code in op["responses"] if code.startswith("2")]
        if success != "204":
            assert op["responses"][success]["content"], (method, path)
        assert op["responses"]["4XX"]["content"]["application/json"]["schema"] == {
            "$ref": "#/components/schemas/ErrorAnswer"
        }


def test_the_limits_are_declared_as_minimum_and_maximum(spec: dict[str, Any]) -> None:
    pull = spec["paths"]["/v1/subscribers/{subscriber_id}/messages"]["get"]["parameters"]
    by_name = {p["name"]: p["schema"] for p in pull}
    limits = {k: by_name["max"][k] for k in ("type", "minimum", "maximum")}
    assert limits == {"type": "integer", "minimum": 1, "maximum": 100}
    assert (by_name["wait"]["minimum"], by_name["wait"]["maximum"]) == (0, 20)
    assert (by_name["visibility"]["minimum"], by_name["visibility"]["maximum"]) == (0, 43200)
    nack = spec["components"]["schemas"]["NackBody"]["properties"]["delay"]
    assert (nack["minimum"], nack["maximum"]) == (0, 43200)


def test_the_function_routes_describe_their_body(spec: dict[str, Any]) -> None:
    body = spec["paths"]["/api/DetectLanguages"]["post"]["requestBody"]
    assert body["content"]["application/json"]["schema"] == {
        "$ref": "#/components/schemas/FunctionCallBody"
    }


def test_the_stream_is_described(spec: dict[str, Any]) -> None:
    stream = spec["x-websockets"]["/v1/subscribers/{subscriber_id}/stream"]
    assert stream["x-client-frames"] == {"$ref": "#/components/schemas/StreamFrame"}


def test_the_interactive_docs_are_served(http: httpx.Client) -> None:
    response = http.get("/docs")
    assert response.status_code == 200 and "/openapi.json" in response.text


def test_the_limits_follow_the_settings(tmp_path: Any) -> None:
    from tidings.api.app import create_app
    from tidings.broker import Broker
    from tidings.config import QueueSettings, load_settings
    from tidings.store import open_store

    settings = load_settings({"data_dir": tmp_path}, env={})
    settings = dataclasses.replace(settings, queues=QueueSettings(max_pull=7))
    document = openapi.document_of(create_app(Broker(settings, open_store("memory://"))))
    pull = document["paths"]["/v1/subscribers/{subscriber_id}/messages"]["get"]
    assert {p["name"]: p["schema"].get("maximum") for p in pull["parameters"]}["max"] == 7


def test_every_route_declares_the_types_it_reads_and_answers() -> None:
    from tidings.api import app, metrics, openapi
    from tidings.api.operations import DESCRIBED

    routes = [*v1.routes, *thesis.routes]
    endpoints = [route.endpoint for route in routes if isinstance(route, Route)]
    others = [app.healthz, app.readyz, metrics.metrics, openapi.openapi_json, openapi.docs]
    assert all(endpoint in DESCRIBED for endpoint in [*endpoints, *others])
