"""`tidings placement experiment | solve-topics | emulate` as a user runs them: a table at the
end, or with `--json` one JSON object and nothing else on stdout."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest
import typer
from pyspark.sql import SparkSession
from typer.testing import CliRunner

from tidings.cli import main
from tidings.errors import TidingsError
from tidings.placement import emulation, scenarios
from tidings.placement.emulation import Report


@pytest.fixture(scope="module")
def app() -> typer.Typer:
    if not any(group.name == "placement" for group in main.app.registered_groups):
        main._register()
    return main.app


def plain(output: str) -> bool:
    """No escape codes, no bars, no spinners: what a pipe or a file should receive."""
    return "\x1b[" not in output and not any(c in output for c in "━✓⠋⠙")


def test_experiment_with_json_prints_its_series_savings_and_files(
    app: typer.Typer, tmp_path: Path
) -> None:
    args = ["placement", "experiment", "3", "--reduced", "--out", str(tmp_path), "--json"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    body = orjson.loads(result.stdout)
    assert (body["experiment"], body["reduced"], body["points"]) == (3, True, 20)
    assert [(s["case"], s["points"]) for s in body["series"]] == [
        ("local-ap-northeast-1", 10), ("local-sa-east-1", 10),
    ]  # fmt: skip
    assert [s["paper_percent"] for s in body["savings"]] == [36.0, 65.0]
    assert str(tmp_path / "savings.json") in body["files"]
    assert plain(result.output)


def test_experiment_ends_with_a_table_of_its_series_then_the_savings(
    app: typer.Typer, tmp_path: Path
) -> None:
    args = ["placement", "experiment", "3", "--reduced", "--out", str(tmp_path)]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0].startswith("placement experiment 3 (")
    assert any("local-sa-east-1" in line and "MultiPub" in line for line in lines)
    assert "paper: 65 %" in result.stdout and lines[-1].startswith("tables and plots: ")
    assert plain(result.output)


REPORT = Report(
    placements=[{"regions": [0], "mode": "direct", "percentile_ms": 207.9, "meets": True},
                {"regions": [0, 1], "mode": "direct", "percentile_ms": 382.6, "meets": True}],
    moves={4: [(0, 1)], 5: [(0, 1)]},
    expected=482, received=482, lost=0, duplicates_dropped=89,
    measured_percentile_ms=391.7, model_percentile_ms=382.6, ratio=75.0, max_ms=444.5,
    dilation=4.0,
)  # fmt: skip


@pytest.fixture
def scenario(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, int, int]]:
    """The spread scenario without its brokers: it says its steps and returns `REPORT`."""
    heard: list[tuple[str, int, int]] = []

    async def run_spread(*args: Any) -> Report:
        on_progress = args[-1]
        for i, text in enumerate(emulation.STEPS):
            on_progress(text, i, len(emulation.STEPS))
            heard.append((text, i, len(emulation.STEPS)))
        return REPORT

    monkeypatch.setattr(emulation, "run_spread", run_spread)
    return heard


def test_emulate_with_json_prints_the_report_as_one_object(
    app: typer.Typer, scenario: list[tuple[str, int, int]]
) -> None:
    result = CliRunner().invoke(app, ["placement", "emulate", "--json"])
    assert result.exit_code == 0, result.output
    body = orjson.loads(result.stdout)
    assert (body["expected"], body["lost"], body["moves"]) == (
        482,
        0,
        {"4": [[0, 1]], "5": [[0, 1]]},
    )
    assert body["relative_error"] == round(REPORT.relative_error, 4)
    assert len(scenario) == len(emulation.STEPS) and plain(result.output)


def test_emulate_ends_with_a_table_naming_the_regions(
    app: typer.Typer, scenario: list[tuple[str, int, int]]
) -> None:
    result = CliRunner().invoke(app, ["placement", "emulate"])
    assert result.exit_code == 0, result.output
    assert "us-east-1 + eu-central-1 direct, 382.6 ms, meets the bound" in result.stdout
    assert "us-east-1 -> eu-central-1" in next(
        x for x in result.stdout.splitlines() if "client 4" in x
    )
    assert any(line.split()[:1] == ["lost"] and line.split()[-1] == "0"
               for line in result.stdout.splitlines())  # fmt: skip
    assert "2.4 %" in result.stdout and plain(result.output)


def world_and_topics(tmp_path: Path) -> tuple[Path, Path]:
    world = scenarios.world_of_cities(60, seed=4)
    path = tmp_path / "world.json"
    path.write_bytes(orjson.dumps({"regions": world.regions, "L": world.L, "LR": world.LR,
                                   "alpha": world.alpha, "beta": world.beta}))  # fmt: skip
    rows = scenarios.random_topics(60, 5, 3, 3, seed=3, messages=1)
    topics = tmp_path / "topics.jsonl"
    topics.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in rows))
    return path, topics


@pytest.mark.spark
def test_solve_topics_with_table_shows_the_summary_as_a_table(
    app: typer.Typer, spark: SparkSession, tmp_path: Path
) -> None:
    world, topics = world_and_topics(tmp_path)
    args = ["placement", "solve-topics", str(topics), "--world", str(world),
            "--out", str(tmp_path / "answers"), "--format", "json", "--table"]  # fmt: skip
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("placement solve-topics")
    (row,) = [line.split() for line in result.stdout.splitlines() if "answers" in line]
    assert [cell for cell in row if cell not in "│┃|"][:2] == ["5", "0"]  # topics, failed
    assert plain(result.output)


def test_solve_topics_takes_json_or_table_not_both(app: typer.Typer, tmp_path: Path) -> None:
    args = ["placement", "solve-topics", str(tmp_path), "--world", str(tmp_path), "--out",
            str(tmp_path), "--json", "--table"]  # fmt: skip
    result = CliRunner().invoke(app, args)
    assert isinstance(result.exception, TidingsError) and result.exception.field == "--table"
