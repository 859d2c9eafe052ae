"""A broker's CPU time is read from /proc, its workers' included."""

from __future__ import annotations

import os
import subprocess
import sys
import time

from tidings.sim.perf.cpu import cpu_seconds, tree

SPIN = "import time\nend = time.process_time() + 0.6\nwhile time.process_time() < end: pass\n"
CHILD = SPIN + "time.sleep(30)"


def test_the_cpu_a_process_spends_is_counted() -> None:
    spinner = subprocess.Popen([sys.executable, "-c", SPIN + "time.sleep(30)"])
    try:
        deadline = time.monotonic() + 30
        while (cpu_seconds(spinner.pid) or 0.0) < 0.5 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert (cpu_seconds(spinner.pid) or 0.0) >= 0.5
    finally:
        spinner.kill()
        spinner.wait()


def test_a_process_s_children_count_as_its_own() -> None:
    parent = subprocess.Popen(
        [
            sys.executable,
            "-c",
            f"import subprocess, sys\nsubprocess.run([sys.executable, '-c', {CHILD!r}])",
        ]
    )
    try:
        deadline = time.monotonic() + 30
        while len(tree(parent.pid)) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        while (cpu_seconds(parent.pid) or 0.0) < 0.5 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(tree(parent.pid)) == 2
        assert (cpu_seconds(parent.pid) or 0.0) >= 0.5  # the parent itself only waits
    finally:
        for child in tree(parent.pid) - {parent.pid}:
            os.kill(child, 9)
        parent.kill()
        parent.wait()


def test_a_process_that_is_gone_has_no_figure() -> None:
    ended = subprocess.Popen([sys.executable, "-c", "pass"])
    ended.wait()
    assert cpu_seconds(ended.pid) is None
