"""The admin calls under /v1/admin, guarded by the admin token (tidings.admin): the
broker's overview, the subscribers with their queues and last activity, deletion, and
simulations run against this broker (tidings.sim.background)."""

from __future__ import annotations

import dataclasses
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from tidings.api import schemas as t
from tidings.api.io import JSONResponse, base_url, bearer, body_as, query_as
from tidings.api.schemas import Operation, described
from tidings.broker import Broker
from tidings.config import Settings
from tidings.environment import machine, versions
from tidings.errors import ErrorCode, TidingsError
from tidings.sim.background import Simulations
from tidings.sim.config import parse_config

CONFIG_LIMIT = 1024 * 1024
VERSIONS = ("starlette", "uvicorn", "orjson", "numpy", "psycopg", "prometheus-client")


def admin(request: Request) -> Broker:
    broker: Broker = request.app.state.broker
    broker.authenticate_admin(bearer(request))
    return broker


@described(Operation(answer=t.Overview, token=True))
async def overview(request: Request) -> Response:
    """The broker at a glance: subscribers, subscriptions, queues, suspended functions."""
    broker = admin(request)
    snapshot = await broker.gauges()
    counters = ("publications", "deliveries_leased", "deliveries_acked", "function_calls")
    totals = {name: broker.metrics.value(name) for name in counters}
    totals["deliveries_enqueued"] = sum(
        broker.metrics.value("deliveries_enqueued", kind=kind)
        for kind in ("topic", "content", "function")
    )
    return JSONResponse(
        {
            "subscribers": snapshot.subscribers,
            "subscriptions": snapshot.subscriptions,
            "queues": {"ready": snapshot.ready, "leased": snapshot.leased, "dead": snapshot.dead},
            "oldest_message_age_s": snapshot.oldest_age_s,
            "suspended": [
                {
                    "id": s.id,
                    "subscriber_id": s.subscriber_id,
                    "function_type": s.function.function_type if s.function else None,
                    "reason": s.status_reason,
                }
                for s in broker.suspended()
            ],
            "counters": totals,
            "settings": shown_settings(broker.settings),
            "versions": versions(*VERSIONS),
            "machine": machine(),
        }
    )


def shown_settings(settings: Settings) -> dict[str, Any]:
    """The settings, minus the admin token and any password in the store URL."""
    shown = dataclasses.asdict(settings)
    shown.pop("admin_token")
    shown["data_dir"] = str(settings.data_dir)
    shown["store_url"] = without_password(settings.resolved_store_url)
    return shown


def without_password(url: str) -> str:
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.replace(f":{parts.password}@", ":***@")
    return urlunsplit(parts._replace(netloc=netloc))


@described(Operation(query=t.subscribers_query, answer=t.SubscribersPage, token=True))
async def subscribers(request: Request) -> Response:
    """Subscribers in id order, a page at a time, with their queues and last activity."""
    broker = admin(request)
    q = query_as(request, t.SubscribersQuery)
    page = await broker.subscribers_page(q.after, q.limit)
    limit = q.limit
    return JSONResponse(
        {
            "subscribers": [
                {
                    "id": record.id,
                    "created_at": record.created_at,
                    "last_seen": record.last_seen,
                    "ephemeral": record.ephemeral,
                    "depth": dataclasses.asdict(depth),
                }
                for record, depth in page
            ],
            "next": page[-1][0].id if len(page) == limit else None,
        }
    )


@described(Operation(status=204, token=True))
async def delete_subscriber(request: Request) -> Response:
    """Delete a subscriber, its subscriptions and its queue."""
    broker = admin(request)
    await broker.unregister(request.path_params["subscriber_id"])  # 404 if there is none
    return Response(status_code=204)


@described(Operation(t.SimulationBody, answer=t.Simulation, status=202, token=True))
async def start_simulation(request: Request) -> Response:
    """Run a simulator configuration (native or the thesis's) against this broker."""
    admin(request)
    _, body = await body_as(request, t.SimulationBody, CONFIG_LIMIT)
    config = parse_config(body.config)
    own_url = base_url(request, "")  # the broker the console is talking to, whatever it said
    simulation = simulations_of(request).start(config, own_url)
    return JSONResponse(simulation.state(), status_code=202)


@described(Operation(answer=t.Simulation, token=True))
async def simulation(request: Request) -> Response:
    """A simulation's state: running, done or failed; its progress and summary."""
    admin(request)
    found = simulations_of(request).get(request.path_params["simulation_id"])
    return JSONResponse(found.state())


@described(Operation(answer=dict[str, Any], token=True))
async def simulation_summary(request: Request) -> Response:
    """The finished run's summary, as a file to keep."""
    admin(request)
    found = simulations_of(request).get(request.path_params["simulation_id"])
    summary = found.summary()
    if summary is None:
        raise TidingsError(ErrorCode.NOT_FOUND, detail="the simulation has no summary yet")
    disposition = f'attachment; filename="simulation-{found.id}.json"'
    return JSONResponse(summary, headers={"Content-Disposition": disposition})


class ClusterScaleBody(t.Body):
    matchers: int | None = None
    exit_points: int | None = None


def _elastic(broker: Broker) -> Any:
    if broker.elastic is None:
        raise TidingsError(
            ErrorCode.NOT_FOUND,
            detail="this broker does not match elastically (--matching elastic)",
        )
    return broker.elastic


@described(Operation(answer=dict[str, Any], token=True))
async def cluster(request: Request) -> Response:
    """The elastic deployment: its views, running operators and the scale in progress."""
    broker = admin(request)
    return JSONResponse(await _elastic(broker).status())


@described(Operation(ClusterScaleBody, answer=dict[str, Any], token=True))
async def cluster_scale(request: Request) -> Response:
    """Scale the elastic matchers and/or exit points to these numbers (1 to 64 each)."""
    broker = admin(request)
    _, body = await body_as(request, ClusterScaleBody, CONFIG_LIMIT)
    if body.matchers is None and body.exit_points is None:
        raise TidingsError(ErrorCode.MISSING_FIELD, field="matchers")
    reports = await _elastic(broker).scale(body.matchers, body.exit_points)
    return JSONResponse({"scales": [r.to_json() for r in reports]})


def simulations_of(request: Request) -> Simulations:
    return request.app.state.simulations  # type: ignore[no-any-return]


routes = [
    Route("/v1/admin/overview", overview, methods=["GET"]),
    Route("/v1/admin/subscribers", subscribers, methods=["GET"]),
    Route("/v1/admin/subscribers/{subscriber_id}", delete_subscriber, methods=["DELETE"]),
    Route("/v1/admin/simulations", start_simulation, methods=["POST"]),
    Route("/v1/admin/simulations/{simulation_id}", simulation, methods=["GET"]),
    Route("/v1/admin/simulations/{simulation_id}/summary", simulation_summary, methods=["GET"]),
    Route("/v1/admin/cluster", cluster, methods=["GET"]),
    Route("/v1/admin/cluster/scale", cluster_scale, methods=["POST"]),
]
