"""`tidings placement solve | solve-topics | experiment | controller | emulate`: MultiPub.

The long ones (`experiment`, `solve-topics`, `emulate`) show their stages on stderr while
they work (on a terminal; `cli/progress.py`) and end with a table on stdout, or with
`--json` with one JSON object. `solve-topics` keeps its JSON object as the default output
(tests and docs/placement.md read it) and draws the table with `--table`."""

from __future__ import annotations

import asyncio
import contextlib
import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import orjson
import typer

from tidings.cli.progress import Stages, emit, show, start_spark
from tidings.cli.progress import table as summary_table
from tidings.errors import invalid

if TYPE_CHECKING:
    from tidings.placement.controller import Constraint
    from tidings.placement.emulation import Report
    from tidings.placement.experiments import Row
    from tidings.placement.files import World

HighLatency = Annotated[
    bool, typer.Option("--high-latency", help="Apply section IV-D's rule to the choice.")
]
Improvement = Annotated[
    float, typer.Option(help="With --high-latency: the least improvement that adds a region.")
]
Json = Annotated[
    bool, typer.Option("--json", help="The summary as one JSON object; no progress display.")
]


def solve(
    instance: Annotated[Path, typer.Argument(help="The instance file (JSON).")],
    high_latency: HighLatency = False,
    improvement: Improvement = 0.25,
) -> None:
    """Choose the regions and mode for one topic; print one JSON object."""
    from tidings.placement.files import load_instance
    from tidings.placement.highlatency import force_regions
    from tidings.placement.model import Choice, evaluate
    from tidings.placement.solver import solve as solve_instance

    if not 0 < improvement < 1:
        raise invalid("--improvement", "must be a fraction between 0 and 1")
    problem = load_instance(instance)
    started = time.perf_counter()
    choice = solve_instance(problem)
    result = choice.to_json(time.perf_counter() - started)
    if high_latency:
        forced = force_regions(problem, choice.evaluation.configuration, improvement)
        final = Choice(evaluate(problem, forced.configuration), choice.configurations)
        result = final.to_json(time.perf_counter() - started) | {"forced": list(forced.added)}
    typer.echo(orjson.dumps(result).decode())


def experiment(
    number: Annotated[int, typer.Argument(help="1, 2, 3 or 4 (section V's experiments).")],
    out: Annotated[
        Path | None, typer.Option(help="The run directory (default: runs/placement-N-<time>).")
    ] = None,
    seed: Annotated[int, typer.Option(help="Seeds the clients' cities.")] = 1,
    reduced: Annotated[
        bool, typer.Option("--reduced", help="Few clients and bounds: a smoke run.")
    ] = False,
    as_json: Json = False,
) -> None:
    """Reproduce one of the paper's experiments on the model data: CSV/JSON and PNG plots."""
    from tidings.placement.experiments import EXPERIMENTS, FULL, REDUCED, savings
    from tidings.placement.results import write
    from tidings.sim import rundir

    if number not in EXPERIMENTS:
        raise invalid("NUMBER", "expected 1, 2, 3 or 4")
    size = REDUCED if reduced else FULL
    run_dir = out or rundir.create(Path("runs"), f"placement-{number}")
    started = time.perf_counter()
    with Stages(enabled=not as_json) as stages:
        rows = EXPERIMENTS[number](size, seed, stages)
        stages.update("tables and plots")
        settings = {"experiment": number, "seed": seed, "reduced": reduced}
        written = write(run_dir, number, rows, settings)
    summary = {
        "experiment": number,
        "seed": seed,
        "reduced": reduced,
        "points": len(rows),
        "seconds": round(time.perf_counter() - started, 3),
        "series": runtimes(rows) if number == 4 else series(rows),
        "savings": savings(rows),
        "out": str(run_dir),
        "files": [str(path) for path in written],
    }
    if as_json:
        emit(summary)
        return
    _show_experiment(summary)


SERIES_COLUMNS = ("case", "series", "bounds met", "tightest met", "$/day at loosest",
                  "regions", "mode")  # fmt: skip
RUNTIME_KEYS = ("case", "publishers", "subscribers", "regions", "configurations", "seconds",
                "spec_seconds")  # fmt: skip
RUNTIME_COLUMNS = ("case", "pubs", "subs", "regions", "configs", "solver ms", "spec ms")


def series(rows: list[Row]) -> list[dict[str, Any]]:
    """Per case and series: its points, how many meet the bound, the tightest bound met,
    and the answer at the loosest bound (cost a day, regions, mode)."""
    found = []
    for key in dict.fromkeys((r["case"], r["series"]) for r in rows):
        mine = [r for r in rows if (r["case"], r["series"]) == key]
        met = [r["max_ms"] for r in mine if r["meets"]]
        loosest = max(mine, key=lambda r: r["max_ms"])
        found.append({
            "case": key[0], "series": key[1], "points": len(mine), "met": len(met),
            "tightest_met_ms": min(met) if met else None,
            "loosest_cost_per_day": loosest["cost_per_day"],
            "loosest_regions": loosest["regions"], "loosest_mode": loosest["mode"],
        })  # fmt: skip
    return found


def runtimes(rows: list[Row]) -> list[dict[str, Any]]:
    """Experiment 4's rows as they are: the solver's (and the specification's) seconds."""
    return [{k: r[k] for k in RUNTIME_KEYS} for r in rows]


def _show_experiment(summary: dict[str, Any]) -> None:
    title = f"placement experiment {summary['experiment']} ({summary['seconds']:.1f} s)"
    if summary["experiment"] == 4:
        rows = [[*(r[k] for k in RUNTIME_KEYS[:5]), *(_ms(r[k]) for k in RUNTIME_KEYS[5:])]
                for r in summary["series"]]  # fmt: skip
        made = summary_table(title, RUNTIME_COLUMNS, rows)
    else:
        rows = [[r["case"], r["series"], f"{r['met']} of {r['points']}", r["tightest_met_ms"],
                 r["loosest_cost_per_day"], r["loosest_regions"], r["loosest_mode"]]
                for r in summary["series"]]  # fmt: skip
        made = summary_table(title, SERIES_COLUMNS, rows)
    lines = [
        f"{line['case']}: {line['savings_percent']:.1f} % saved against "
        f"{line['baseline']} (paper: {line['paper_percent']:.0f} %)"
        for line in summary["savings"]
    ]
    done = f"tables and plots: {summary['out']} ({len(summary['files'])} files)"
    show(made, *lines, done)


def _ms(seconds: float | None) -> float | None:
    return None if seconds is None else round(seconds * 1000, 1)


def solve_topics(
    table: Annotated[Path, typer.Argument(help="Topics: Parquet or JSON Lines, one per row.")],
    world: Annotated[Path, typer.Option(help="Regions, L, LR, alpha, beta (JSON).")],
    out: Annotated[Path, typer.Option(help="Where to write one answer row per topic.")],
    output_format: Annotated[
        str, typer.Option("--format", help="parquet or json (JSON Lines).")
    ] = "parquet",
    master: Annotated[str, typer.Option(help="Spark master.")] = "local[2]",
    partitions: Annotated[
        int, typer.Option(help="Partitions (one Python worker each); 0: the master's cores.")
    ] = 0,
    as_json: Annotated[
        bool,
        typer.Option(
            "--json", help="The summary as one JSON object (the default) and no progress display."
        ),
    ] = False,
    as_table: Annotated[
        bool, typer.Option("--table", help="The summary as a table instead of JSON.")
    ] = False,
) -> None:
    """Solve many topics in parallel on Spark, with the same solver as `solve`."""
    from tidings.placement.files import load_world
    from tidings.placement.many_topics import read_topics, solve_topics, write_answers

    if output_format not in ("parquet", "json"):
        raise invalid("--format", "expected parquet or json")
    if partitions < 0:
        raise invalid("--partitions", "must be 0 or more")
    if as_json and as_table:
        raise invalid("--table", "--json or --table, not both")
    loaded = load_world(world)
    with Stages(enabled=not as_json) as stages:
        spark = start_spark(stages, master, "tidings-placement")
        stages.update("reading the topics")
        frame = read_topics(spark, table)
        started = time.perf_counter()
        stages.update("solving")
        answers = solve_topics(frame, loaded, partitions or spark.sparkContext.defaultParallelism)
        answers.cache()
        count = answers.count()
        seconds = time.perf_counter() - started
        failed = answers.filter("error IS NOT NULL").count()
        stages.update("writing the answers")
        write_answers(answers, out, output_format)
    summary: dict[str, Any] = {"topics": count, "failed": failed, "seconds": round(seconds, 3)}
    summary["topics_per_s"] = round(count / seconds, 2) if seconds > 0 else None
    summary["out"] = str(out)
    if not as_table:
        emit(summary)
        return
    columns = ("topics", "failed", "seconds", "topics/s", "out")
    show(summary_table("placement solve-topics", columns, [list(summary.values())]))


def controller(
    world: Annotated[Path, typer.Option(help="Regions, clients' L, LR, alpha, beta (JSON).")],
    region: Annotated[
        list[str], typer.Option(help="NAME=URL of a region's broker, in the world's order.")
    ],
    topic: Annotated[list[str], typer.Option(help="TOPIC=RATIO:MAX_MS (repeatable).")],
    interval: Annotated[float, typer.Option(help="Observation interval, seconds.")] = 10.0,
    key: Annotated[
        str | None,
        typer.Option(
            envvar="TIDINGS_KEY",
            help="A publisher key for the configurations and the state (placement/), where "
            "the brokers require keys.",
        ),
    ] = None,
) -> None:
    """Region managers and the controller: collect, solve, deploy, publish the state; forever.

    The state (placement/state) names the world's regions; the brokers show it."""
    from tidings.placement.files import load_world

    loaded = load_world(world)
    urls = _regions(region, loaded.regions)
    constraints = {name: _constraint(name, value) for name, value in map(_pair, topic)}
    if interval <= 0:
        raise invalid("--interval", "must be positive")
    with contextlib.suppress(KeyboardInterrupt):  # Ctrl-C is how it stops
        asyncio.run(_control(loaded, urls, constraints, interval, key))


def _pair(text: str) -> tuple[str, str]:
    name, sep, value = text.partition("=")
    if not sep or not name:
        raise invalid("--topic", f"expected TOPIC=RATIO:MAX_MS, got {text!r}")
    return name, value


def _constraint(name: str, value: str) -> Constraint:
    from tidings.placement.controller import Constraint

    ratio, sep, max_ms = value.partition(":")
    try:
        parsed = Constraint(float(ratio), float(max_ms))
    except ValueError:
        parsed = None
    if not sep or parsed is None or not 0 < parsed.ratio <= 100 or parsed.max_ms < 0:
        raise invalid("--topic", f"{name}: expected RATIO:MAX_MS with 0 < RATIO <= 100")
    return parsed


def _regions(given: list[str], names: list[str]) -> list[str]:
    urls = dict(_pair_region(g) for g in given)
    missing = [n for n in names if n not in urls]
    if missing or len(urls) != len(names):
        raise invalid("--region", f"give NAME=URL for exactly the world's regions: {names}")
    return [urls[n] for n in names]


def _pair_region(text: str) -> tuple[str, str]:
    name, sep, url = text.partition("=")
    if not sep or not url.startswith(("http://", "https://")):
        raise invalid("--region", f"expected NAME=http://HOST:PORT, got {text!r}")
    return name, url


async def _control(
    world: World,
    urls: list[str],
    constraints: dict[str, Constraint],
    interval: float,
    key: str | None,
) -> None:
    import numpy as np

    from tidings.placement.controller import Controller
    from tidings.placement.regions import RegionManager

    managers = [
        RegionManager(q, url, {r: u for r, u in enumerate(urls) if r != q})
        for q, url in enumerate(urls)
    ]
    for m in managers:
        await m.start()
    L, LR, alpha, beta = (
        np.array(x, dtype=np.float64) for x in (world.L, world.LR, world.alpha, world.beta)
    )
    control = Controller(managers, L, LR, alpha, beta, constraints, world.regions, interval, key)
    try:
        while True:
            await asyncio.sleep(interval)
            for name, choice in (await control.step()).items():
                deployed = control.deployed[name]
                line = {"topic": name, "version": deployed.version} | choice.to_json(0.0)
                del line["seconds"]  # not timed here
                typer.echo(orjson.dumps(line).decode())
    finally:
        for m in managers:
            await m.close()


def emulate(
    seed: Annotated[int, typer.Option(help="Seeds the clients' cities.")] = 1,
    per_side: Annotated[int, typer.Option(help="Publishers (and subscribers) per continent.")] = 2,
    dilation: Annotated[float, typer.Option(help="Multiply every latency by this.")] = 4.0,
    interval: Annotated[float, typer.Option(help="Observation interval, seconds.")] = 2.0,
    as_json: Json = False,
) -> None:
    """The live system on this machine: a topic spreads from America to Europe; print the report."""
    import dataclasses

    from tidings.placement.emulation import Timing, run_spread

    for name, value, least in (("--per-side", per_side, 1), ("--dilation", dilation, 1e-9),
                               ("--interval", interval, 1e-9)):  # fmt: skip
        if value < least:
            raise invalid(name, "must be positive")
    timing = Timing(interval, 0.25, 2.0)
    with Stages(enabled=not as_json) as stages:

        def step(text: str, done: int, total: int) -> None:
            stages.update("spread scenario", done, total, text)

        report = asyncio.run(run_spread(seed, per_side, dilation, timing, step))
    body = dataclasses.asdict(report) | {"relative_error": round(report.relative_error, 4)}
    if as_json:
        emit(body)
        return
    show(emulation_table(report))


def emulation_table(report: Report) -> Any:
    """The spread scenario's report, one measure a row."""
    from tidings.placement.emulation import REGIONS

    def where(regions: list[int]) -> str:
        return " + ".join(REGIONS[r] if r < len(REGIONS) else str(r) for r in regions)

    rows: list[tuple[str, Any]] = [
        (f"answer {i}", f"{where(p['regions'])} {p['mode']}, {p['percentile_ms']:.1f} ms, "
         + ("meets the bound" if p["meets"] else "misses the bound"))
        for i, p in enumerate(report.placements, 1)
    ]  # fmt: skip
    rows += [
        (f"client {c} moved", ", ".join(f"{where([a])} -> {where([b])}" for a, b in hops))
        for c, hops in sorted(report.moves.items())
    ]
    rows += [
        ("(publication, subscriber) pairs due", report.expected),
        ("received", report.received),
        ("lost", report.lost),
        ("copies dropped by placement_id", report.duplicates_dropped),
        (f"{report.ratio:.0f}th percentile after the moves, ms", report.measured_percentile_ms),
        ("the model's, ms", report.model_percentile_ms),
        ("relative error", f"{100 * report.relative_error:.1f} %"),
        ("bound, ms", report.max_ms),
        ("dilation", report.dilation),
    ]
    return summary_table("placement emulate: the spread scenario", ("", "measured"), rows)


def register(app: typer.Typer) -> None:
    group = typer.Typer(
        name="placement",
        help="MultiPub: which cloud regions serve a topic, direct or routed.",
        no_args_is_help=True,
    )
    group.command()(solve)
    group.command("solve-topics")(solve_topics)
    group.command()(experiment)
    group.command()(controller)
    group.command()(emulate)
    app.add_typer(group)
