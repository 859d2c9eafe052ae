"""Run directories: `runs/<name>-<timestamp>/` with the config and the machine it ran on."""

from __future__ import annotations

import os
import platform
import sys
import time
from importlib import metadata
from pathlib import Path
from typing import Any

import orjson

PACKAGES = ("tidings", "httpx", "websockets", "msgspec", "numpy", "pyspark", "matplotlib")


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


def _version(package: str) -> str | None:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return None


def environment() -> dict[str, Any]:
    return {
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "machine": platform.machine(),
        "processor": platform.processor() or None,
        "cpus": os.cpu_count(),
        "hostname": platform.node(),
        "started_at": time.time(),
        "packages": {p: _version(p) for p in PACKAGES},
    }


def write_json(path: Path, value: Any) -> None:
    path.write_bytes(orjson.dumps(value, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS))
