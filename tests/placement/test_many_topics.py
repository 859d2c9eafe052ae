"""Many topics on Spark: the same answers as the single-topic solver, one row per topic."""

from __future__ import annotations

from pathlib import Path

import msgspec
import orjson
import pytest
import typer
from pyspark.sql import SparkSession
from typer.testing import CliRunner

from tidings.cli import main
from tidings.placement import scenarios, solver
from tidings.placement.files import Topic, to_instance
from tidings.placement.many_topics import read_topics, solve_row, solve_topics

WORLD = scenarios.world_of_cities(60, seed=4)


def topics_file(tmp_path: Path, rows: list[dict[str, object]]) -> Path:
    path = tmp_path / "topics.jsonl"
    path.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in rows))
    return path


def single(row: dict[str, object]) -> dict[str, object]:
    fields = {k: v for k, v in row.items() if k != "topic"}
    choice = solver.solve(to_instance(WORLD, msgspec.convert(fields, Topic)))
    e = choice.evaluation
    return {"regions": list(e.configuration.regions), "mode": e.configuration.mode.value,
            "percentile_ms": e.percentile_ms, "cost": e.cost, "meets": e.meets}  # fmt: skip


def test_a_topic_naming_a_client_outside_the_world_gets_an_error_naming_the_field() -> None:
    row = {"topic": "bad", "publishers": [{"client": 999, "sizes": [1.0]}], "subscribers": [1],
           "ratio": 75.0, "max_ms": 100.0, "modes": None}  # fmt: skip
    answer = solve_row(WORLD, row)
    assert answer["error"].startswith("publishers[0].client:") and answer["regions"] is None


def test_a_topic_with_a_bad_ratio_gets_an_error_naming_the_field() -> None:
    row = {"topic": "bad", "publishers": [], "subscribers": [], "ratio": 0.0, "max_ms": 1.0}
    assert "`ratio`" in solve_row(WORLD, row)["error"]


@pytest.mark.spark
def test_spark_answers_every_topic_as_the_single_topic_solver_does(
    spark: SparkSession, tmp_path: Path
) -> None:
    rows = scenarios.random_topics(60, 12, 4, 5, seed=2, messages=2)
    rows[3]["modes"] = ["routed"]
    frame = read_topics(spark, topics_file(tmp_path, rows))
    answers = {r["topic"]: r.asDict() for r in solve_topics(frame, WORLD, 2).collect()}
    assert sorted(answers) == sorted(str(r["topic"]) for r in rows)
    for row in rows:
        got, expected = answers[row["topic"]], single(row)
        assert got["error"] is None
        assert {k: got[k] for k in expected} == expected
    assert answers["t3"]["configurations"] == 2**10 - 1


@pytest.mark.spark
def test_the_cli_writes_one_row_per_topic(spark: SparkSession, tmp_path: Path) -> None:
    if not any(group.name == "placement" for group in main.app.registered_groups):
        main._register()
    app: typer.Typer = main.app
    world = tmp_path / "world.json"
    world.write_bytes(orjson.dumps({"regions": WORLD.regions, "L": WORLD.L, "LR": WORLD.LR,
                                    "alpha": WORLD.alpha, "beta": WORLD.beta}))  # fmt: skip
    table = topics_file(tmp_path, scenarios.random_topics(60, 5, 3, 3, seed=3, messages=1))
    out = tmp_path / "answers"
    args = ["placement", "solve-topics", str(table), "--world", str(world), "--out", str(out),
            "--format", "json"]  # fmt: skip
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    summary = orjson.loads(result.output.strip().splitlines()[-1])
    assert (summary["topics"], summary["failed"]) == (5, 0)
    written = [
        orjson.loads(line) for f in out.glob("*.json") for line in f.read_bytes().splitlines()
    ]
    assert sorted(r["topic"] for r in written) == [f"t{i}" for i in range(5)]
