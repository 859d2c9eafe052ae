"""`tidings perf`: PerfTest-style load against Tidings or a peer broker, same workload for all."""

from __future__ import annotations

import asyncio
import contextlib
import signal
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import orjson
import typer

from tidings.sim.perf.targets import TARGETS  # names only: each target loads when chosen

# the load tool itself (numpy, the peers' clients) is imported when it runs, so that
# `tidings --help` and the other commands start at once
if TYPE_CHECKING:
    from tidings.sim.perf.stats import Second
    from tidings.sim.perf.traffic import Workload
    from tidings.sim.perf.trial import Summary

TargetName = Annotated[str, typer.Option("--target", "-t", help=f"One of: {', '.join(TARGETS)}.")]
Url = Annotated[
    str | None,
    typer.Option(
        help="The target's address (default: its standard local one; for Tidings, "
        "an embedded broker for the run)."
    ),
]


def perf(
    target: TargetName = "tidings",
    url: Url = None,
    producers: Annotated[int, typer.Option("--producers", "-x", help="Producers.")] = 1,
    consumers: Annotated[int, typer.Option("--consumers", "-y", help="Consumers.")] = 1,
    topics: Annotated[int, typer.Option(help="Topics; consumer i listens to topic i mod N.")] = 1,
    size: Annotated[int, typer.Option("--size", "-s", help="Message size in bytes.")] = 1024,
    rate: Annotated[float, typer.Option("--rate", "-r", help="Per producer, msg/s; 0 = max.")] = 0,
    duration: Annotated[float, typer.Option("--duration", "-z", help="Seconds of sending.")] = 10,
    confirm: Annotated[
        bool, typer.Option("--confirm", "-c", help="Wait for the broker's confirm.")
    ] = False,
    persistent: Annotated[bool, typer.Option(help="Durable queues, persistent messages.")] = False,
    inflight: Annotated[int, typer.Option(help="Outstanding sends per producer.")] = 64,
    batch: Annotated[
        int, typer.Option(help="Messages per send: one batch request, or pipelined publishes.")
    ] = 1,
    messages: Annotated[
        int, typer.Option(help="Per producer: stop after this many (0: at --duration).")
    ] = 0,
    offline: Annotated[
        bool,
        typer.Option(help="Consumers away while the producers send; then they drain it."),
    ] = False,
    selectivity: Annotated[
        float | None,
        typer.Option(help="Content workload: the fraction of messages each consumer wants."),
    ] = None,
    drain: Annotated[float, typer.Option(help="Seconds to wait for stragglers at the end.")] = 5,
    settle: Annotated[
        float,
        typer.Option(
            help="Seconds between subscribing and the first send (brokers behind a "
            "balancer see a new subscription within about a second)."
        ),
    ] = 0,
    seed: Annotated[int, typer.Option(help="Seed of the workload's randomness.")] = 1,
    processes: Annotated[
        int,
        typer.Option(help="Consumers in this many processes of their own (0: in this one)."),
    ] = 0,
    as_json: Annotated[bool, typer.Option("--json", help="The summary as one JSON line.")] = False,
    instance: Annotated[
        str | None,
        typer.Option(help="Label the result with the machine type (for `tidings cost`)."),
    ] = None,
) -> None:
    """Send and receive for a while; print rates and latency percentiles each second."""
    import uvloop

    from tidings.sim.perf.printout import rate_shortfall, summary_lines, summary_record
    from tidings.sim.perf.traffic import Workload

    workload = Workload(
        producers=producers, consumers=consumers, topics=topics, size=size, rate=rate,
        duration=duration, confirm=confirm, persistent=persistent, inflight=inflight,
        batch=batch, messages=messages, offline=offline, selectivity=selectivity, drain=drain,
        settle=settle,
        seed=seed, processes=processes,
    )  # fmt: skip
    with _address(target, url, size) as address:
        summary = uvloop.run(_run(target, address, workload, as_json))
    if as_json:
        typer.echo(orjson.dumps(summary_record(summary, workload, instance)).decode())
    else:
        for line in summary_lines(summary):
            typer.echo(line)
    short = rate_shortfall(summary, workload.rate * workload.producers)
    if short is not None:
        typer.echo(f"tidings: warning: {short}", err=True)


@contextlib.contextmanager
def _address(target: str, url: str | None, size: int) -> Iterator[str | None]:
    """Tidings without a URL: a broker process of its own (SQLite in a temporary directory),
    its publication limit raised to take messages of `size` (the RabbitMQ study's 2 MB)."""
    if not target.startswith("tidings") or url is not None:
        yield url
        return
    from tidings.config import Limits
    from tidings.ports import free_port
    from tidings.server import broker_processes

    limit = max(Limits().max_publication_bytes, size + ENVELOPE)
    env = {"TIDINGS_LIMITS__MAX_PUBLICATION_BYTES": str(limit)}
    with (
        tempfile.TemporaryDirectory(prefix="tidings-perf-") as data_dir,
        broker_processes([Path(data_dir)], [free_port()], env=env) as [(_, embedded_url)],
    ):
        yield embedded_url


async def _run(name: str, url: str | None, workload: Workload, quiet: bool) -> Summary:
    from tidings.sim.perf.printout import second_line
    from tidings.sim.perf.targets import make_target
    from tidings.sim.perf.trial import run

    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGINT, stop.set)

    def on_second(second: Second) -> None:
        typer.echo(second_line(second, workload.duration), err=quiet)

    return await run(make_target(name, url, workload), workload, on_second, stop)


ENVELOPE = 4096  # a publication's bytes around its data: topics, attributes, JSON syntax


def register(app: typer.Typer) -> None:
    app.command()(perf)
