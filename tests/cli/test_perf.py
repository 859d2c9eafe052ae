"""`tidings perf` as a user runs it: a process, one JSON line, one-line refusals."""

from __future__ import annotations

import signal
import subprocess
import sys

import orjson
from tests.conftest import require_service

from tidings.ports import free_port

SUMMARY_FIELDS = {"target", "sent_per_s", "received_per_s", "p50_ms", "p99_ms", "lost"}


def perf(*args: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "tidings.cli.main", "perf", *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=120)


def test_perf_against_nats_prints_the_summary_as_one_json_line() -> None:
    require_service("nats")
    result = perf("-t", "nats", "-y", "2", "-r", "100", "-z", "1", "--json", "--instance", "here")
    assert result.returncode == 0, result.stderr
    (line,) = result.stdout.splitlines()
    summary = orjson.loads(line)
    assert summary.keys() >= SUMMARY_FIELDS
    assert (summary["target"], summary["instance"], summary["lost"]) == ("nats", "here", 0)
    assert summary["received_per_s"] > 0
    assert "received" in result.stderr  # the per-second lines go to stderr with --json


def test_perf_without_a_url_runs_tidings_on_a_broker_of_its_own() -> None:
    result = perf("-y", "2", "-r", "50", "-z", "1", "--size", "150")
    assert result.returncode == 0, result.stderr
    assert "tidings at http://127.0.0.1:" in result.stdout
    assert "lost 0 of" in result.stdout


def test_perf_without_a_url_takes_messages_larger_than_the_default_limit() -> None:
    result = perf("--size", "300000", "--messages", "5", "--inflight", "2", "--json")
    assert result.returncode == 0, result.stderr
    summary = orjson.loads(result.stdout.splitlines()[-1])
    assert (summary["sent"], summary["received"], summary["lost"]) == (5, 5, 0)


def test_a_bad_option_is_one_line_naming_it_and_exit_2() -> None:
    result = perf("--size", "10")
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1 and "--size" in result.stderr
    assert "Traceback" not in result.stderr


def test_an_unreachable_peer_is_one_line_naming_it_and_how_it_was_tried() -> None:
    url = f"amqp://guest:guest@127.0.0.1:{free_port()}/"
    result = perf("-t", "rabbitmq", "--url", url, "-z", "1")
    assert result.returncode == 1
    assert result.stderr.count("\n") == 1
    assert "rabbitmq" in result.stderr and url in result.stderr


def test_ctrl_c_stops_the_run_and_still_prints_what_was_measured() -> None:
    require_service("nats")
    command = [sys.executable, "-m", "tidings.cli.main", "perf", "-t", "nats", "-r", "100"]
    process = subprocess.Popen(
        [*command, "-z", "60"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    assert process.stdout is not None
    first = process.stdout.readline()  # the first per-second line: the run is under way
    process.send_signal(signal.SIGINT)
    out, err = process.communicate(timeout=30)
    assert process.returncode == 0, err
    assert "time" in first
    assert "(stopped early)" in out and "sending rate avg" in out
    assert "Traceback" not in err
