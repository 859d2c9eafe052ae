"""Shared by the benchmarks: the machine header and JSON-line output."""

from __future__ import annotations

import os
import platform
import sys
from importlib import metadata
from typing import Any

import orjson


def machine() -> dict[str, Any]:
    cpu = "unknown"
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    return {
        "platform": platform.platform(),
        "cpu": cpu,
        "cores": os.cpu_count(),
        "python": sys.version.split()[0],
    }


def versions(*packages: str) -> dict[str, str]:
    return {p: metadata.version(p) for p in ("tidings", *packages)}


def emit(record: dict[str, Any]) -> None:
    print(orjson.dumps(record).decode(), flush=True)


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q / 100 * len(ordered)))]
