"""`POST /v1/publications` in front of the application, without the framework's layers.

One publication per request is the hottest call a broker takes, and Starlette's routing,
request object, exception and middleware layers cost more broker time than the publish
itself (the profile is in docs/perf.md). This pure ASGI app hands that one route straight to
its endpoint (`tidings.api.v1.publications.publish`, itself pure ASGI: the route serves the
same function within the application), counting and timing it as the metrics middleware
would; every other request goes on to the application.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from starlette.types import ASGIApp, Receive, Scope, Send

from tidings.api.v1.publications import PATH, publish

if TYPE_CHECKING:
    from tidings.broker import Broker


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
        status = await publish.answer(self.broker, scope, receive, send)
        self._timer.observe(time.perf_counter() - started)
        self.broker.metrics.inc("http_requests", route=PATH, method="POST", status=str(status))
