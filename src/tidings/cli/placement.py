"""`tidings placement solve | solve-topics | experiment`: MultiPub topic placement."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated, Any

import orjson
import typer

from tidings.errors import invalid
from tidings.placement.files import load_instance
from tidings.placement.highlatency import force_regions
from tidings.placement.model import Choice, evaluate
from tidings.placement.solver import solve as solve_instance

HighLatency = Annotated[
    bool, typer.Option("--high-latency", help="Apply section IV-D's rule to the choice.")
]
Improvement = Annotated[
    float, typer.Option(help="With --high-latency: the least improvement that adds a region.")
]


def answer(choice: Choice, seconds: float) -> dict[str, Any]:
    """The one JSON object `solve` prints."""
    e = choice.evaluation
    return {
        "regions": list(e.configuration.regions),
        "mode": e.configuration.mode.value,
        "percentile_ms": e.percentile_ms,
        "cost": e.cost,
        "meets": e.meets,
        "configurations": choice.configurations,
        "seconds": round(seconds, 6),
    }


def solve(
    instance: Annotated[Path, typer.Argument(help="The instance file (JSON).")],
    high_latency: HighLatency = False,
    improvement: Improvement = 0.25,
) -> None:
    """Choose the regions and mode for one topic; print one JSON object."""
    if not 0 < improvement < 1:
        raise invalid("--improvement", "must be a fraction between 0 and 1")
    problem = load_instance(instance)
    started = time.perf_counter()
    choice = solve_instance(problem)
    result = answer(choice, time.perf_counter() - started)
    if high_latency:
        forced = force_regions(problem, choice.evaluation.configuration, improvement)
        final = Choice(evaluate(problem, forced.configuration), choice.configurations)
        result = answer(final, time.perf_counter() - started) | {"forced": list(forced.added)}
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
    from tidings.placement.report import write
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


def register(app: typer.Typer) -> None:
    group = typer.Typer(
        name="placement",
        help="MultiPub: which cloud regions serve a topic, direct or routed.",
        no_args_is_help=True,
    )
    group.command()(solve)
    group.command()(experiment)
    app.add_typer(group)
