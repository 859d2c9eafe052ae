"""Section V's experiments, reduced: the curves have the paper's shapes."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest
import typer
from typer.testing import CliRunner

from tidings.cli import main
from tidings.placement.experiments import REDUCED, experiment_1, experiment_2, experiment_4


@pytest.fixture(scope="module")
def rows_1() -> list[dict[str, object]]:
    return experiment_1(REDUCED, seed=1)


def multipub(rows: list[dict[str, object]], series: str = "MultiPub") -> list[dict[str, object]]:
    return [r for r in rows if r["series"] == series]


def test_multipubs_cost_falls_in_steps_as_the_bound_loosens(
    rows_1: list[dict[str, object]],
) -> None:
    costs = [float(r["cost_per_day"]) for r in multipub(rows_1)]  # type: ignore[arg-type]
    assert costs == sorted(costs, reverse=True) and costs[0] > costs[-1]


def test_multipub_never_costs_more_than_all_regions(rows_1: list[dict[str, object]]) -> None:
    everywhere = multipub(rows_1, "All regions (routed)")
    for mine, theirs in zip(multipub(rows_1), everywhere, strict=True):
        assert float(mine["cost_per_day"]) <= float(theirs["cost_per_day"])  # type: ignore[arg-type]


def test_the_tightest_bound_is_served_routed_and_the_loosest_direct(
    rows_1: list[dict[str, object]],
) -> None:
    chosen = multipub(rows_1)
    assert chosen[0]["mode"] == "routed" and chosen[-1]["mode"] == "direct"


def test_direct_only_and_routed_only_are_never_cheaper_when_both_meet() -> None:
    rows = experiment_2(REDUCED, seed=1)
    for max_ms in sorted({float(r["max_ms"]) for r in rows}):
        at = {r["series"]: r for r in rows if r["max_ms"] == max_ms}
        if at["MultiPub"]["meets"]:
            for restricted in ("MultiPub-D", "MultiPub-R"):
                if at[restricted]["meets"]:
                    assert at["MultiPub"]["cost_per_day"] <= at[restricted]["cost_per_day"]


def test_the_runtime_experiment_counts_every_configuration() -> None:
    rows = experiment_4(REDUCED, seed=1)
    by_regions = {r["regions"]: r["configurations"] for r in rows if r["case"] == "regions"}
    assert by_regions == {2: 4, 3: 11}
    timed = [r["publishers"] for r in rows if r["spec_seconds"] is not None]
    assert timed == [10]


def test_the_cli_writes_tables_plots_and_the_savings_against_the_paper(tmp_path: Path) -> None:
    if not any(group.name == "placement" for group in main.app.registered_groups):
        main._register()
    app: typer.Typer = main.app
    out = tmp_path / "run"
    result = CliRunner().invoke(
        app, ["placement", "experiment", "3", "--reduced", "--out", str(out)]
    )
    assert result.exit_code == 0, result.output
    names = {p.name for p in out.iterdir()}
    assert {"points.csv", "points.json", "savings.csv", "savings.json", "environment.json"} <= names
    assert {"experiment-3-local-ap-northeast-1.png", "experiment-3-local-sa-east-1.png"} <= names
    table = orjson.loads((out / "savings.json").read_bytes())
    assert [row["paper_percent"] for row in table] == [36.0, 65.0]
    assert "paper: 65 %" in result.output
