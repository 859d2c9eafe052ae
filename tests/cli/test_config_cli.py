"""`tidings config show`: the effective settings and their sources; `serve --config`."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import orjson


def tidings(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tidings.cli.main", *args],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, **(env or {})},
    )


def test_show_says_each_setting_s_value_and_source(tmp_path: Path) -> None:
    path = tmp_path / "tidings.toml"
    path.write_text('admin_token = "hunter2-token"\n[queues]\nmax_attempts = 3\n')
    done = tidings("config", "show", "--config", str(path), "--json", env={"TIDINGS_PORT": "9"})
    assert done.returncode == 0, done.stderr
    lines = {line["setting"]: line for line in map(orjson.loads, done.stdout.splitlines())}
    assert lines["queues.max_attempts"] == {
        "setting": "queues.max_attempts",
        "value": 3,
        "source": "file",
    }
    assert (lines["port"]["value"], lines["port"]["source"]) == (9, "environment")
    assert lines["host"]["source"] == "default"
    table = tidings("config", "show", "--config", str(path))
    assert "hunter2-token" not in table.stdout and "(set)" in table.stdout


def test_show_never_prints_a_secret_nor_a_password_in_a_url_even_as_json(tmp_path: Path) -> None:
    path = tmp_path / "tidings.toml"
    path.write_text('admin_token = "hunter2-token"\n[webhooks]\nsecrets_key = "k3y-material"\n')
    env = {"TIDINGS_STORE_URL": "postgresql://tidings:pa55word@db.example:5432/tidings"}
    for args in (["--json"], []):
        done = tidings("config", "show", "--config", str(path), *args, env=env)
        assert done.returncode == 0, done.stderr
        for secret in ("hunter2-token", "k3y-material", "pa55word"):
            assert secret not in done.stdout
        assert "tidings:***@" in done.stdout  # the table may wrap the rest
    assert (
        "postgresql://tidings:***@db.example:5432/tidings"
        in tidings("config", "show", "--config", str(path), "--json", env=env).stdout
    )


def test_an_unknown_key_is_one_line_and_exit_2(tmp_path: Path) -> None:
    path = tmp_path / "tidings.toml"
    path.write_text("[elastic]\nautoscal = true\n")
    done = tidings("serve", "--config", str(path), "--data-dir", str(tmp_path))
    assert done.returncode == 2 and "elastic.autoscal" in done.stderr
    assert "Traceback" not in done.stderr
