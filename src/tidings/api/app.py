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
from tidings.api import admin, compat, functions, metrics, openapi, v1, webhooks
from tidings.api import schemas as t
from tidings.api.errors import HANDLERS, Internal
from tidings.api.io import JSONResponse
from tidings.api.schemas import Operation, described
from tidings.broker import Broker
from tidings.delivery.webhooks import Webhooks
from tidings.sim.background import Simulations


@described(Operation(answer=t.Health))
async def healthz(request: Request) -> Response:
    """Liveness: the broker answers."""
    return JSONResponse({"status": "ok"})


@described(Operation(answer=t.Ready))
async def readyz(request: Request) -> Response:
    """Readiness: the broker answers and its store answers within a second (503 if not)."""
    broker: Broker = request.app.state.broker
    await broker.check_store(timeout_s=1.0)
    return JSONResponse({"status": "ready"})


def create_app(broker: Broker) -> Starlette:
    """The app around a broker that is not yet started; the app's lifespan starts and
    closes it."""
    ops: list[BaseRoute] = [
        Route("/healthz", healthz, methods=["GET"]),
        Route("/readyz", readyz, methods=["GET"]),
        Route("/metrics", metrics.metrics, methods=["GET"]),
        Route("/openapi.json", openapi.openapi_json, methods=["GET"]),
        Route("/docs", openapi.docs, methods=["GET"]),
    ]
    api = [*v1.routes, *webhooks.routes, *admin.routes, *compat.routes, *functions.routes]
    routes = [*ops, *api, *console.routes()]
    simulations = Simulations(broker.settings.data_dir / "simulations")
    pushers = Webhooks(broker.outlet())

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        await broker.start()
        try:
            await pushers.start()
            yield
        finally:
            await pushers.close()  # before the broker: they release their leases through it
            simulations.close()
            await broker.close()

    app = Starlette(
        routes=routes,
        exception_handlers=dict(HANDLERS),
        # outermost first: the metrics count the 500 that `Internal` answers
        middleware=[Middleware(metrics.HTTPMetrics, metrics=broker.metrics), Middleware(Internal)],
        lifespan=lifespan,
    )
    app.state.broker = broker
    app.state.simulations = simulations
    app.state.webhooks = pushers
    described_routes = [r for r in [*ops, *api] if isinstance(r, Route)]
    app.state.openapi = openapi.document(described_routes, broker.settings)
    return app
