"""The elastic shapes' speedup, efficiency and Karp-Flatt, computed by Spark from the JSON
lines benchmarks/elastic.py wrote (committed results), agree with what it printed."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest
from pyspark.sql import SparkSession

from tidings.pipeline.elastic_scaling import elastic_scaling
from tidings.pipeline.report import report

RESULTS = Path(__file__).resolve().parents[2] / "benchmarks" / "results"
RUNS = ["elastic-100k-2026-11-25.jsonl", "elastic-100k-processes-2026-11-25.jsonl"]


def test_speedup_efficiency_and_karp_flatt_of_each_shape_against_its_1_1_1(
    spark: SparkSession,
) -> None:
    lines = spark.read.json([str(RESULTS / run) for run in RUNS])
    rows = {(r.matchers_in, r.shape): r for r in elastic_scaling(lines).collect()}
    printed = {
        (r.matchers_in or "this process", r.shape): r
        for r in lines.where("speedup is not null").collect()
    }
    assert set(rows) == set(printed)
    assert len(rows) == 8  # 4 shapes, two placements
    for key, row in rows.items():
        assert row.subscriptions == 100_000
        assert row.speedup == pytest.approx(printed[key].speedup, abs=1e-3)
        assert row.efficiency == pytest.approx(printed[key].efficiency, abs=1e-3)
        if row.matchers == 1:
            assert row.karp_flatt is None
        else:
            assert row.karp_flatt == pytest.approx(printed[key].karp_flatt, abs=2e-3)


def test_the_report_of_a_directory_of_elastic_results_writes_the_scaling_table(
    spark: SparkSession, tmp_path: Path
) -> None:
    for run in RUNS:
        (tmp_path / run).write_bytes((RESULTS / run).read_bytes())
    out = report(spark, tmp_path)
    table = orjson.loads((out / "elastic_scaling.json").read_bytes())
    assert {(r["matchers_in"], r["shape"]) for r in table} == {
        (placed, shape)
        for placed in ("this process", "processes")
        for shape in ("1-1-1", "1-2-1", "1-2-2", "1-3-1")
    }
    assert (out / "elastic_scaling.csv").exists()
    from PIL import Image

    for name in ("throughput", "speedup", "efficiency", "karp_flatt"):
        with Image.open(out / f"elastic_{name}.png") as figure:  # a real, readable PNG
            assert figure.format == "PNG" and figure.size == (600, 400)


def test_no_rows_draw_no_figures(tmp_path: Path) -> None:
    from tidings.pipeline.elastic_plots import elastic_plots

    assert elastic_plots([], tmp_path) == [] and list(tmp_path.iterdir()) == []
