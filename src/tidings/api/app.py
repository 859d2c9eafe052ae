"""The ASGI application factory."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from tidings import console
from tidings.api import metrics, openapi, thesis, v1
from tidings.api.answers import answer
from tidings.api.errors import HANDLERS, Internal
from tidings.api.operations import Operation, described
from tidings.api.v1.admin import Simulator
from tidings.broker import Broker
from tidings.delivery.webhooks import Webhooks
from tidings.errors import ErrorCode, TidingsError
from tidings.wire.base import Health, Ready


@described(Operation(answer=Health))
async def healthz(request: Request) -> Response:
    """Liveness: the broker answers."""
    return answer(Health("ok"))


@described(Operation(answer=Ready))
async def readyz(request: Request) -> Response:
    """Readiness: the broker answers and its store answers within a second (503 if not).
    `?partition=k`: and it owns that partition of the queues (a balancer's check)."""
    broker: Broker = request.app.state.broker
    await broker.overview.check_store(timeout_s=1.0)
    asked = request.query_params.get("partition")
    if asked is not None and not broker.overview.owns_partition(asked):
        raise TidingsError(ErrorCode.UNAVAILABLE, detail=f"partition {asked} is not owned here")
    return answer(Ready("ready"))


def create_app(broker: Broker, simulator: Simulator | None = None) -> Starlette:
    """The app around a broker that is not yet started; the app's lifespan starts and
    closes it. Without a `simulator`, the admin's simulation calls answer 404."""
    ops: list[BaseRoute] = [
        Route("/healthz", healthz, methods=["GET"]),
        Route("/readyz", readyz, methods=["GET"]),
        Route("/metrics", metrics.metrics, methods=["GET"]),
        Route("/openapi.json", openapi.openapi_json, methods=["GET"]),
        Route("/docs", openapi.docs, methods=["GET"]),
    ]
    api = [*v1.routes, *thesis.routes]
    routes = [*ops, *api, *console.routes()]
    pushers = Webhooks(broker.outlet())

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        await broker.start()
        try:
            await pushers.start()
            yield
        finally:
            await pushers.close()  # before the broker: they release their leases through it
            if simulator is not None:
                simulator.runs.close()
            await broker.close()

    app = Starlette(
        routes=routes,
        exception_handlers=dict(HANDLERS),
        # outermost first: the metrics count the 500 that `Internal` answers
        middleware=[Middleware(metrics.HTTPMetrics, metrics=broker.metrics), Middleware(Internal)],
        lifespan=lifespan,
    )
    app.state.broker = broker
    app.state.simulator = simulator
    app.state.webhooks = pushers
    app.state.described_routes = [r for r in [*ops, *api] if isinstance(r, Route)]
    return app
