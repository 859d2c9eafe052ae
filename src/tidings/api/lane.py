"""`POST /v1/publications` without the framework's per-request layers.

One publication per request is the hottest call a broker takes, and Starlette's routing,
request object, exception and middleware layers cost more broker time than the publish
itself (the profile is in docs/perf.md). This pure ASGI app answers that one route as the
routed handler (`api/v1.publish`) would: the same validation, errors, metrics and answer;
every other request goes on to the application. The routed handler stays, for the OpenAPI
document and for an application mounted without the lane.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING

import orjson
from starlette.types import ASGIApp, Receive, Scope, Send

from tidings.api import schemas as t
from tidings.api.io import parse_body
from tidings.api.v1 import publication_input, published_json
from tidings.errors import ErrorCode, TidingsError
from tidings.model import convert

if TYPE_CHECKING:
    from tidings.broker import Broker

log = logging.getLogger("tidings.api")
PATH = "/v1/publications"
HEADERS = [(b"content-type", b"application/json")]


class PublishLane:
    def __init__(self, app: ASGIApp, broker: Broker) -> None:
        self.app = app
        self.broker = broker
        self._timer = broker.metrics.http.labels(PATH, "POST")

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] != PATH or scope["method"] != "POST":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        try:
            status, body = 201, await self._publish(scope, receive)
        except TidingsError as exc:
            status, body = exc.status, orjson.dumps(exc.to_dict())
        except Exception:  # as `errors.Internal` answers it: a JSON 500, the connection kept
            log.exception("unhandled error on POST %s", PATH)
            status = 500
            body = orjson.dumps(TidingsError(ErrorCode.INTERNAL).to_dict())
        headers = [*HEADERS, (b"content-length", str(len(body)).encode())]
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": body})
        self._timer.observe(time.perf_counter() - started)
        self.broker.metrics.inc("http_requests", route=PATH, method="POST", status=str(status))

    async def _publish(self, scope: Scope, receive: Receive) -> bytes:
        settings = self.broker.settings
        body = await read_body(scope, receive, settings.limits.max_publication_bytes)
        raw = parse_body(body, header(scope, b"content-type"))
        convert(raw, t.PublicationBody)
        published = await self.broker.publish(publication_input(raw, settings))
        return orjson.dumps(published_json(published))


async def read_body(scope: Scope, receive: Receive, limit: int) -> bytes:
    """The request's body, refused with 413 as soon as it passes `limit` bytes."""
    for name, value in scope["headers"]:
        if name == b"content-length" and value.isdigit() and int(value) > limit:
            raise TidingsError(ErrorCode.PAYLOAD_TOO_LARGE, size=int(value), limit=limit)
    chunks, size = [], 0
    while True:
        message = await receive()
        if message["type"] != "http.request":  # the client went away
            raise TidingsError(ErrorCode.INVALID_JSON, detail="the request ended early")
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            raise TidingsError(ErrorCode.PAYLOAD_TOO_LARGE, size=f"more than {limit}", limit=limit)
        chunks.append(chunk)
        if not message.get("more_body", False):
            return chunks[0] if len(chunks) == 1 else b"".join(chunks)


def header(scope: Scope, name: bytes) -> str:
    for key, value in scope["headers"]:
        if key == name:
            return str(value.decode("latin-1"))
    return ""
