"""Shared by the benchmarks: the machine header and JSON-line output."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

import orjson

from tidings import environment

__all__ = ["emit", "machine", "percentile", "versions"]


def machine() -> dict[str, Any]:
    """The machine, with its load average as the run starts: on a shared machine, the
    figures of a run are read beside it."""
    return environment.machine() | {"load_average": [round(x, 2) for x in os.getloadavg()]}


def emit(record: dict[str, Any]) -> None:
    print(orjson.dumps(record).decode(), flush=True)


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q / 100 * len(ordered)))]


def versions(*packages: str) -> dict[str, str]:
    """Installed versions, and the source revision measured (`-dirty`: uncommitted edits)."""
    return environment.versions(*packages) | {"source": source_revision()}


def source_revision() -> str:
    def git(*args: str) -> str:
        here = Path(__file__).parent
        done = subprocess.run(["git", *args], cwd=here, capture_output=True, text=True)
        return done.stdout.strip() if done.returncode == 0 else ""

    revision = git("rev-parse", "--short", "HEAD") or "unknown"
    return revision + ("-dirty" if git("status", "--porcelain", "--untracked-files=no") else "")
