"""`tidings serverless local | housekeeping`: the handlers on this machine, from a shell."""

from __future__ import annotations

import os
import subprocess
import sys

import orjson


def tidings(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tidings.cli.main", "serverless", *args],
        capture_output=True, text=True, timeout=120, env=dict(os.environ),
    )  # fmt: skip


def test_a_platform_it_does_not_know_is_one_line_and_exit_2() -> None:
    done = tidings("local", "--platform", "gcp")
    assert done.returncode == 2 and "--platform is aws or azure" in done.stderr
    assert "Traceback" not in done.stderr


def test_housekeeping_runs_every_chore_once_and_says_what_it_did_as_json() -> None:
    done = tidings("housekeeping", "--store", "memory://", "--push-s", "0")
    assert done.returncode == 0, done.stderr
    said = orjson.loads(done.stdout)
    assert said["messages_expired"] == 0 and said["subscribers_expired"] == 0
    assert "evaluations_resumed" in said and said["pushed_s"] < 1
