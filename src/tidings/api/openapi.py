"""The OpenAPI document, built from the routes and a few hand-kept body schemas."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import HTMLResponse, Response
from starlette.routing import Route

from tidings import __version__
from tidings.api.io import JSONResponse
from tidings.model import Op

OPS: dict[str, Any] = {"enum": [op.value for op in Op]}
SCALAR = {"oneOf": [{"type": "string"}, {"type": "number"}, {"type": "boolean"}]}
PREDICATE = {
    "type": "object",
    "required": ["key", "op"],
    "properties": {
        "key": {"type": "string"},
        "op": OPS,
        "value": {"oneOf": [SCALAR, {"type": "array", "items": SCALAR}]},
    },
}
PUBLICATION = {
    "type": "object",
    "properties": {
        "data": {"description": "any JSON value; binary as base64 text"},
        "topics": {"type": "array", "items": {"type": "string"}},
        "attributes": {"type": "object", "additionalProperties": SCALAR},
        "function_types": {"type": "array", "items": {"type": "string"}},
    },
}
FUNCTION = {
    "type": "object",
    "required": ["function_type"],
    "properties": {
        "function_type": {"type": "string"},
        "code": {"type": "string"},
        "url": {"type": "string"},
        "builtin": {"type": "string"},
        "params": {"type": "object"},
        "fail_open": {"type": "boolean"},
    },
}
SUBSCRIPTION = {
    "type": "object",
    "oneOf": [
        {
            "required": ["topics"],
            "properties": {"topics": {"type": "array", "items": {"type": "string"}}},
        },
        {
            "required": ["predicates"],
            "properties": {"predicates": {"type": "array", "items": PREDICATE}},
        },
        {"required": ["function"], "properties": {"function": FUNCTION}},
    ],
}
RECEIPTS = {
    "type": "object",
    "required": ["receipts"],
    "properties": {
        "receipts": {"type": "array", "items": {"type": "string"}},
        "delay": {"type": "number"},
    },
}
ERROR = {
    "type": "object",
    "properties": {
        "error": {
            "type": "object",
            "properties": {
                "code": {"type": "string"},
                "message": {"type": "string"},
                "field": {"type": ["string", "null"]},
            },
        }
    },
}


def _object(required: list[str], **properties: Any) -> dict[str, Any]:
    return {"type": "object", "required": required, "properties": properties}


STRINGS = {"type": "array", "items": {"type": "string"}}
SUBSCRIBER_ID = {"type": "string"}
COMPAT_CONTENT = {
    "type": "array",
    "items": _object(
        ["key", "value"],
        key={"type": "string"},
        value=SCALAR,
        condition=OPS,
    ),
}

BODIES: dict[tuple[str, str], dict[str, Any]] = {
    ("POST", "/api/UnregisterSubscriber"): _object(
        ["subscriberId"], subscriberId=SUBSCRIBER_ID, queueUrl={"type": "string"}
    ),
    ("POST", "/api/SubscribeTopics"): _object(
        ["subscriberId", "topics"], subscriberId=SUBSCRIBER_ID, topics=STRINGS
    ),
    ("POST", "/api/SubscribeContent"): _object(
        ["subscriberId", "content"], subscriberId=SUBSCRIBER_ID, content=COMPAT_CONTENT
    ),
    ("POST", "/api/SubscribeFunction"): _object(
        ["subscriberId", "functionType", "subscriptionTopic", "matchingFunction"],
        subscriberId=SUBSCRIBER_ID,
        functionType={"enum": ["url", "code", "builtin"]},
        subscriptionTopic={"type": "string"},
        matchingFunction={"type": "string"},
        parameters={"type": "object"},
    ),
    ("POST", "/api/PublishTopics"): _object(["message", "topics"], message={}, topics=STRINGS),
    ("POST", "/api/PublishContent"): _object(
        ["message", "content"], message={}, content=COMPAT_CONTENT
    ),
    ("POST", "/api/PublishFunctions"): _object(
        ["message", "subscriptionTopics"], message={}, subscriptionTopics=STRINGS
    ),
    ("POST", "/api/queues/{subscriber_id}/ack"): RECEIPTS,
    ("POST", "/v1/subscribers/{subscriber_id}/dead-letters/redrive"): _object(
        [], ids={"type": "array", "items": {"type": "integer"}}
    ),
    ("POST", "/v1/subscribers/{subscriber_id}/subscriptions"): SUBSCRIPTION,
    ("POST", "/v1/publications"): PUBLICATION,
    ("POST", "/v1/publications/batch"): {
        "type": "object",
        "properties": {"publications": {"type": "array", "items": PUBLICATION}},
    },
    ("POST", "/v1/subscribers/{subscriber_id}/messages/ack"): RECEIPTS,
    ("POST", "/v1/subscribers/{subscriber_id}/messages/nack"): RECEIPTS,
}

PULL = {
    "max": {"description": "at most this many messages (1-100)"},
    "wait": {"description": "seconds to wait for the first message (0-20)"},
}
QUERIES: dict[tuple[str, str], dict[str, dict[str, str]]] = {
    ("GET", "/v1/subscribers/{subscriber_id}/messages"): {
        **PULL,
        "visibility": {"description": "seconds the messages stay leased"},
    },
    ("GET", "/api/queues/{subscriber_id}"): PULL,
    ("GET", "/v1/subscribers/{subscriber_id}/dead-letters"): {
        "limit": {"description": "at most this many dead letters"}
    },
}


def _operation(route: Route, method: str) -> dict[str, Any]:
    doc = (route.endpoint.__doc__ or route.name).strip().splitlines()[0]
    op: dict[str, Any] = {
        "summary": doc,
        "operationId": f"{route.name}_{method.lower()}",
        "responses": {
            "2XX": {"description": "success"},
            "4XX": {
                "description": "client error",
                "content": {"application/json": {"schema": ERROR}},
            },
        },
    }
    params = [
        {"name": p, "in": "path", "required": True, "schema": {"type": "string"}}
        for p in route.param_convertors
    ]
    params += [
        {"name": name, "in": "query", "required": False, "schema": {"type": "number"}, **doc}
        for name, doc in QUERIES.get((method, route.path), {}).items()
    ]
    schema = BODIES.get((method, route.path))
    if params:
        op["parameters"] = params
    if schema is not None:
        op["requestBody"] = {"content": {"application/json": {"schema": schema}}}
    if "{subscriber_id}" in route.path or "subscriberId" in str(schema):
        op["security"] = [{"bearer": []}]
    return op


def document(routes: list[Route]) -> dict[str, Any]:
    paths: dict[str, dict[str, Any]] = {}
    for route in routes:
        for method in sorted((route.methods or set()) - {"HEAD"}):
            paths.setdefault(route.path, {})[method.lower()] = _operation(route, method)
    return {
        "openapi": "3.1.0",
        "info": {"title": "Tidings", "version": __version__},
        "paths": paths,
        "components": {"securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}}},
    }


DOCS_HTML = """<!doctype html><html><head><title>Tidings API</title><meta charset="utf-8">
<link rel="stylesheet" href="https://unpkg.com/swagger-ui-dist@5/swagger-ui.css"></head>
<body><div id="ui"></div><script src="https://unpkg.com/swagger-ui-dist@5/swagger-ui-bundle.js">
</script><script>SwaggerUIBundle({url: "/openapi.json", dom_id: "#ui"});</script>
<noscript>The machine-readable document is at <a href="/openapi.json">/openapi.json</a>.</noscript>
</body></html>"""


async def openapi_json(request: Request) -> Response:
    """The OpenAPI document."""
    return JSONResponse(request.app.state.openapi)


async def docs(request: Request) -> Response:
    """Interactive API documentation (Swagger UI, loaded by the browser)."""
    return HTMLResponse(DOCS_HTML)
