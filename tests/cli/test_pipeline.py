from __future__ import annotations

import inspect
from pathlib import Path

import orjson
import pytest
import typer
from pyspark.sql import SparkSession
from typer.testing import CliRunner

from tidings.cli.pipeline import match, parse_since, register
from tidings.errors import ErrorCode, TidingsError
from tidings.model import Publication, Subscriber, Subscription
from tidings.store import open_store


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


@pytest.mark.spark
def test_match_delivers_the_logged_publications_into_the_store(
    spark: SparkSession, tmp_path: Path
) -> None:
    store = open_store(f"sqlite:///{tmp_path / 'tidings.db'}")
    store.add_subscriber(Subscriber("alice", "hash", 0.0))
    store.add_subscription(Subscription("s1", "alice", "topic", topics=("a/*",)))
    pubs = [Publication("p1", 1.0, None, ("a/b",)), Publication("p2", 2.0, None, ("c",))]
    log = tmp_path / "log" / "publications"
    log.mkdir(parents=True)
    text = "".join(orjson.dumps(p.to_json()).decode() + "\n" for p in pubs)
    (log / "0000000000001-1-000001.jsonl").write_text(text)
    args = ["pipeline", "match", "--data-dir", str(tmp_path), "--no-functions"]
    result = CliRunner().invoke(cli(), args)
    assert result.exit_code == 0, result.output
    assert "2 publications, 1 deliveries enqueued" in result.output
    assert [m.publication_id for m in store.lease("alice", 10, 30.0, 5, 10.0)] == ["p1"]
