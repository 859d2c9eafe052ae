"""Run directories: `runs/<name>-<timestamp>/` with the config and the machine it ran on."""

from __future__ import annotations

import platform
import time
from pathlib import Path
from typing import Any

import orjson

from tidings.environment import machine, versions

PACKAGES = ("httpx", "websockets", "msgspec", "numpy", "pyspark", "matplotlib")


def create(root: Path, name: str) -> Path:
    """A new, empty run directory under `root` (a suffix keeps two runs in a second apart)."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    for n in range(1000):
        path = root / (f"{name}-{stamp}" + (f"-{n}" if n else ""))
        try:
            path.mkdir(parents=True)
            return path
        except FileExistsError:
            continue
    raise FileExistsError(f"too many runs named {name} at {stamp} under {root}")


def environment() -> dict[str, Any]:
    """The machine and the versions (as every result file has them), and when and where."""
    return {
        **machine(),
        "hostname": platform.node(),
        "started_at": time.time(),
        "packages": versions(*PACKAGES),
    }


def write_json(path: Path, value: Any) -> None:
    path.write_bytes(orjson.dumps(value, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS))
