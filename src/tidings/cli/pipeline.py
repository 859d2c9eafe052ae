"""`tidings pipeline match | replay | report`: the Spark jobs.

Each shows its stages on stderr while it works (on a terminal; `cli/progress.py`) and ends
with a table on stdout, or with `--json` with JSON on stdout: one object, or for
`match --follow` one line per micro-batch."""

from __future__ import annotations

import dataclasses
import importlib.util
import signal
import threading
import time
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import orjson
import typer

from tidings.cli.progress import Stages, emit, show, start_spark, table
from tidings.config import Settings, load_settings
from tidings.errors import invalid
from tidings.pipeline import DRIVER_LINES

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from tidings.pipeline.jobs import Algorithm, BatchResult, Matching, Paths

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
Json = Annotated[
    bool, typer.Option("--json", help="The summary as JSON on stdout; no progress display.")
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
    settings: Settings,
    master: str,
    functions: bool,
    algorithm: Algorithm,
    driver_lines: int,
    stages: Stages,
) -> tuple[Matching, SparkSession]:
    from tidings.pipeline.jobs import Matching, Paths, Subscriptions
    from tidings.pipeline.sink import QueueSink
    from tidings.store import open_store

    store = open_store(settings.resolved_store_url, writer=True)
    spark = start_spark(stages, master)
    runner = functions and importlib.util.find_spec("tidings.sandbox.runner") is not None
    matching = Matching(
        Subscriptions(spark, store),
        QueueSink(store),
        Paths.of(settings).quarantine,
        settings.functions if runner else None,
        algorithm=algorithm,
        driver_lines=driver_lines,
    )
    return matching, spark


def _checked(algorithm: str, driver_lines: int) -> Algorithm:
    """The options, refused before Spark starts."""
    chosen = _algorithm(algorithm)
    if driver_lines < 0:
        raise invalid("--driver-lines", "a number of lines, 0 or more")
    return chosen


BATCH_COLUMNS = ("batch", "publications", "deliveries enqueued", "quarantined", "subscriptions")


def _line(result: BatchResult) -> str:
    """One batch as a sentence (the live line of `--follow`)."""
    return (
        f"{result.batch}: {result.publications} publications, {result.enqueued} deliveries "
        f"enqueued, {result.quarantined} lines quarantined (subscriptions v{result.version})"
    )


def _row(result: BatchResult) -> tuple[Any, ...]:
    return (result.batch, result.publications, result.enqueued, result.quarantined,
            f"v{result.version}")  # fmt: skip


def totals(results: list[BatchResult], seconds: float) -> dict[str, Any]:
    """The summary of a run of batches: `--json`'s object and the table's last row."""
    return {
        "batches": [dataclasses.asdict(r) for r in results],
        "publications": sum(r.publications for r in results),
        "enqueued": sum(r.enqueued for r in results),
        "quarantined": sum(r.quarantined for r in results),
        "seconds": round(seconds, 3),
    }


def _show_batches(title: str, results: list[BatchResult], seconds: float) -> None:
    if not results:
        show(f"{title}: nothing new in the log ({seconds:.1f} s)")
        return
    rows = [_row(r) for r in results]
    if len(results) > 1:
        summed = totals(results, seconds)
        rows.append(("total", summed["publications"], summed["enqueued"],
                     summed["quarantined"], ""))  # fmt: skip
    show(table(f"{title}: {len(results)} batch(es) in {seconds:.1f} s", BATCH_COLUMNS, rows))


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
    as_json: Annotated[
        bool,
        typer.Option(
            "--json",
            help="JSON on stdout, no progress display: one object (with --follow, one line "
            "per micro-batch).",
        ),
    ] = False,
) -> None:
    """Match the publication log into the queues, from where the last run stopped."""
    from tidings.pipeline.jobs import Paths, match_available

    settings = _settings(data_dir, store)
    start = parse_since(since)
    if trigger <= 0:
        raise invalid("--trigger", "the trigger interval is a positive number of seconds")
    chosen = _checked(algorithm, driver_lines)
    paths = Paths.of(settings)
    started = time.monotonic()
    with Stages(enabled=not as_json) as stages:
        if follow:
            stages.say(
                f"starting Spark ({master}), then waiting for the first micro-batch of "
                f"{paths.publications} (the first can take a minute; Ctrl-C stops)"
            )
        matching, spark = _matching(settings, master, functions, chosen, driver_lines, stages)
        matching.since = start
        if follow:
            results = _follow(spark, matching, paths, trigger, stages, as_json)
        else:
            matching.on_progress = stages if stages.live else None
            stages.update("reading the log")
            results = match_available(spark, matching, paths)
    seconds = time.monotonic() - started
    if as_json:
        if not follow:
            emit(totals(results, seconds))
        return
    if follow:  # its lines were the batches: the totals
        summed = totals(results, seconds)
        row = [len(results), summed["publications"], summed["enqueued"], summed["quarantined"]]
        title = f"pipeline match --follow: {seconds:.1f} s"
        show(table(title, ("batches", *BATCH_COLUMNS[1:4]), [row]))
        return
    _show_batches("pipeline match", results, seconds)


FOLLOWING = "following"


def _follow(
    spark: SparkSession,
    matching: Matching,
    paths: Paths,
    trigger: float,
    stages: Stages,
    as_json: bool,
) -> list[BatchResult]:
    """The streaming query until Ctrl-C (or its end): a line (or JSON line) per batch."""
    from tidings.pipeline.jobs import start_stream, stop

    results: list[BatchResult] = []

    def each(result: BatchResult) -> None:
        results.append(result)
        if as_json:
            emit(dataclasses.asdict(result) | {"at": round(time.time(), 3)})
        else:
            typer.echo(_line(result))
        publications = sum(r.publications for r in results)
        enqueued = sum(r.enqueued for r in results)
        detail = f"batch(es), {publications:,} publications, {enqueued:,} deliveries"
        stages.update(FOLLOWING, len(results), 0, detail)

    query = start_stream(spark, matching, paths, trigger, on_batch=each)
    stages.update("waiting for the first micro-batch")
    # Ctrl-C lands in Python's sleep, not inside a call to the JVM, and without PySpark's
    # handler, which cancels the running batch from inside that call (a py4j traceback):
    # the batch finishes, then the query stops (`stop`).
    main = threading.current_thread() is threading.main_thread()
    before = signal.signal(signal.SIGINT, signal.default_int_handler) if main else None
    try:
        while query.isActive:
            time.sleep(0.2)
        query.awaitTermination()  # it ended by itself: its error, if any, is raised here
    except KeyboardInterrupt:
        stop(query)
    finally:
        if before is not None:
            signal.signal(signal.SIGINT, before)
    return results


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
    as_json: Json = False,
) -> None:
    """Re-match a time range against the current subscriptions; enqueue what was missed."""
    from tidings.pipeline.jobs import Paths
    from tidings.pipeline.jobs import replay as run_replay

    settings = _settings(data_dir, store)
    start = parse_since(since)
    chosen = _checked(algorithm, driver_lines)
    started = time.monotonic()
    with Stages(enabled=not as_json) as stages:
        matching, spark = _matching(settings, master, functions, chosen, driver_lines, stages)
        matching.since, matching.subscriber_id = start, subscriber
        matching.on_progress = stages if stages.live else None
        stages.update("reading the log")
        result = run_replay(spark, matching, Paths.of(settings))
    seconds = time.monotonic() - started
    if as_json:
        emit(dataclasses.asdict(result) | {"seconds": round(seconds, 3)})
        return
    _show_batches("pipeline replay", [result], seconds)


def report(
    run_dir: Annotated[Path, typer.Argument(help="A run directory, or a directory of runs.")],
    out: Annotated[
        Path | None, typer.Option(help="Where to write (default RUN_DIR/report).")
    ] = None,
    master: Master = "local[2]",
    as_json: Json = False,
) -> None:
    """Latency percentiles, throughput, scaling metrics: CSV, JSON and PNG plots.

    For a directory of benchmarks/elastic.py results: the elastic shapes' scaling table."""
    from tidings.pipeline.report import find_runs, has_elastic_results
    from tidings.pipeline.report import report as run_report

    if not has_elastic_results(run_dir):
        find_runs(run_dir)  # a wrong directory is an error before Spark starts
    started = time.monotonic()
    with Stages(enabled=not as_json) as stages:
        spark = start_spark(stages, master)
        written = run_report(spark, run_dir, out, stages)
    summary = report_summary(written, time.monotonic() - started)
    if as_json:
        emit(summary)
        return
    show_report(summary)


LATENCY_COLUMNS = ("run", "latency", "count", "p50 ms", "p95 ms", "p99 ms", "max ms")


def report_summary(written: Path, seconds: float) -> dict[str, Any]:
    """What the report wrote, with its latency (or elastic scaling) table."""
    summary: dict[str, Any] = {
        "out": str(written),
        "files": [str(p) for p in sorted(written.iterdir())],
        "seconds": round(seconds, 3),
    }
    for name in ("latency", "elastic_scaling"):
        path = written / f"{name}.json"
        if path.is_file():
            summary[name] = orjson.loads(path.read_bytes())
    return summary


def show_report(summary: dict[str, Any]) -> None:
    parts: list[Any] = []
    keys = ("run", "latency", "count", "p50_ms", "p95_ms", "p99_ms", "max_ms")
    if "latency" in summary:
        rows = [[r.get(k) for k in keys] for r in summary["latency"]]
        parts.append(table("latency", LATENCY_COLUMNS, rows))
    if "elastic_scaling" in summary:
        rows = summary["elastic_scaling"]
        columns = list(dict.fromkeys(k for r in rows for k in r))
        parts.append(table("elastic scaling", columns, [[r.get(k) for k in columns] for r in rows]))
    files = summary["files"]
    parts.append(f"{len(files)} files in {summary['out']} ({summary['seconds']:.1f} s):")
    parts += [f"  {Path(f).name}" for f in files]
    show(*parts)


def register(app: typer.Typer) -> None:
    group = typer.Typer(
        name="pipeline", help="Spark jobs: match the log, replay, report.", no_args_is_help=True
    )
    group.command()(match)
    group.command()(replay)
    group.command()(report)
    app.add_typer(group)
