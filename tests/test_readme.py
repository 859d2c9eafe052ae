"""The README's shell tour and the thesis's calls, run as written against a real broker: a
newcomer who follows them top to bottom gets what the README says."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tidings.server import broker_process

README = Path(__file__).resolve().parents[1] / "README.md"


def blocks() -> list[str]:
    return re.findall(r"```sh\n(.*?)```", README.read_text(), re.S)


@pytest.fixture(scope="module")
def port(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    for tool in ("curl", "jq"):
        if shutil.which(tool) is None:
            if os.environ.get("CI", "").lower() == "true":
                pytest.fail(f"{tool} is required under CI (Debian: apt-get install {tool})")
            pytest.skip(f"{tool} is not installed")
    with broker_process(tmp_path_factory.mktemp("readme")) as (_, url):
        yield url.rsplit(":", 1)[1]


def run(block: str, port: str) -> subprocess.CompletedProcess[str]:
    script = "set -euo pipefail\n" + block.replace("localhost:8080", f"localhost:{port}")
    return subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=120)


def test_the_five_minute_tour_delivers_what_it_says(port: str) -> None:
    [tour] = [b for b in blocks() if "# 1. Register a subscriber" in b]
    done = run(tour, port)
    assert done.returncode == 0, done.stderr
    assert '"hello"\n"hot!"\n' in done.stdout  # "fine" is 20 degrees: not delivered
    assert '"acked":["' in done.stdout and '"unknown":[]' in done.stdout


def test_the_thesis_s_calls_work_as_written(port: str) -> None:
    [thesis] = [b for b in blocks() if "RegisterSubscriber" in b]
    done = run(thesis, port)
    assert done.returncode == 0, done.stderr
    assert '"deliveries":2' in done.stdout and '"message":"Publication text."' in done.stdout
