from __future__ import annotations

import inspect
import threading
import time
from pathlib import Path

import orjson
import pytest
import typer
from pyspark.sql import SparkSession
from tests.pipeline.workloads import line, write_log
from typer.testing import CliRunner

from tidings.cli.pipeline import match, parse_since, register, report_summary, show_report
from tidings.errors import ErrorCode, TidingsError
from tidings.model import Publication, Subscriber, Subscription
from tidings.store import Store, open_store


def cli() -> typer.Typer:
    app = typer.Typer()

    @app.callback()
    def root() -> None:
        """tidings"""

    register(app)
    return app


def test_since_takes_epoch_seconds_or_an_iso_time_and_names_the_option_otherwise() -> None:
    assert parse_since("1700000000.5") == 1700000000.5
    assert parse_since("2023-11-14T22:13:20+00:00") == 1700000000.0
    with pytest.raises(TidingsError) as caught:
        parse_since("yesterday")
    assert (caught.value.code, caught.value.field) == (ErrorCode.INVALID_FIELD, "--since")


def test_report_on_a_directory_without_logs_fails_before_spark_starts(tmp_path: Path) -> None:
    result = CliRunner().invoke(cli(), ["pipeline", "report", str(tmp_path)])
    assert isinstance(result.exception, TidingsError)
    assert result.exception.code is ErrorCode.NOT_FOUND


def test_an_unknown_algorithm_is_refused_naming_the_option(tmp_path: Path) -> None:
    args = ["pipeline", "match", "--data-dir", str(tmp_path), "--algorithm", "magic"]
    result = CliRunner().invoke(cli(), args)
    assert isinstance(result.exception, TidingsError)
    assert (result.exception.code, result.exception.field) == (
        ErrorCode.INVALID_FIELD,
        "--algorithm",
    )


def test_a_negative_number_of_driver_lines_is_refused_naming_the_option(tmp_path: Path) -> None:
    args = ["pipeline", "replay", "--since", "0", "--data-dir", str(tmp_path), "--driver-lines"]
    result = CliRunner().invoke(cli(), [*args, "-1"])
    assert isinstance(result.exception, TidingsError)
    assert (result.exception.code, result.exception.field) == (
        ErrorCode.INVALID_FIELD,
        "--driver-lines",
    )


def test_follow_triggers_a_micro_batch_every_quarter_second_by_default() -> None:
    assert inspect.signature(match).parameters["trigger"].default == 0.25


def logged(tmp_path: Path) -> Store:
    """alice's subscription to a/*, and a log of two publications, one of them for her."""
    store = open_store(f"sqlite:///{tmp_path / 'tidings.db'}")
    store.add_subscriber(Subscriber("alice", "hash", 0.0))
    store.add_subscription(Subscription("s1", "alice", "topic", topics=("a/*",)))
    pubs = [Publication("p1", 1.0, None, ("a/b",)), Publication("p2", 2.0, None, ("c",))]
    log = tmp_path / "log" / "publications"
    log.mkdir(parents=True)
    text = "".join(orjson.dumps(p.to_json()).decode() + "\n" for p in pubs)
    (log / "0000000000001-1-000001.jsonl").write_text(text)
    return store


def plain(output: str) -> bool:
    """No escape codes, no bars, no spinners: what a pipe or a file should receive."""
    return "\x1b[" not in output and not any(c in output for c in "━✓⠋⠙")


@pytest.mark.spark
def test_match_delivers_the_logged_publications_and_ends_with_a_table(
    spark: SparkSession, tmp_path: Path
) -> None:
    store = logged(tmp_path)
    args = ["pipeline", "match", "--data-dir", str(tmp_path), "--no-functions"]
    result = CliRunner().invoke(cli(), args)
    assert result.exit_code == 0, result.output
    assert "pipeline match: 1 batch(es)" in result.stdout
    (row,) = [line.split() for line in result.stdout.splitlines() if "batch-" in line]
    assert [cell for cell in row if cell not in "│┃|"][1:3] == [
        "2",
        "1",
    ]  # publications, deliveries
    assert plain(result.output)
    assert [m.publication_id for m in store.lease("alice", 10, 30.0, 5, 10.0)] == ["p1"]


@pytest.mark.spark
def test_match_and_replay_with_json_print_one_object_each_and_nothing_else(
    spark: SparkSession, tmp_path: Path
) -> None:
    logged(tmp_path)
    where = ["--data-dir", str(tmp_path), "--no-functions", "--json"]
    matched = CliRunner().invoke(cli(), ["pipeline", "match", *where])
    assert matched.exit_code == 0, matched.output
    body = orjson.loads(matched.stdout)
    assert (body["publications"], body["enqueued"], body["quarantined"]) == (2, 1, 0)
    assert [b["enqueued"] for b in body["batches"]] == [1] and body["seconds"] > 0
    replayed = CliRunner().invoke(cli(), ["pipeline", "replay", "--since", "0", *where])
    assert replayed.exit_code == 0, replayed.output
    again = orjson.loads(replayed.stdout)
    assert (again["publications"], again["enqueued"]) == (2, 0)  # p1 was delivered already
    assert set(again) >= {"batch", "quarantined", "version", "seconds"}
    assert plain(matched.output + replayed.output)


@pytest.mark.spark
def test_follow_says_at_once_that_spark_starts_then_writes_a_json_line_per_batch(
    spark: SparkSession, tmp_path: Path
) -> None:
    logged(tmp_path)

    def stop_after_the_first_batch() -> None:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            for query in spark.streams.active:
                progress = query.lastProgress
                if progress and progress["numInputRows"] > 0:
                    query.stop()
                    return
            time.sleep(0.1)

    stopper = threading.Thread(target=stop_after_the_first_batch, daemon=True)
    stopper.start()
    args = ["pipeline", "match", "--follow", "--data-dir", str(tmp_path), "--no-functions"]
    result = CliRunner().invoke(cli(), [*args, "--json"])
    stopper.join()
    assert result.exit_code == 0, result.output
    assert result.stderr.startswith("starting Spark (local[2]), then waiting for the first")
    (line,) = result.stdout.splitlines()
    batch = orjson.loads(line)
    assert (batch["publications"], batch["enqueued"]) == (2, 1) and batch["at"] > 0
    assert plain(result.output)


@pytest.mark.spark
def test_report_with_json_names_the_files_and_holds_the_latency_table(
    spark: SparkSession, tmp_path: Path
) -> None:
    run = tmp_path / "run"
    pubs = [Publication(f"p{i}", 1000.0 + i, None, ("t",)) for i in range(10)]
    write_log(run / "publications", "0000000000001-1-000001", [line(p) for p in pubs])
    events = [
        {"publication_id": p.id, "subscriber_id": "s", "subscription_ids": ["x"],
         "event": "delivered", "kind": "topic", "at": p.published_at + (i + 1) / 1000}
        for i, p in enumerate(pubs)
    ]  # fmt: skip
    write_log(run / "deliveries", "0000000000001-1-000001", [line(e) for e in events])
    result = CliRunner().invoke(cli(), ["pipeline", "report", str(run), "--json"])
    assert result.exit_code == 0, result.output
    body = orjson.loads(result.stdout)
    assert body["out"] == str(run / "report")
    assert str(run / "report" / "latency.csv") in body["files"]
    (delivery,) = body["latency"]
    assert (delivery["latency"], delivery["count"], delivery["max_ms"]) == (
        "publish_to_delivery",
        10,
        pytest.approx(10.0),
    )
    assert plain(result.output)


def test_the_report_s_table_holds_each_run_s_latency_and_names_the_files_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    written = tmp_path / "report"
    written.mkdir()
    rows = [{"run": "r100", "latency": "publish_to_delivery", "count": 10, "p50_ms": 5.5,
             "p95_ms": 9.55, "p99_ms": 9.91, "max_ms": 10.0}]  # fmt: skip
    (written / "latency.json").write_bytes(orjson.dumps(rows))
    (written / "latency.csv").write_text("run\n")
    show_report(report_summary(written, 12.3))
    out = capsys.readouterr().out
    (row,) = [text.split() for text in out.splitlines() if "publish_to_delivery" in text]
    assert row == ["r100", "publish_to_delivery", "10", "5.50", "9.55", "9.91", "10"]
    assert "2 files in " in out and "latency.csv" in out and plain(out)
