"""`tidings sim CONFIG`, `tidings scenarios`, `tidings experiment NAME` (docs/sim.md)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from tidings.errors import invalid

Url = Annotated[
    str | None,
    typer.Option(help="Broker URL (default: the config's, else an embedded broker for the run)."),
]
Runs = Annotated[Path, typer.Option(help="Where run directories are made.")]
Quiet = Annotated[bool, typer.Option("--no-progress", help="No live progress line.")]


def sim(
    config: Annotated[Path, typer.Argument(help="Simulator config (native or the thesis's).")],
    url: Url = None,
    processes: Annotated[int, typer.Option(help="Spread subscribers over N processes.")] = 1,
    duration: Annotated[float | None, typer.Option(help="Override the config's duration.")] = None,
    runs: Runs = Path("runs"),
    no_progress: Quiet = False,
) -> None:
    """Run subscribers and publishers against a broker and record every delivery."""
    import msgspec

    from tidings.sim import rundir
    from tidings.sim.config import check, load_config
    from tidings.sim.runner import Options, run

    if processes < 1:
        raise invalid("--processes", "must be at least 1")
    settings = load_config(config)
    if duration is not None:
        settings = check(msgspec.structs.replace(settings, duration=duration))
    run_dir = rundir.create(runs, settings.name)
    outcome = run(settings, run_dir, Options(url, processes, not no_progress))
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


def register(app: typer.Typer) -> None:
    app.command()(sim)
