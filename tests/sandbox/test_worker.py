"""The worker's Python walls: the audit guard covers a subscription's module-level code as it
covers its calls (checked in a process of its own: an audit hook cannot be removed)."""

from __future__ import annotations

import subprocess
import sys

PROGRAM = """
import sys
from tidings.sandbox.worker import Worker, audit
sys.addaudithook(audit)
worker = Worker(1.0, walls=False)  # full builtins: the guard alone stands
source = "open('/dev/null')\\ndef match(publication):\\n    return True\\n"
try:
    worker.load({"hash": "h", "source": source})
except PermissionError as exc:
    print("refused:", exc)
else:
    print("ran")
fn = Worker(1.0, walls=False).load({"hash": "g", "source": "def match(p):\\n    return 1\\n"})
print("loaded:", fn({}))
"""


def test_module_level_code_runs_under_the_audit_guard() -> None:
    done = subprocess.run(
        [sys.executable, "-c", PROGRAM], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "refused: open is not allowed in a matching function",
        "loaded: 1",
    ]
