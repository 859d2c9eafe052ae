"""`tidings placement solve`, run through the one entry point."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest
import typer
from typer.testing import CliRunner

from tidings.cli import main
from tidings.errors import ErrorCode, TidingsError

KEYS = {"regions", "mode", "percentile_ms", "cost", "meets", "configurations", "seconds"}


@pytest.fixture(scope="module")
def app() -> typer.Typer:
    if not any(group.name == "placement" for group in main.app.registered_groups):
        main._register()
    return main.app


def instance(**changes: Any) -> dict[str, Any]:
    """Two regions; a publisher near region 0, subscribers near each."""
    body: dict[str, Any] = {
        "regions": ["near", "far"],
        "L": [[1.0, 10.0], [2.0, 20.0], [30.0, 3.0]],
        "LR": [[0.0, 5.0], [5.0, 0.0]],
        "alpha": [1e-9, 2e-9],
        "beta": [1e-8, 2e-8],
        "publishers": [{"client": 0, "sizes": [100, 300]}],
        "subscribers": [1, 2],
        "ratio": 100,
        "max_ms": 10,
    }
    return body | changes


def write(tmp_path: Path, body: dict[str, Any] | bytes) -> Path:
    path = tmp_path / "instance.json"
    path.write_bytes(body if isinstance(body, bytes) else orjson.dumps(body))
    return path


def solve(app: typer.Typer, path: Path, *args: str) -> tuple[int, str, BaseException | None]:
    result = CliRunner().invoke(app, ["placement", "solve", str(path), *args])
    return result.exit_code, result.output, result.exception


def test_solve_prints_one_json_object_with_the_chosen_configuration(
    app: typer.Typer, tmp_path: Path
) -> None:
    code, out, _ = solve(app, write(tmp_path, instance()))
    assert code == 0
    body = orjson.loads(out)
    assert set(body) == KEYS
    assert (body["regions"], body["mode"], body["meets"]) == ([0, 1], "routed", True)
    assert body["percentile_ms"] == 9.0 and body["configurations"] == 4


def test_modes_restrict_the_candidates_to_the_papers_multipub_d(
    app: typer.Typer, tmp_path: Path
) -> None:
    _, out, _ = solve(app, write(tmp_path, instance(modes=["direct"])))
    body = orjson.loads(out)
    assert (body["mode"], body["meets"], body["configurations"]) == ("direct", False, 3)


def test_high_latency_reports_the_regions_it_forced(app: typer.Typer, tmp_path: Path) -> None:
    body = instance(modes=["direct"], max_ms=1000)
    code, out, _ = solve(app, write(tmp_path, body), "--high-latency")
    assert code == 0 and orjson.loads(out)["forced"] == []


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"publishers": [{"client": 0, "sizes": [1]}] * 3 + [{"client": "x", "sizes": []}]},
         "publishers[3].client"),
        ({"publishers": [{"client": 9, "sizes": [1]}]}, "publishers[0].client"),
        ({"subscribers": [1, -2]}, "subscribers[1]"),
        ({"L": [[1.0, 2.0], [3.0]]}, "L[1]"),
        ({"LR": [[0.0, 5.0], [5.0, 1.0]]}, "LR[1][1]"),
        ({"alpha": [1.0]}, "alpha"),
        ({"ratio": 0}, "ratio"),
        ({"modes": ["sideways"]}, "modes[0]"),
        ({"extra": 1}, "extra"),
    ],
)  # fmt: skip
def test_a_bad_field_is_refused_naming_its_path(
    app: typer.Typer, tmp_path: Path, changes: dict[str, Any], field: str
) -> None:
    _, _, exc = solve(app, write(tmp_path, instance(**changes)))
    assert isinstance(exc, TidingsError)
    assert (exc.code, exc.field) == (ErrorCode.INVALID_FIELD, field)


def test_a_missing_field_is_refused_naming_it(app: typer.Typer, tmp_path: Path) -> None:
    body = instance()
    del body["max_ms"]
    _, _, exc = solve(app, write(tmp_path, body))
    assert isinstance(exc, TidingsError) and exc.field == "max_ms"


def test_a_bad_file_is_one_line_on_stderr_and_exit_status_2(tmp_path: Path) -> None:
    path = write(tmp_path, b"{not json")
    result = subprocess.run(
        [sys.executable, "-m", "tidings.cli.main", "placement", "solve", str(path)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr
    assert str(path) in result.stderr


def test_a_missing_file_is_refused_naming_it(app: typer.Typer, tmp_path: Path) -> None:
    _, _, exc = solve(app, tmp_path / "absent.json")
    assert isinstance(exc, TidingsError) and exc.field == str(tmp_path / "absent.json")


@pytest.mark.parametrize(
    ("args", "field"),
    [
        (["--region", "a=http://127.0.0.1:1", "--topic", "t"], "--topic"),
        (["--region", "a=http://127.0.0.1:1", "--topic", "t=101:5"], "--topic"),
        (["--region", "b=http://127.0.0.1:1", "--topic", "t=75:5"], "--region"),
        (["--region", "a=127.0.0.1", "--topic", "t=75:5"], "--region"),
    ],
)
def test_the_controller_refuses_bad_regions_and_topics_naming_the_option(
    app: typer.Typer, tmp_path: Path, args: list[str], field: str
) -> None:
    world = {k: v for k, v in instance(regions=["a"], L=[[1.0]], LR=[[0.0]], alpha=[0.0],
             beta=[0.0]).items() if k in ("regions", "L", "LR", "alpha", "beta")}  # fmt: skip
    path = tmp_path / "world.json"
    path.write_bytes(orjson.dumps(world))
    result = CliRunner().invoke(app, ["placement", "controller", "--world", str(path), *args])
    assert isinstance(result.exception, TidingsError) and result.exception.field == field
