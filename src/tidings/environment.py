"""Where a measurement ran: the machine and the versions, for result files and run directories."""

from __future__ import annotations

import os
import platform
import sys
from importlib import metadata
from typing import Any

from tidings.extras import DISTRIBUTION


def machine() -> dict[str, Any]:
    return {
        "platform": platform.platform(),
        "cpu": _cpu_model(),
        "cores": os.cpu_count(),
        "python": sys.version.split()[0],
    }


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            return next(
                line.split(":", 1)[1].strip() for line in f if line.startswith("model name")
            )
    except (OSError, StopIteration):
        return "unknown"


def versions(*packages: str) -> dict[str, str]:
    """Installed versions of Tidings and `packages` ("absent" for one that is not installed)."""
    return {"tidings": _version(DISTRIBUTION)} | {p: _version(p) for p in packages}


def _version(package: str) -> str:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return "absent"
