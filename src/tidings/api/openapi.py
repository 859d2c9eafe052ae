"""The OpenAPI document, generated from the types the handlers validate requests with
(`tidings.wire`), so the document and the validation cannot drift."""

from __future__ import annotations

from typing import Any, cast

import msgspec
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response
from starlette.routing import Route

from tidings import __version__
from tidings.api.answers import answer
from tidings.api.operations import DESCRIBED, Operation, described
from tidings.config import Settings
from tidings.wire.base import ErrorAnswer
from tidings.wire.v1 import Messages, StreamFrame

REF = "#/components/schemas/{name}"
ERROR = {"$ref": REF.format(name="ErrorAnswer")}


def document(routes: list[Route], settings: Settings) -> dict[str, Any]:
    """Every route with its path and query parameters, its body, its answers and their types."""
    described_routes = [(r, DESCRIBED.get(r.endpoint, Operation())) for r in routes]
    types = _types(described_routes, settings)
    generated, components = msgspec.json.schema_components(types, ref_template=REF)
    schema_of = dict(zip(map(id, types), generated, strict=True))
    paths: dict[str, dict[str, Any]] = {}
    for route, op in described_routes:
        for method in sorted((route.methods or set()) - {"HEAD"}):
            paths.setdefault(route.path, {})[method.lower()] = _operation(
                route, method, op, settings, schema_of, components
            )
    return {
        "openapi": "3.1.0",
        "info": {"title": "Tidings", "version": __version__},
        "paths": paths,
        "components": {
            "schemas": components,
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
        },
        "x-websockets": {"/v1/subscribers/{subscriber_id}/stream": _stream(schema_of)},
    }


def _types(routes: list[tuple[Route, Operation]], settings: Settings) -> list[Any]:
    found: list[Any] = [ErrorAnswer, StreamFrame, Messages]
    for _, op in routes:
        found += [x for x in (op.body, op.answer) if x is not None]
        if op.query is not None:
            found.append(op.query(settings.queues))
    return list({id(x): x for x in found}.values())


def _operation(
    route: Route,
    method: str,
    op: Operation,
    settings: Settings,
    schema_of: dict[int, Any],
    components: dict[str, Any],
) -> dict[str, Any]:
    doc = (route.endpoint.__doc__ or route.name).strip().splitlines()[0]
    out: dict[str, Any] = {
        "summary": doc,
        "operationId": f"{route.name}_{method.lower()}",
        "responses": _responses(op, schema_of),
    }
    params = [
        {"name": p, "in": "path", "required": True, "schema": {"type": "string"}}
        for p in route.param_convertors
    ]
    if op.query is not None:
        query = components[op.query(settings.queues).__name__]
        params += [
            {"name": name, "in": "query", "required": False, "schema": schema}
            for name, schema in query["properties"].items()
        ]
    params += [
        {"name": name, "in": "header", "required": False, "schema": {"type": "string"}}
        for name in op.headers
    ]
    if params:
        out["parameters"] = params
    if op.body is not None:
        out["requestBody"] = {
            "required": op.body_required,
            "content": {
                media: {"schema": schema_of[id(op.body)]}
                for media in ("application/json", *op.body_media)
            },
        }
    if op.token:
        out["security"] = [{"bearer": []}]
    return out


def _responses(op: Operation, schema_of: dict[int, Any]) -> dict[str, Any]:
    success: dict[str, Any] = {"description": "success"}
    if op.status != 204:
        schema = schema_of[id(op.answer)] if op.answer is not None else {}
        success["content"] = {media: {"schema": schema} for media in (op.media, *op.answer_media)}
    error = {"content": {"application/json": {"schema": ERROR}}}
    return {
        str(op.status): success,
        "4XX": {"description": "the client's mistake: the error names its field", **error},
        "5XX": {"description": "unavailable", **error},
    }


def _stream(schema_of: dict[int, Any]) -> dict[str, Any]:
    """The WebSocket stream, which OpenAPI cannot describe as an operation."""
    return {
        "summary": "Push stream: messages as they arrive, acknowledged on the same socket",
        "parameters": [
            {
                "name": "token",
                "in": "query",
                "schema": {"type": "string"},
                "description": "the bearer token, if no Authorization header can be sent",
            },
            {
                "name": "prefetch",
                "in": "query",
                "schema": {"type": "integer", "minimum": 1, "maximum": 10000},
                "description": "at most this many messages unacknowledged at once",
            },
        ],
        "x-server-frames": {
            "oneOf": [
                {
                    "description": 'a leased batch: {"type": "messages", "messages": [...]}',
                    **schema_of[id(Messages)],
                },
                {"description": 'a refused frame: {"type": "error", "error": {...}}', **ERROR},
            ]
        },
        "x-client-frames": schema_of[id(StreamFrame)],
        "x-close-codes": {"4401": "no token", "4403": "another's token", "4404": "no subscriber"},
    }


SWAGGER = "/ui/vendor/swagger-ui"  # vendored in the package: /docs works offline
DOCS_HTML = f"""<!doctype html><html><head><title>Tidings API</title><meta charset="utf-8">
<link rel="stylesheet" href="{SWAGGER}/swagger-ui.css"></head>
<body><div id="ui"></div><script src="{SWAGGER}/swagger-ui-bundle.js"></script>
<script src="{SWAGGER}/docs.js"></script>
<noscript>The machine-readable document is at <a href="/openapi.json">/openapi.json</a>.</noscript>
</body></html>"""


# Swagger UI's own files only, never framed (clickjacking), no content sniffing
DOCS_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'self'; img-src 'self' data:; style-src 'self' 'unsafe-inline'; "
        "script-src 'self'; connect-src 'self'; object-src 'none'; base-uri 'none'; "
        "frame-ancestors 'none'"
    ),
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
}


@described(Operation(answer=dict[str, Any]))
async def openapi_json(request: Request) -> Response:
    """The OpenAPI document."""
    return answer(document_of(request.app))


def document_of(app: Starlette) -> dict[str, Any]:
    """The app's document, made at its first request (20 ms of a function's cold start)."""
    state = app.state
    if getattr(state, "openapi", None) is None:
        state.openapi = document(state.described_routes, state.broker.settings)
    return cast(dict[str, Any], state.openapi)


@described(Operation(media="text/html"))
async def docs(request: Request) -> Response:
    """Interactive API documentation (Swagger UI, loaded by the browser)."""
    return HTMLResponse(DOCS_HTML, headers=DOCS_HEADERS)
