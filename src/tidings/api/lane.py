"""`POST /v1/publications` and `POST /v1/publications/batch` in front of the application,
without the framework's layers.

Publishing is the hottest call a broker takes, and Starlette's routing, request object,
exception and middleware layers cost more broker time than a publish itself, or a tenth of
the broker's time for batches of ten (the profiles are in docs/perf.md). This pure ASGI app
hands those two routes straight to their endpoints (`tidings.api.v1.publications.publish`
and `publish_batch`, themselves pure ASGI: the routes serve the same objects within the
application), counting and timing them as the metrics middleware would; every other
request goes on to the application.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from starlette.types import ASGIApp, Receive, Scope, Send

from tidings.api.v1.publications import Endpoint, publish, publish_batch

if TYPE_CHECKING:
    from prometheus_client import Histogram

    from tidings.broker import Broker


ENDPOINTS: dict[str, Endpoint] = {e.path: e for e in (publish, publish_batch)}


class PublishLane:
    def __init__(self, app: ASGIApp, broker: Broker) -> None:
        self.app = app
        self.broker = broker
        self._timers: dict[str, Histogram] = {
            path: broker.metrics.http.labels(path, "POST") for path in ENDPOINTS
        }

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope.get("path", "")
        endpoint = ENDPOINTS.get(path)
        if endpoint is None or scope["type"] != "http" or scope["method"] != "POST":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = await endpoint.answer(self.broker, scope, receive, send)
        self._timers[path].observe(time.perf_counter() - started)
        self.broker.metrics.inc("http_requests", route=path, method="POST", status=str(status))
