"""A cold start collects no garbage on a platform, and leaves the collector as it found it
everywhere else (a test or a tool that imports a handler keeps its collector)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from tidings.serverless.cold import PLATFORM_VARIABLES

# the handler imported, then the broker built by a first request: the collector's state at
# each step, and whether what was alive at the end was frozen
PROBE = """
import asyncio, gc, sys
import orjson
from tidings.serverless import {module}
imported = gc.isenabled()
asyncio.run({module}.runtime.started())
print(orjson.dumps([imported, gc.isenabled(), gc.get_freeze_count() > 0]).decode())
"""


def probe(module: str, tmp_path: Path, **env: str) -> list[bool]:
    base = {k: v for k, v in os.environ.items() if k not in PLATFORM_VARIABLES}
    env = {**base, "TIDINGS_STORE_URL": "memory://", "TIDINGS_DATA_DIR": str(tmp_path), **env}
    code = PROBE.format(module=module)
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, check=True)
    return list(orjson.loads(done.stdout.splitlines()[-1]))


@pytest.mark.parametrize(
    ("module", "variable", "value"),
    [
        ("aws", "AWS_LAMBDA_FUNCTION_NAME", "tidings"),
        ("azure", "FUNCTIONS_WORKER_RUNTIME", "python"),
    ],
)
def test_on_a_platform_the_collector_is_held_until_the_broker_has_loaded_then_what_lives_is_frozen(
    module: str, variable: str, value: str, tmp_path: Path
) -> None:
    assert probe(module, tmp_path, **{variable: value}) == [False, True, True]


def test_elsewhere_importing_a_handler_leaves_the_collector_alone(tmp_path: Path) -> None:
    assert probe("aws", tmp_path) == [True, True, False]
