"""`tidings sim` and `tidings experiment` with `--json`: one JSON object on stdout, no live
line without a terminal."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import orjson
import pytest
import typer
from typer.testing import CliRunner

from tidings.cli import main
from tidings.sim import experiments


@pytest.fixture(scope="module")
def app() -> typer.Typer:
    if not any(group.name == "placement" for group in main.app.registered_groups):
        main._register()  # every module at once
    return main.app


def plain(output: str) -> bool:
    return "\x1b[" not in output and not any(c in output for c in "━✓⠋⠙")


def test_sim_with_json_prints_the_run_s_summary_and_its_directory(
    app: typer.Typer, tmp_path: Path
) -> None:
    config = tmp_path / "config.json"
    config.write_bytes(orjson.dumps({
        "name": "tiny", "duration": 1, "quiet": 0.3,
        "subscribers": [{"count": 2, "topics": ["t"]}],
        "publishers": [{"rate": 5, "topics": ["t"], "payload_bytes": 64}],
    }))  # fmt: skip
    args = ["sim", str(config), "--runs", str(tmp_path / "runs"), "--json"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    body = orjson.loads(result.stdout)
    assert body["name"] == "tiny" and body["publications"] > 0
    assert body["deliveries"] == 2 * body["publications"]
    assert Path(body["run_dir"]).parent == tmp_path / "runs"
    assert plain(result.output)


ROWS = [{"matching": "topic", "publications_per_s": 20.0, "p50_ms": 5.7, "count": 40}]
QUICK = ["experiment", "publication-rate", "--quick", "--matching", "topic"]


def fake_run_experiment(
    spec: Any, settings: Any, out: Path, on_point: Any, on_stage: Any
) -> list[dict[str, Any]]:
    """Says its points and enters a stage, as the real one does; measures nothing."""
    for point in spec.quick:
        on_point(f"topic {point.label}")
    with on_stage("analysing 2 points of topic with numpy"):
        pass
    return ROWS


def test_experiment_with_json_prints_its_rows_and_counts_its_points_on_stderr(
    app: typer.Typer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(experiments, "run_experiment", fake_run_experiment)
    result = CliRunner().invoke(app, [*QUICK, "--runs", str(tmp_path), "--json"])
    assert result.exit_code == 0, result.output
    body = orjson.loads(result.stdout)
    assert (body["experiment"], body["x"], body["rows"]) == (
        "publication-rate", "publications_per_s", ROWS,
    )  # fmt: skip
    assert result.stderr.splitlines() == [  # the points; no stage
        "point 1 of 2: topic rate-5",
        "point 2 of 2: topic rate-20",
    ]
    assert plain(result.output)


def test_experiment_without_progress_says_no_stage(
    app: typer.Typer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(experiments, "run_experiment", fake_run_experiment)
    result = CliRunner().invoke(app, [*QUICK, "--runs", str(tmp_path), "--no-progress"])
    assert result.exit_code == 0, result.output
    assert "analysing" not in result.stderr and "point 2 of 2" in result.stderr


def test_experiment_says_each_stage_of_its_analysis_and_its_time_once_done(
    app: typer.Typer, tmp_path: Path
) -> None:
    args = [*QUICK, "--analytics", "numpy", "--runs", str(tmp_path)]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    stages = [line for line in result.stderr.splitlines() if not line.startswith("point ")]
    analysing, plotting = "analysing 2 points of topic with numpy", "plotting latency_vs_rate.png"
    assert [re.sub(r"[0-9]+\.[0-9] s$", "T s", line) for line in stages] == [
        f"{analysing}…",
        f"{analysing}: done in T s",
        f"{plotting}…",
        f"{plotting}: done in T s",
    ]
    assert "publish to delivery (ms)" in result.stdout  # the table, after them
    assert plain(result.stderr)  # plain lines: no live display without a terminal
