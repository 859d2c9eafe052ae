"""The admin calls under /v1/admin, guarded by the admin token (tidings.admin): the
broker's overview, the subscribers with their queues and last activity, deletion, and
simulations run against this broker (by the `Simulator` the composition root gives the app:
`tidings.server` gives `tidings.sim.background`'s)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, Protocol
from urllib.parse import urlsplit, urlunsplit

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from tidings.api import answers
from tidings.api.answers import answer
from tidings.api.io import base_url, bearer, body_as, query_as
from tidings.api.operations import Operation, described
from tidings.broker import Broker
from tidings.config import Settings
from tidings.environment import machine, versions
from tidings.errors import ErrorCode, TidingsError
from tidings.wire import admin as w

CONFIG_LIMIT = 1024 * 1024
VERSIONS = ("starlette", "uvicorn", "orjson", "numpy", "psycopg", "prometheus-client")


class SimulationRun(Protocol):
    """A simulation started by a `Simulator`."""

    @property
    def id(self) -> str: ...
    def state(self) -> dict[str, Any]:
        """id, status, progress, summary and error (`tidings.wire.admin.Simulation`)."""
        ...

    def summary(self) -> dict[str, Any] | None: ...


class Simulations(Protocol):
    def start(self, config: Any, broker_url: str) -> SimulationRun:
        """Start a run of a parsed configuration against the broker at `broker_url`."""
        ...

    def get(self, simulation_id: str) -> SimulationRun: ...
    def close(self) -> None: ...


@dataclasses.dataclass(frozen=True, slots=True)
class Simulator:
    """What the simulation calls run on: the runs, and how a configuration (native or the
    thesis's) is parsed and checked before one starts (a 422 naming its field)."""

    runs: Simulations
    parse: Callable[[dict[str, Any]], Any]


def admin(request: Request) -> Broker:
    broker: Broker = request.app.state.broker
    broker.authenticate_admin(bearer(request))
    return broker


@described(Operation(answer=w.Overview, token=True))
async def overview(request: Request) -> Response:
    """The broker at a glance: subscribers, subscriptions, queues, suspended functions."""
    broker = admin(request)
    snapshot = await broker.overview.gauges(per_subscriber=True)  # the admin sees whose queues
    counters = (
        "publications",
        "deliveries_leased",
        "deliveries_acked",
        "function_calls",
        "simulated_publications",  # a simulator's (Tidings-Simulation), counted in the above too
        "simulated_deliveries",
    )
    totals = {name: broker.metrics.value(name) for name in counters}
    totals["deliveries_enqueued"] = sum(
        broker.metrics.value("deliveries_enqueued", kind=kind)
        for kind in ("topic", "content", "function")
    )
    suspended = [
        w.SuspendedFunction(
            s.id,
            s.subscriber_id,
            s.function.function_type if s.function else None,
            s.status_reason,
        )
        for s in broker.suspended()
    ]
    queues = answers.depth(snapshot)
    shown = w.Overview(
        snapshot.subscribers,
        snapshot.subscriptions,
        queues,
        snapshot.oldest_age_s,
        suspended,
        totals,
        shown_settings(broker.settings),
        versions(*VERSIONS),
        machine(),
    )
    return answer(shown)


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


@described(Operation(query=w.subscribers_query, answer=w.SubscribersPage, token=True))
async def subscribers(request: Request) -> Response:
    """Subscribers in id order, a page at a time, with their queues and last activity;
    all, or only the real ones, or only those a simulator made (`origin`)."""
    broker = admin(request)
    q = query_as(request, w.SubscribersQuery)
    page = await broker.overview.subscribers_page(q.after, q.limit, q.origin)
    records = [
        w.SubscriberRecord(
            record.id,
            record.created_at,
            record.last_seen,
            record.ephemeral,
            answers.depth(depth),
            record.simulation,
        )
        for record, depth in page
    ]
    after = page[-1][0].id if len(page) == q.limit else None
    return answer(w.SubscribersPage(records, after))


@described(Operation(status=204, token=True))
async def delete_subscriber(request: Request) -> Response:
    """Delete a subscriber, its subscriptions and its queue."""
    broker = admin(request)
    await broker.unregister(request.path_params["subscriber_id"])  # 404 if there is none
    return Response(status_code=204)


@described(Operation(w.SimulationBody, answer=w.Simulation, status=202, token=True))
async def start_simulation(request: Request) -> Response:
    """Run a simulator configuration (native or the thesis's) against this broker."""
    admin(request)
    _, body = await body_as(request, w.SimulationBody, CONFIG_LIMIT)
    simulator = simulator_of(request)
    config = simulator.parse(body.config)
    own_url = base_url(request, "")  # the broker the console is talking to, whatever it said
    simulation = simulator.runs.start(config, own_url)
    return answer(simulation.state(), 202)


@described(Operation(answer=w.Simulation, token=True))
async def simulation(request: Request) -> Response:
    """A simulation's state: running, done or failed; its progress and summary."""
    admin(request)
    found = simulator_of(request).runs.get(request.path_params["simulation_id"])
    return answer(found.state())


@described(Operation(answer=dict[str, Any], token=True))
async def simulation_summary(request: Request) -> Response:
    """The finished run's summary, as a file to keep."""
    admin(request)
    found = simulator_of(request).runs.get(request.path_params["simulation_id"])
    summary = found.summary()
    if summary is None:
        raise TidingsError(ErrorCode.NOT_FOUND, detail="the simulation has no summary yet")
    disposition = f'attachment; filename="simulation-{found.id}.json"'
    return answer(summary, headers={"Content-Disposition": disposition})


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
    return answer(await _elastic(broker).status())


@described(Operation(w.ClusterScaleBody, answer=dict[str, Any], token=True))
async def cluster_scale(request: Request) -> Response:
    """Scale the elastic matchers and/or exit points to these numbers (1 to 64 each)."""
    broker = admin(request)
    _, body = await body_as(request, w.ClusterScaleBody, CONFIG_LIMIT)
    if body.matchers is None and body.exit_points is None:
        raise TidingsError(ErrorCode.MISSING_FIELD, field="matchers")
    reports = await _elastic(broker).scale(body.matchers, body.exit_points)
    return answer({"scales": [r.to_json() for r in reports]})


def simulator_of(request: Request) -> Simulator:
    simulator: Simulator | None = request.app.state.simulator
    if simulator is None:
        raise TidingsError(ErrorCode.NOT_FOUND, detail="this broker runs no simulations")
    return simulator


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
