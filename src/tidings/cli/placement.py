"""`tidings placement solve | solve-topics | experiment | controller | emulate`: MultiPub."""

from __future__ import annotations

import asyncio
import contextlib
import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import orjson
import typer

from tidings.errors import invalid

if TYPE_CHECKING:
    from tidings.placement.controller import Constraint
    from tidings.placement.files import World

HighLatency = Annotated[
    bool, typer.Option("--high-latency", help="Apply section IV-D's rule to the choice.")
]
Improvement = Annotated[
    float, typer.Option(help="With --high-latency: the least improvement that adds a region.")
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
) -> None:
    """Reproduce one of the paper's experiments on the model data: CSV/JSON and PNG plots."""
    from tidings.placement.experiments import EXPERIMENTS, FULL, REDUCED, savings
    from tidings.placement.results import write
    from tidings.sim import rundir

    if number not in EXPERIMENTS:
        raise invalid("NUMBER", "expected 1, 2, 3 or 4")
    size = REDUCED if reduced else FULL
    run_dir = out or rundir.create(Path("runs"), f"placement-{number}")
    rows = EXPERIMENTS[number](size, seed)
    settings = {"experiment": number, "seed": seed, "reduced": reduced}
    written = write(run_dir, number, rows, settings)
    for line in savings(rows):
        typer.echo(
            f"{line['case']}: {line['savings_percent']:.1f} % saved against "
            f"{line['baseline']} (paper: {line['paper_percent']:.0f} %)"
        )
    typer.echo(f"tables and plots: {run_dir} ({len(written)} files)")


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
) -> None:
    """Solve many topics in parallel on Spark, with the same solver as `solve`."""
    from tidings.pipeline.session import build_session
    from tidings.placement.files import load_world
    from tidings.placement.many_topics import read_topics, solve_topics, write_answers

    if output_format not in ("parquet", "json"):
        raise invalid("--format", "expected parquet or json")
    if partitions < 0:
        raise invalid("--partitions", "must be 0 or more")
    loaded = load_world(world)
    spark = build_session(master, "tidings-placement")
    frame = read_topics(spark, table)
    started = time.perf_counter()
    answers = solve_topics(frame, loaded, partitions or spark.sparkContext.defaultParallelism)
    answers.cache()
    count = answers.count()
    seconds = time.perf_counter() - started
    failed = answers.filter("error IS NOT NULL").count()
    write_answers(answers, out, output_format)
    summary: dict[str, Any] = {"topics": count, "failed": failed, "seconds": round(seconds, 3)}
    summary["topics_per_s"] = round(count / seconds, 2) if seconds > 0 else None
    typer.echo(orjson.dumps(summary | {"out": str(out)}).decode())


def controller(
    world: Annotated[Path, typer.Option(help="Regions, clients' L, LR, alpha, beta (JSON).")],
    region: Annotated[
        list[str], typer.Option(help="NAME=URL of a region's broker, in the world's order.")
    ],
    topic: Annotated[list[str], typer.Option(help="TOPIC=RATIO:MAX_MS (repeatable).")],
    interval: Annotated[float, typer.Option(help="Observation interval, seconds.")] = 10.0,
) -> None:
    """Region managers beside each broker and the controller: collect, solve, deploy; forever."""
    from tidings.placement.files import load_world

    loaded = load_world(world)
    urls = _regions(region, loaded.regions)
    constraints = {name: _constraint(name, value) for name, value in map(_pair, topic)}
    if interval <= 0:
        raise invalid("--interval", "must be positive")
    with contextlib.suppress(KeyboardInterrupt):  # Ctrl-C is how it stops
        asyncio.run(_control(loaded, urls, constraints, interval))


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
    world: World, urls: list[str], constraints: dict[str, Constraint], interval: float
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
    control = Controller(managers, L, LR, alpha, beta, constraints)
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
) -> None:
    """The live system on this machine: a topic spreads from America to Europe; print the report."""
    import dataclasses

    from tidings.placement.emulation import Timing, run_spread

    for name, value, least in (("--per-side", per_side, 1), ("--dilation", dilation, 1e-9),
                               ("--interval", interval, 1e-9)):  # fmt: skip
        if value < least:
            raise invalid(name, "must be positive")
    report = asyncio.run(run_spread(seed, per_side, dilation, Timing(interval, 0.25, 2.0)))
    body = dataclasses.asdict(report) | {"relative_error": round(report.relative_error, 4)}
    typer.echo(orjson.dumps(body, option=orjson.OPT_NON_STR_KEYS).decode())


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
