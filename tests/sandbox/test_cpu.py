"""The CPU time of a worker and everything under it, as its parent reads it from /proc."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

from tidings.sandbox.cpu import tree_cpu_s

SPIN = "import time\nend = time.process_time() + 5\nwhile time.process_time() < end: pass\n"


def test_a_grandchild_s_cpu_time_is_counted_under_the_process_that_started_it() -> None:
    # as bubblewrap starts the Python worker as its child: the parent only waits
    shell = subprocess.Popen(
        ["sh", "-c", f'{sys.executable} -c "$0"; sleep 30', SPIN], start_new_session=True
    )
    try:
        deadline = time.monotonic() + 30
        used = 0.0
        while used < 0.45 and time.monotonic() < deadline:
            time.sleep(0.05)
            used = tree_cpu_s(shell.pid) or 0.0
        assert used >= 0.45  # the shell itself used next to nothing
    finally:
        os.killpg(shell.pid, signal.SIGKILL)  # the grandchild too
        shell.wait()


def test_a_child_that_ended_and_was_waited_for_is_still_counted() -> None:
    # as a library worker runs tesseract and waits for it: the child is gone at the next look
    burst = SPIN.replace("+ 5", "+ 0.5")
    waiter = subprocess.Popen(
        ["sh", "-c", f'{sys.executable} -c "$0"; echo done; sleep 30', burst],
        stdout=subprocess.PIPE,
        start_new_session=True,
    )
    try:
        assert waiter.stdout is not None
        assert waiter.stdout.readline() == b"done\n"  # the child has ended, and was waited for
        assert (tree_cpu_s(waiter.pid) or 0.0) >= 0.45
    finally:
        os.killpg(waiter.pid, signal.SIGKILL)
        waiter.wait()


def test_a_process_that_is_gone_has_no_cpu_time() -> None:
    done = subprocess.run([sys.executable, "-c", "pass"], check=True)
    assert done.returncode == 0
    assert tree_cpu_s(2**22 + 12345) is None
