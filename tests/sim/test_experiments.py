"""An experiment in quick mode writes its tables and plots."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

from tidings.sim.experiments import ExperimentSettings, experiment, run_experiment


@pytest.fixture(scope="module")
def quick_rate(broker_url: str, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Any]:
    out = tmp_path_factory.mktemp("experiment")
    settings = ExperimentSettings(
        ["topic"], quick=True, url=broker_url, progress=False, analytics="numpy"
    )
    rows = run_experiment(experiment("publication-rate"), settings, out)
    return out, rows


def test_a_quick_rate_experiment_writes_csv_json_and_the_latency_vs_rate_plot(
    quick_rate: tuple[Path, Any],
) -> None:
    out, rows = quick_rate
    for name in ("latency.csv", "latency.json", "latency_vs_rate.png"):
        assert (out / name).stat().st_size > 0
    assert (out / "topic" / "report" / "latency_vs_rate.png").is_file()
    assert [(r["matching"], r["publications_per_s"]) for r in rows] == [
        ("topic", 20.0),
        ("topic", 5.0),
    ]
    assert all(r["count"] > 0 and r["p50_ms"] <= r["p99_ms"] for r in rows)
    assert orjson.loads((out / "latency.json").read_bytes()) == rows


def test_an_unknown_experiment_is_refused_naming_it() -> None:
    from tidings.errors import ErrorCode, TidingsError

    with pytest.raises(TidingsError) as caught:
        experiment("latency")
    assert caught.value.code == ErrorCode.INVALID_FIELD and caught.value.field == "NAME"


def test_the_printed_table_is_rounded_and_sorted_by_the_swept_number(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from tidings.cli.sim import print_latency

    rows = [
        {"matching": "topic", "publications_per_s": 20.0, "p50_ms": 5.6868791580200195},
        {"matching": "topic", "publications_per_s": 5.0, "p50_ms": 412.3456, "count": 12345},
    ]
    print_latency(rows, "publications_per_s")
    lines = [line for line in capsys.readouterr().out.splitlines() if "topic" in line]
    assert ["412.3" in lines[0], "5.69" in lines[1]] == [True, True]
    assert "12,345" in lines[0] and "5.6868" not in "".join(lines)
