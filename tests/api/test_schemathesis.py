"""Schemathesis over every operation of the real server's /openapi.json: no 5xx, every
answer conforms to its documented schema, status code and content type. Seeded and small
here; `make fuzz` runs the same with many more examples (FUZZ_EXAMPLES)."""

from __future__ import annotations

import os
from typing import Any

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis import GenerationMode, checks
from starlette.routing import Route

from tidings.admin import admin_token
from tidings.api import thesis, v1
from tidings.server import EmbeddedServer

EXAMPLES = int(os.environ.get("FUZZ_EXAMPLES", "5"))
CHECKS = [
    checks.not_a_server_error,
    checks.response_schema_conformance,
    checks.status_code_conformance,
    checks.content_type_conformance,
]
ROUTES = [*v1.routes, *thesis.routes]
OPERATIONS = [
    *sorted(
        (method, route.path)
        for route in ROUTES
        if isinstance(route, Route)
        for method in route.methods or ()
        if method != "HEAD"
    ),
    ("GET", "/readyz"),
    ("GET", "/healthz"),
    ("GET", "/metrics"),
    ("GET", "/openapi.json"),
]

# nothing in these to break: no parameters, no body (a publication's progress takes any
# string as its id, and no token on an open broker)
NO_INPUT = {
    ("POST", "/api/RegisterSubscriber"),
    ("GET", "/v1/limits"),
    ("GET", "/v1/functions/builtins"),
    ("GET", "/v1/publications/{publication_id}"),
    *OPERATIONS[-4:],
}
CASES = [(*op, GenerationMode.POSITIVE) for op in OPERATIONS] + [
    (*op, GenerationMode.NEGATIVE) for op in OPERATIONS if op not in NO_INPUT
]


@pytest.fixture(scope="module")
def api_schema(server: EmbeddedServer) -> Any:
    return schemathesis.openapi.from_url(f"{server.url}/openapi.json")


# each case of these deletes its subscriber: it gets one of its own
DESTRUCTIVE = {
    ("DELETE", "/v1/subscribers/{subscriber_id}"),
    ("POST", "/api/UnregisterSubscriber"),
    ("DELETE", "/v1/admin/subscribers/{subscriber_id}"),
}
# called with the admin token (the simulations are not: a valid configuration would start
# one; with a subscriber's token they are refused, answering as documented all the same)
WITH_ADMIN_TOKEN = {
    ("GET", "/v1/admin/overview"),
    ("GET", "/v1/admin/subscribers"),
    ("DELETE", "/v1/admin/subscribers/{subscriber_id}"),
}


def registered(server: EmbeddedServer) -> dict[str, Any]:
    """A new subscriber with one subscription, so that calls reach past authentication and
    past the look-up of the subscription into each operation."""
    me: dict[str, Any] = httpx.post(f"{server.url}/v1/subscribers").json()
    auth = {"Authorization": f"Bearer {me['token']}"}
    sub = httpx.post(
        f"{server.url}/v1/subscribers/{me['id']}/subscriptions",
        json={"topics": ["fuzz/#"]},
        headers=auth,
    )
    return {**me, "subscription": sub.json()["id"], "auth": auth}


def as_subscriber(case: Any, me: dict[str, Any]) -> None:
    """The subscriber's ids in the path and the body, and its token."""
    path = case.path_parameters or {}
    if "subscriber_id" in path:
        path["subscriber_id"] = me["id"]
    if "subscription_id" in path:
        path["subscription_id"] = me["subscription"]
    if isinstance(case.body, dict) and "subscriberId" in case.body:
        case.body["subscriberId"] = me["id"]
    case.headers = {**(case.headers or {}), **me["auth"]}
    wait = (case.query or {}).get("wait")
    if isinstance(wait, int | float) and not isinstance(wait, bool):
        case.query["wait"] = min(wait, 0.01)  # a long poll would only cost time


@pytest.mark.parametrize(("method", "path", "mode"), CASES)
def test_every_operation_answers_as_documented(
    server: EmbeddedServer, api_schema: Any, method: str, path: str, mode: GenerationMode
) -> None:
    """Positive cases (valid by the schema) and negative ones (each breaks it somewhere)."""
    operation = api_schema[path][method]
    me = registered(server)

    @given(case=operation.as_strategy(generation_mode=mode))
    @settings(
        max_examples=EXAMPLES,
        derandomize=True,
        deadline=None,
        suppress_health_check=list(HealthCheck),
        database=None,
    )
    def call(case: Any) -> None:
        as_subscriber(case, registered(server) if (method, path) in DESTRUCTIVE else me)
        if (method, path) in WITH_ADMIN_TOKEN:
            token = admin_token("", server.settings.data_dir)[0]
            case.headers["Authorization"] = f"Bearer {token}"
        case.call_and_validate(checks=CHECKS)

    call()
