"""`/metrics`, and the middleware that counts and times every HTTP request by its route
template (`/v1/subscribers/{subscriber_id}/messages`, never the ids: bounded cardinality)."""

from __future__ import annotations

import time

from prometheus_client import CONTENT_TYPE_LATEST
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from tidings.api.io import bearer
from tidings.api.operations import Operation, described
from tidings.broker import Broker
from tidings.metrics import Metrics

UNMATCHED = "unmatched"  # requests no route took (404s): one label, whatever their paths


@described(Operation(media=CONTENT_TYPE_LATEST.split(";", 1)[0]))
async def metrics(request: Request) -> Response:
    """Prometheus metrics: publications, deliveries, queues, latencies, HTTP, process; the
    deepest queues by subscriber id only with the admin token (ids are not for everyone)."""
    broker: Broker = request.app.state.broker
    admin = broker.auth.is_admin(bearer(request))
    body = broker.metrics.render(await broker.overview.gauges(per_subscriber=admin))
    return Response(body, media_type=CONTENT_TYPE_LATEST)


class HTTPMetrics:
    """Pure ASGI middleware (no per-request objects beyond what the request needs)."""

    def __init__(self, app: ASGIApp, metrics: Metrics) -> None:
        self.app, self.metrics = app, metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started, status = time.perf_counter(), 500

        async def sent(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, sent)
        finally:
            route = scope.get("route")
            template = getattr(route, "path", UNMATCHED)
            method = scope["method"]
            self.metrics.http.labels(template, method).observe(time.perf_counter() - started)
            self.metrics.inc("http_requests", route=template, method=method, status=str(status))
