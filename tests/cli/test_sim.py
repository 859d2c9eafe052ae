"""`tidings sim` and `tidings experiment` with `--json`: one JSON object on stdout, no live
line without a terminal."""

from __future__ import annotations

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


def test_experiment_with_json_prints_its_rows_and_counts_its_points_on_stderr(
    app: typer.Typer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rows = [{"matching": "topic", "publications_per_s": 20.0, "p50_ms": 5.7, "count": 40}]

    def run_experiment(spec: Any, settings: Any, out: Path, on_point: Any) -> Any:
        for point in spec.quick:
            on_point(f"topic {point.label}")
        return rows

    monkeypatch.setattr(experiments, "run_experiment", run_experiment)
    args = ["experiment", "publication-rate", "--quick", "--matching", "topic", "--runs",
            str(tmp_path), "--json"]  # fmt: skip
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    body = orjson.loads(result.stdout)
    assert (body["experiment"], body["x"], body["rows"]) == (
        "publication-rate", "publications_per_s", rows,
    )  # fmt: skip
    assert result.stderr.splitlines() == [
        "point 1 of 2: topic rate-5",
        "point 2 of 2: topic rate-20",
    ]
    assert plain(result.output)
