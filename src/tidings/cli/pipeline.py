"""`tidings pipeline match | replay | report`: the Spark jobs."""

from __future__ import annotations

import importlib.util
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from tidings.config import Settings, load_settings
from tidings.errors import invalid
from tidings.pipeline import DRIVER_LINES

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from tidings.pipeline.jobs import Algorithm, BatchResult, Matching

DataDir = Annotated[Path | None, typer.Option(help="Where state lives (default ./.tidings).")]
Store = Annotated[str | None, typer.Option("--store", help="Store URL (default: SQLite).")]
Master = Annotated[str, typer.Option(help="Spark master: local[N], spark://..., yarn.")]
Since = Annotated[
    str | None, typer.Option(help="Only publications at or after this time (epoch s or ISO).")
]
Functions = Annotated[
    bool, typer.Option(help="Match function subscriptions in the sandbox (default on).")
]
DriverLines = Annotated[
    int,
    typer.Option(
        help="Match a batch of at most this many lines in the driver, without a Spark job "
        "(index algorithm; 0: always in the workers).",
    ),
]
AlgorithmOption = Annotated[
    str,
    typer.Option(
        "--algorithm",
        help="index: the in-process indexes in each worker (default); sql: Spark SQL joins.",
    ),
]


def parse_since(text: str | None) -> float | None:
    """Epoch seconds (`1700000000`) or an ISO 8601 time (`2026-11-22T10:00:00+00:00`)."""
    if text is None:
        return None
    try:
        return float(text)
    except ValueError:
        pass
    try:
        return datetime.fromisoformat(text).timestamp()
    except ValueError:
        raise invalid("--since", f"{text!r} is neither epoch seconds nor an ISO time") from None


def _settings(data_dir: Path | None, store: str | None) -> Settings:
    return load_settings({"data_dir": data_dir, "store_url": store})


def _algorithm(text: str) -> Algorithm:
    from tidings.pipeline.jobs import ALGORITHMS

    for known in ALGORITHMS:
        if text == known:
            return known
    raise invalid("--algorithm", f"{text!r} is not one of {', '.join(ALGORITHMS)}")


def _matching(
    settings: Settings, master: str, functions: bool, algorithm: str, driver_lines: int
) -> tuple[Matching, SparkSession]:
    from tidings.pipeline.jobs import Matching, Paths, Subscriptions
    from tidings.pipeline.session import build_session
    from tidings.pipeline.sink import QueueSink
    from tidings.store import open_store

    chosen = _algorithm(algorithm)
    if driver_lines < 0:
        raise invalid("--driver-lines", "a number of lines, 0 or more")
    store = open_store(settings.resolved_store_url)
    spark = build_session(master)
    runner = functions and importlib.util.find_spec("tidings.sandbox.runner") is not None
    matching = Matching(
        Subscriptions(spark, store),
        QueueSink(store),
        Paths.of(settings).quarantine,
        settings.functions if runner else None,
        algorithm=chosen,
        driver_lines=driver_lines,
    )
    return matching, spark


def _show(result: BatchResult) -> None:
    typer.echo(
        f"{result.batch}: {result.publications} publications, {result.enqueued} deliveries "
        f"enqueued, {result.quarantined} lines quarantined (subscriptions v{result.version})"
    )


def match(
    follow: Annotated[bool, typer.Option(help="Keep running: match as the log grows.")] = False,
    since: Since = None,
    trigger: Annotated[float, typer.Option(help="Seconds between micro-batches.")] = 0.25,
    master: Master = "local[2]",
    data_dir: DataDir = None,
    store: Store = None,
    functions: Functions = True,
    algorithm: AlgorithmOption = "index",
    driver_lines: DriverLines = DRIVER_LINES,
) -> None:
    """Match the publication log into the queues, from where the last run stopped."""
    from tidings.pipeline.jobs import Paths, match_available, start_stream, stop

    settings = _settings(data_dir, store)
    start = parse_since(since)
    if trigger <= 0:
        raise invalid("--trigger", "the trigger interval is a positive number of seconds")
    matching, spark = _matching(settings, master, functions, algorithm, driver_lines)
    matching.since = start
    paths = Paths.of(settings)
    if not follow:
        for result in match_available(spark, matching, paths):
            _show(result)
        return
    typer.echo(f"following {paths.publications} every {trigger} s (Ctrl-C stops)")
    query = start_stream(spark, matching, paths, trigger)
    try:
        query.awaitTermination()
    except KeyboardInterrupt:
        stop(query)


def replay(
    since: Annotated[str, typer.Option(help="Re-match publications from this time on.")],
    subscriber: Annotated[
        str | None, typer.Option(help="Only this subscriber's subscriptions.")
    ] = None,
    master: Master = "local[2]",
    data_dir: DataDir = None,
    store: Store = None,
    functions: Functions = True,
    algorithm: AlgorithmOption = "index",
    driver_lines: DriverLines = DRIVER_LINES,
) -> None:
    """Re-match a time range against the current subscriptions; enqueue what was missed."""
    from tidings.pipeline.jobs import Paths
    from tidings.pipeline.jobs import replay as run_replay

    settings = _settings(data_dir, store)
    start = parse_since(since)
    matching, spark = _matching(settings, master, functions, algorithm, driver_lines)
    matching.since, matching.subscriber_id = start, subscriber
    _show(run_replay(spark, matching, Paths.of(settings)))


def report(
    run_dir: Annotated[Path, typer.Argument(help="A run directory, or a directory of runs.")],
    out: Annotated[
        Path | None, typer.Option(help="Where to write (default RUN_DIR/report).")
    ] = None,
    master: Master = "local[2]",
) -> None:
    """Latency percentiles, throughput, scaling metrics: CSV, JSON and PNG plots.

    For a directory of benchmarks/elastic.py results: the elastic shapes' scaling table."""
    from tidings.pipeline.report import find_runs, has_elastic_results
    from tidings.pipeline.report import report as run_report
    from tidings.pipeline.session import build_session

    if not has_elastic_results(run_dir):
        find_runs(run_dir)  # a wrong directory is an error before Spark starts
    written = run_report(build_session(master), run_dir, out)
    for path in sorted(written.iterdir()):
        typer.echo(str(path))


def register(app: typer.Typer) -> None:
    group = typer.Typer(
        name="pipeline", help="Spark jobs: match the log, replay, report.", no_args_is_help=True
    )
    group.command()(match)
    group.command()(replay)
    group.command()(report)
    app.add_typer(group)
