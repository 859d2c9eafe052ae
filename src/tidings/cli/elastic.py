"""`tidings matcher | exit-point` (operators joining an elastic deployment from another
machine) and `tidings cluster status | scale`."""

from __future__ import annotations

import asyncio
import sys
from typing import Annotated, Any

import orjson
import typer

from tidings.errors import ErrorCode, TidingsError

ZOOKEEPER = typer.Option(
    "--zookeeper", envvar="TIDINGS_ZOOKEEPER", help="ZooKeeper's HOST:PORT[,HOST:PORT...]."
)
CLUSTER = typer.Option("--cluster", envvar="TIDINGS_CLUSTER", help="The deployment's name.")
BIND = typer.Option(
    "--bind",
    help="The inbox's ZeroMQ address (a free port with *; tcp://0.0.0.0:* to be reached "
    "from other machines).",
)

SESSION = typer.Option(
    "--session-timeout",
    min=1.0,
    max=3600.0,
    help="Seconds of the ZooKeeper session (the server keeps it within 2 to 20 ticks): a "
    "process that dies is noticed by then at the latest (usually sooner: the access points' "
    "processes watch their peers' connections).",
)

KEY_FILE = typer.Option(
    "--key-file",
    help="The deployment's cluster key (a copy of the broker's data_dir/elastic-cluster.key): "
    "its channels are then CURVE. Needed to bind beyond loopback.",
)

cluster_app = typer.Typer(help="An elastic deployment: status and scaling.", no_args_is_help=True)


def _say(line: dict[str, Any]) -> None:
    typer.echo(orjson.dumps(line).decode())
    sys.stdout.flush()


def _check_bind(bind: str) -> str:
    if not bind.startswith(("tcp://", "ipc://")):
        raise TidingsError(
            ErrorCode.CONFIG_INVALID, field="bind", detail="--bind is tcp://HOST:PORT or ipc://PATH"
        )
    return bind


def _operator(
    role: str,
    zookeeper: str,
    cluster: str,
    bind: str,
    name: str | None,
    store: str,
    session_timeout_s: float,
    key_file: str,
) -> None:
    from tidings.elastic.coordination.coordinator import parse_hosts
    from tidings.elastic.hosting.process import run_operator
    from tidings.elastic.protocol.channels import beyond_loopback

    parse_hosts(zookeeper)
    _check_bind(bind)
    if beyond_loopback(bind) and not key_file:
        detail = (
            f"--bind {bind} is reachable from other machines: give --key-file (a copy of the "
            "broker's data_dir/elastic-cluster.key) so the channels are CURVE, or bind loopback"
        )
        raise TidingsError(ErrorCode.CONFIG_INVALID, field="bind", detail=detail)

    def started(op: Any) -> None:
        address = op.inbox.address if op.inbox is not None else ""
        _say({"operator": op.id, "role": role, "cluster": cluster, "address": address})

    asyncio.run(
        run_operator(
            role, zookeeper, cluster, bind, name, store, started, session_timeout_s, key_file
        )
    )


def matcher(
    zookeeper: Annotated[str, ZOOKEEPER],
    cluster: Annotated[str, CLUSTER] = "default",
    bind: Annotated[str, BIND] = "tcp://127.0.0.1:*",
    name: Annotated[str | None, typer.Option("--name", help="Its id (default: a new one).")] = None,
    session_timeout: Annotated[float, SESSION] = 10.0,
    key_file: Annotated[str, KEY_FILE] = "",
) -> None:
    """Run a matcher that joins a running elastic deployment (unassigned until a scale)."""
    _operator("matcher", zookeeper, cluster, bind, name, "", session_timeout, key_file)


def exit_point(
    zookeeper: Annotated[str, ZOOKEEPER],
    store: Annotated[str, typer.Option("--store", help="The broker's store URL (shared).")],
    cluster: Annotated[str, CLUSTER] = "default",
    bind: Annotated[str, BIND] = "tcp://127.0.0.1:*",
    name: Annotated[str | None, typer.Option("--name", help="Its id (default: a new one).")] = None,
    session_timeout: Annotated[float, SESSION] = 10.0,
    key_file: Annotated[str, KEY_FILE] = "",
) -> None:
    """Run an exit point that joins a running elastic deployment and enqueues into `--store`."""
    _operator("exit_point", zookeeper, cluster, bind, name, store, session_timeout, key_file)


@cluster_app.command("status")
def status(
    zookeeper: Annotated[str, ZOOKEEPER],
    cluster: Annotated[str, CLUSTER] = "default",
) -> None:
    """The views, the running operators and the scale in progress, as JSON."""
    from tidings.elastic.coordination.coordinator import Coordinator
    from tidings.elastic.hosting.deployment import cluster_status

    async def run() -> dict[str, Any]:
        coordinator = Coordinator(zookeeper, cluster)
        await coordinator.start()
        try:
            return await cluster_status(coordinator)
        finally:
            await coordinator.close()

    _say(asyncio.run(run()))


@cluster_app.command("scale")
def scale(
    zookeeper: Annotated[str, ZOOKEEPER],
    matchers: Annotated[int | None, typer.Option("--matchers", min=1, max=64)] = None,
    exit_points: Annotated[int | None, typer.Option("--exit-points", min=1, max=64)] = None,
    cluster: Annotated[str, CLUSTER] = "default",
) -> None:
    """Scale the matchers and/or exit points to these numbers.

    Operators already running (`tidings matcher`, `tidings exit-point`) are taken in for any
    added. To let the serving broker start local ones, use the admin call
    POST /v1/admin/cluster/scale."""
    if matchers is None and exit_points is None:
        raise TidingsError(
            ErrorCode.INVALID_FIELD, field="matchers", detail="give --matchers and/or --exit-points"
        )
    from tidings.elastic.coordination.coordinator import Coordinator
    from tidings.elastic.protocol.scaling import scale_with_running

    async def run() -> list[dict[str, object]]:
        coordinator = Coordinator(zookeeper, cluster)
        await coordinator.start()
        try:
            reports = await scale_with_running(coordinator, matchers, exit_points)
            return [r.to_json() for r in reports]
        finally:
            await coordinator.close()

    for report in asyncio.run(run()):
        _say(report)


def register(app: typer.Typer) -> None:
    app.command("matcher")(matcher)
    app.command("exit-point")(exit_point)
    app.add_typer(cluster_app, name="cluster")
