"""Shared by the benchmarks: the machine header and JSON-line output."""

from __future__ import annotations

from typing import Any

import orjson

from tidings.environment import machine, versions

__all__ = ["emit", "machine", "percentile", "versions"]


def emit(record: dict[str, Any]) -> None:
    print(orjson.dumps(record).decode(), flush=True)


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q / 100 * len(ordered)))]
