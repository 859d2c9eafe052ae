"""`tidings` itself: a command's run imports its own module, not every command's."""

from __future__ import annotations

import json
import subprocess
import sys

from tidings.ports import free_port

OTHERS = ("tidings.cli.pipeline", "tidings.cli.sim", "tidings.cli.placement", "tidings.cli.perf")


RUN = """
import atexit, json, sys
atexit.register(lambda: print(json.dumps(sorted(sys.modules)), file=sys.__stderr__))
sys.argv = ["tidings", *json.loads(sys.argv[1])]
from tidings.cli.main import main
main()
"""


def imported_by(*args: str) -> set[str]:
    """The modules a `tidings` run had imported when it ended."""
    command = [sys.executable, "-c", RUN, json.dumps(args)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120)
    return set(json.loads(done.stderr.strip().splitlines()[-1]))


def test_a_publish_imports_no_other_command_s_module() -> None:
    url = f"http://127.0.0.1:{free_port()}"  # nothing listens: the import is what is seen
    modules = imported_by("publish", "--url", url, "--topic", "a", "hello")
    assert "tidings.cli.broker" in modules
    assert not modules & set(OTHERS)


def test_help_still_lists_every_command() -> None:
    command = [sys.executable, "-m", "tidings.cli.main", "--help"]
    shown = subprocess.run(command, capture_output=True, text=True, timeout=120).stdout
    for name in ("publish", "pipeline", "experiment", "placement", "perf", "serverless"):
        assert name in shown, name
