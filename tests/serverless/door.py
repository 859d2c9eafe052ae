"""A platform's front door on this machine (`tidings serverless local`), as a subprocess on a
free port of 127.0.0.1, its function instances over a PostgreSQL schema of the test's own."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import httpx
import orjson
from tests.conftest import PG

from tidings.ports import free_port
from tidings.server import stop


def instance_env(schema: str, **more: str) -> dict[str, str]:
    return {**os.environ, "TIDINGS_STORE_URL": f"{PG}?schema={schema}", **more}


@contextmanager
def door(schema: str, *args: str, **env: str) -> Iterator[str]:
    """The front door's URL once it answers (its first request is a cold start)."""
    port = free_port()
    cmd = [sys.executable, "-m", "tidings.cli.main", "serverless", "local", "--port", str(port)]
    proc = subprocess.Popen(
        [*cmd, *args], env=instance_env(schema, **env), stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx.get(f"{url}/healthz", timeout=30).status_code == 200:
                    break
            except httpx.TransportError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("the front door did not start") from None
                time.sleep(0.1)
        yield url
    finally:
        stop(proc)
        assert proc.stderr is not None
        proc.stderr.close()


def invoke(platform: str, payloads: list[Any], schema: str, **env: str) -> list[Any]:
    """Each payload invoked in order in one fresh function instance: its answers."""
    lines = b"".join(orjson.dumps(p) + b"\n" for p in payloads)
    done = subprocess.run(
        [sys.executable, "-m", "tidings.serverless.invoke", platform],
        input=lines, capture_output=True, env=instance_env(schema, **env), timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    return [orjson.loads(line) for line in done.stdout.splitlines()]


def scenarios(url: str) -> subprocess.CompletedProcess[str]:
    """The thesis's correctness scenarios through its own operations, receiving by long
    polls (a function serves no WebSocket)."""
    cmd = [sys.executable, "-m", "tidings.cli.main", "scenarios", "--url", url]
    return subprocess.run(
        [*cmd, "--api", "thesis", "--receive", "pull", "--timeout", "20"],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
