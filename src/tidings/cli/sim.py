"""`tidings sim CONFIG`, `tidings scenarios`, `tidings experiment NAME` (docs/sim.md).

`sim` and `experiment` draw their live line on stderr on a terminal only, and end with a
table on stdout, or with `--json` with one JSON object. `experiment` also says each point on
stderr, and (not with `--json` or `--no-progress`) each stage of its analysis with its time."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any, cast

import typer
from rich.console import Console
from rich.table import Table

from tidings.cli.progress import cell, emit, on_terminal
from tidings.errors import invalid

Url = Annotated[
    str | None,
    typer.Option(help="Broker URL (default: the config's, else an embedded broker for the run)."),
]
Runs = Annotated[Path, typer.Option(help="Where run directories are made.")]
Quiet = Annotated[bool, typer.Option("--no-progress", help="No live progress line.")]
Json = Annotated[
    bool, typer.Option("--json", help="The summary as one JSON object; no progress line.")
]


def sim(
    config: Annotated[Path, typer.Argument(help="Simulator config (native or the thesis's).")],
    url: Url = None,
    processes: Annotated[int, typer.Option(help="Spread subscribers over N processes.")] = 1,
    duration: Annotated[float | None, typer.Option(help="Override the config's duration.")] = None,
    runs: Runs = Path("runs"),
    no_progress: Quiet = False,
    progress_file: Annotated[
        Path | None, typer.Option(help="Also write the live progress to this JSON file.")
    ] = None,
    as_json: Json = False,
) -> None:
    """Run subscribers and publishers against a broker and record every delivery."""
    import msgspec

    from tidings.sim import rundir
    from tidings.sim.config import check, load_config
    from tidings.sim.simulation import RunOptions, run

    if processes < 1:
        raise invalid("--processes", "must be at least 1")
    settings = load_config(config)
    if duration is not None:
        settings = check(msgspec.structs.replace(settings, duration=duration))
    run_dir = rundir.create(runs, settings.name)
    from tidings.server import embedded_broker

    live = not (no_progress or as_json) and on_terminal()
    options = RunOptions(url, processes, live, progress_file, embedded_broker)
    outcome = run(settings, run_dir, options)
    if as_json:
        emit(outcome.summary | {"run_dir": str(run_dir)})
        return
    print_summary(outcome.summary, run_dir)


def print_summary(summary: dict[str, Any], run_dir: Path) -> None:
    console = Console()
    table = Table(title=f"{summary['name']}: {summary['seconds']} s", show_edge=False)
    for column in ("matching", "deliveries", "p50 ms", "p95 ms", "p99 ms", "max ms"):
        table.add_column(column, justify="left" if column == "matching" else "right")
    rows = summary["latency_by_kind"] | {"all": summary["latency"]}
    for kind, row in rows.items():
        cells = [row[k] for k in ("count", "p50_ms", "p95_ms", "p99_ms", "max_ms")]
        table.add_row(kind, *("-" if c is None else str(c) for c in cells))
    console.print(table)
    stopped = " (interrupted: partial)" if summary["interrupted"] else ""
    console.print(
        f"{summary['publications']} publications, {summary['deliveries']} deliveries to "
        f"{summary['subscribers']} subscribers, {summary['redelivered']} redelivered, "
        f"{summary['publish_errors']} publish errors{stopped}\nrun directory: {run_dir}"
    )


def scenarios(
    url: Url = None,
    only: Annotated[
        list[str] | None, typer.Option(help="Run only these (topic, content, function, ...).")
    ] = None,
    timeout: Annotated[float, typer.Option(help="Seconds to wait for each scenario.")] = 30.0,
    api: Annotated[
        str,
        typer.Option(help="native (/v1) or thesis (the thesis's /api operations and counts)."),
    ] = "native",
    receive: Annotated[
        str,
        typer.Option(
            help="stream (WebSocket push) or pull (long polls, as the thesis's subscribers "
            "polled their queues; what a broker running as functions serves)."
        ),
    ] = "stream",
) -> None:
    """The thesis's correctness scenarios: expected against received counts.

    Exit 1 on any mismatch."""
    from tidings.sim.scenarios import APIS, RECEIVES, suite

    if api not in APIS:
        raise invalid("--api", f"{api!r} is not one of {', '.join(APIS)}")
    if receive not in RECEIVES:
        raise invalid("--receive", f"{receive!r} is not one of {', '.join(RECEIVES)}")
    chosen = select(suite(), only)
    rows = with_broker(url, lambda live: _suite(live, chosen, timeout, api, receive))
    print_rows(rows)
    bad = [r for r in rows if not r.ok]
    if bad:
        names = ", ".join(f"{r.scenario}/{r.subscriber}" for r in bad)
        typer.echo(f"tidings: {len(bad)} mismatch(es): {names}", err=True)
        raise typer.Exit(1)


def select(every: list[Any], only: list[str] | None) -> list[Any]:
    if not only:
        return every
    known = {s.name: s for s in every}
    for i, name in enumerate(only):
        if name not in known:
            raise invalid(f"--only[{i}]", f"no scenario {name!r}; known: {', '.join(known)}")
    return [known[name] for name in only]


def _suite(url: str, chosen: list[Any], timeout: float, api: str, receive: str) -> list[Any]:
    import asyncio

    from tidings.client import TidingsClientError
    from tidings.errors import ErrorCode, TidingsError
    from tidings.sim.scenarios import run_suite

    try:
        return asyncio.run(run_suite(url, chosen, timeout, api, receive))
    except TidingsClientError as exc:
        raise TidingsError(ErrorCode.UNAVAILABLE, detail=f"{exc.message} ({url})") from None


def with_broker(url: str | None, work: Any) -> Any:
    """`work(url)` against `url`, or against an embedded broker in a temporary directory."""
    if url is not None:
        return work(url.rstrip("/"))
    import tempfile

    from tidings.config import load_settings
    from tidings.server import EmbeddedServer

    with tempfile.TemporaryDirectory(prefix="tidings-scenarios-") as tmp:
        settings = load_settings({"data_dir": Path(tmp), "event_log": False})
        with EmbeddedServer(settings) as server:
            return work(server.url)


def print_rows(rows: list[Any]) -> None:
    console = Console()
    for scenario in dict.fromkeys(r.scenario for r in rows):
        table = Table(title=f"scenario: {scenario}", show_edge=False)
        for column in ("subscriber", "subscriptions", "expected", "thesis", "received", ""):
            table.add_column(column)
        for r in (r for r in rows if r.scenario == scenario):
            mark = "[green]ok[/]" if r.ok else "[bold red]MISMATCH[/]"
            table.add_row(r.subscriber, r.subscriptions, str(r.expected), str(r.thesis),
                          str(r.received), mark)  # fmt: skip
        console.print(table)


def experiment(
    name: Annotated[str, typer.Argument(help="publication-rate, subscribers or payload.")],
    matching: Annotated[
        list[str] | None, typer.Option(help="topic, content, function (default: all three).")
    ] = None,
    quick: Annotated[bool, typer.Option(help="Fewer, shorter points (a smoke run).")] = False,
    analytics: Annotated[str, typer.Option(help="auto (Spark if present), spark, numpy.")] = "auto",
    url: Url = None,
    processes: Annotated[int, typer.Option(help="Spread subscribers over N processes.")] = 1,
    runs: Runs = Path("runs"),
    no_progress: Quiet = False,
    as_json: Json = False,
) -> None:
    """One of the thesis's end-to-end experiments: CSV/JSON tables and PNG plots."""
    from tidings.sim import rundir
    from tidings.sim.experiments import KINDS, Analytics, ExperimentSettings, run_experiment
    from tidings.sim.experiments import experiment as find

    spec, kinds = find(name), matching or list(KINDS)
    for i, kind in enumerate(kinds):
        if kind not in KINDS:
            raise invalid(f"--matching[{i}]", f"expected one of {', '.join(KINDS)}")
    if analytics not in ("auto", "spark", "numpy"):
        raise invalid("--analytics", "expected auto, spark or numpy")
    out = rundir.create(runs, f"experiment-{name}")
    from tidings.server import embedded_broker

    chosen = cast(Analytics, analytics)  # one of the three: checked above
    live = not (no_progress or as_json) and on_terminal()
    settings = ExperimentSettings(kinds, quick, url, processes, live, chosen,
                                  embedded=embedded_broker)  # fmt: skip
    points = len(kinds) * len(spec.quick if quick else spec.full)
    done = [0]

    def point(label: str) -> None:  # a plain line on stderr: each point takes a while
        done[0] += 1
        typer.echo(f"point {done[0]} of {points}: {label}", err=True)

    stages = _quiet if no_progress or as_json else _stage
    rows = run_experiment(spec, settings, out, point, stages)
    if as_json:
        emit({"experiment": name, "x": spec.x, "out": str(out), "rows": rows})
        return
    print_latency(rows, spec.x)
    typer.echo(f"tables and plots: {out}")


@contextlib.contextmanager
def _stage(text: str) -> Iterator[None]:
    """A stage after the points, in plain lines on stderr: as it begins, and its time once
    done (Spark's start and analysis take seconds to minutes, with nothing else to see)."""
    typer.echo(f"{text}…", err=True)
    started = time.perf_counter()
    yield
    typer.echo(f"{text}: done in {time.perf_counter() - started:.1f} s", err=True)


def _quiet(text: str) -> contextlib.nullcontext[None]:
    return contextlib.nullcontext()


def print_latency(rows: list[dict[str, Any]], x: str) -> None:
    """The experiment's table, by matching kind and then by the swept value as a number."""
    table = Table(title="publish to delivery (ms)", show_edge=False)
    for column in ("matching", x, "subscribers", "count", "p50", "p95", "p99", "max"):
        table.add_column(column, justify="right")
    keys = ("matching", x, "subscribers", "count", "p50_ms", "p95_ms", "p99_ms", "max_ms")
    for row in sorted(rows, key=lambda r: (str(r.get("matching")), _number(r.get(x)))):
        table.add_row(*(cell(row.get(k)) for k in keys))
    Console().print(table)


def _number(value: Any) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        return float("inf")


def register(app: typer.Typer) -> None:
    app.command()(sim)
    app.command()(scenarios)
    app.command()(experiment)
