"""`tidings cost serverless | instances`, run through the one entry point."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import orjson
import pytest
import typer
from typer.testing import CliRunner

from tidings.cli import main
from tidings.errors import ErrorCode, TidingsError


@pytest.fixture(scope="module")
def app() -> typer.Typer:
    if not any(group.name == "cost" for group in main.app.registered_groups):
        main._register()
    return main.app


def run(app: typer.Typer, *args: str) -> tuple[int, str, BaseException | None]:
    result = CliRunner().invoke(app, ["cost", *args], env={"COLUMNS": "200"})
    return result.exit_code, result.output, result.exception


def test_serverless_prints_the_thesis_bill_as_json(app: typer.Typer) -> None:
    args = ["--executions", "3000000", "--memory-mb", "512", "--duration-ms", "1000", "--json"]
    code, out, _ = run(app, "serverless", *args)
    assert code == 0
    body = orjson.loads(out)
    assert body["prices"]["date"] == "2018-11-21"
    totals = {b["provider"]: round(b["total"], 2) for b in body["bills"]}
    assert totals == {"aws": 18.74, "azure": 18.00}


def test_serverless_prints_one_table_per_provider_on_a_terminal(app: typer.Typer) -> None:
    code, out, _ = run(app, "serverless", "--executions", "3000000", "--provider", "aws")
    assert code == 0
    assert "18.34" in out and "18.74" in out and "Service Bus" not in out


def test_an_unknown_provider_is_refused_naming_the_option(app: typer.Typer) -> None:
    _, _, exc = run(app, "serverless", "--provider", "gcp")
    assert isinstance(exc, TidingsError) and exc.field == "--provider"


def test_instances_reprints_the_study_table_for_one_queue(app: typer.Typer) -> None:
    code, out, _ = run(app, "instances", "--workload", "1 queue")
    assert code == 0
    assert "Up to 10k-20k" in out and "t3.xlarge (35% - 70%)" in out
    assert "c5.2xlarge (99%)" in out


def test_instances_json_carries_scores_capacities_and_bands(app: typer.Typer) -> None:
    code, out, _ = run(app, "instances", "--workload", "2 queues", "--required", "60000", "--json")
    assert code == 0
    (workload,) = orjson.loads(out)["workloads"]
    (row,) = workload["rows"]
    assert [c["instance"] for c in row["ranked"][:3]] == ["c5.xlarge", "m5.xlarge", "F4s"]
    assert row["ranked"][0]["score"] == pytest.approx(60_000 / 140.55)
    assert round(row["ranked"][2]["capacity"]) == 86


def test_instances_takes_perf_json_lines_with_the_instance_on_the_command_line(
    app: typer.Typer, tmp_path: Path
) -> None:
    perf = tmp_path / "perf.jsonl"
    line = {"target": "rabbitmq", "sent_per_s": 30e3, "received_per_s": 30e3, "topics": 2}
    perf.write_bytes(orjson.dumps(line | {"p50_ms": 1.0, "p99_ms": 4.0, "lost": 0}) + b"\n")
    args = ["--throughputs", str(perf), "--instance", "c5.xlarge", "--json"]
    code, out, _ = run(app, "instances", *args)
    assert code == 0
    (workload,) = orjson.loads(out)["workloads"]
    assert workload["workload"] == "2 queues"
    assert [b["high"] for b in workload["bands"]] == [30_000]


def test_an_unknown_instance_is_refused_naming_the_option(app: typer.Typer, tmp_path: Path) -> None:
    perf = tmp_path / "perf.jsonl"
    perf.write_bytes(orjson.dumps({"received_per_s": 10.0}) + b"\n")
    _, _, exc = run(app, "instances", "--throughputs", str(perf), "--instance", "t9.huge")
    assert isinstance(exc, TidingsError)
    assert (exc.code, exc.field) == (ErrorCode.INVALID_FIELD, "--instance")


def test_a_malformed_price_file_is_one_line_on_stderr_naming_the_field(tmp_path: Path) -> None:
    prices = tmp_path / "prices.toml"
    head = 'source = "s"\ndate = "2024"\ncurrency = "USD"\nregion = "r"\n'
    prices.write_text(head + '[instances.x]\nplatform = "AWS"\nmonthly = -1\n')
    result = subprocess.run(
        [sys.executable, "-m", "tidings.cli.main", "cost", "instances", "--prices", str(prices)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr
    assert f"{prices}:instances.x.monthly" in result.stderr
