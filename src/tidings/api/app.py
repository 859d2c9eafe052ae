"""The ASGI application factory."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import BaseRoute, Route

from tidings.api import compat, functions, openapi, v1
from tidings.api import schemas as t
from tidings.api.errors import HANDLERS, Internal
from tidings.api.io import JSONResponse
from tidings.api.schemas import Operation, described
from tidings.broker import Broker


@described(Operation(answer=t.Health))
async def healthz(request: Request) -> Response:
    """Liveness: the broker answers."""
    return JSONResponse({"status": "ok"})


@described(Operation(media="text/plain"))
async def metrics(request: Request) -> Response:
    """Prometheus metrics: publications, deliveries, queue depths, matching time."""
    broker: Broker = request.app.state.broker
    text = broker.metrics.render(await broker.gauges())
    return PlainTextResponse(text, media_type="text/plain; version=0.0.4")


def create_app(broker: Broker) -> Starlette:
    """The app around a broker that is not yet started; the app's lifespan starts and
    closes it."""
    ops: list[BaseRoute] = [
        Route("/healthz", healthz, methods=["GET"]),
        Route("/metrics", metrics, methods=["GET"]),
        Route("/openapi.json", openapi.openapi_json, methods=["GET"]),
        Route("/docs", openapi.docs, methods=["GET"]),
    ]
    routes = [*ops, *v1.routes, *compat.routes, *functions.routes]

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        await broker.start()
        try:
            yield
        finally:
            await broker.close()

    app = Starlette(
        routes=routes,
        exception_handlers=dict(HANDLERS),
        middleware=[Middleware(Internal)],
        lifespan=lifespan,
    )
    app.state.broker = broker
    described = [r for r in routes if isinstance(r, Route)]
    app.state.openapi = openapi.document(described, broker.settings)
    return app
