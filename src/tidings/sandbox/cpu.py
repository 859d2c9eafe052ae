"""The CPU time a worker has used, read by its parent from /proc: the worker, and every
process under it (bubblewrap starts the Python worker as its child), user and system, those
that ended and were waited for included (a library call's tesseract, run and reaped between
two looks, is counted in the process that waited for it).

The parent's look is what no code in the worker can catch or slow: a call that swallows its
in-interpreter time limit and spins is ended once this says it has used its budget with room
to spare (`pool.WorkerProcess.run`), instead of running on to the kernel's RLIMIT_CPU, which
counts whole seconds.
"""

from __future__ import annotations

import math
import os
from pathlib import Path

TICK_S = 1.0 / os.sysconf("SC_CLK_TCK")
KERNEL_SLACK_S = 1.0  # the kernel's RLIMIT_CPU comes this long after the parent's cap


def cpu_cap_s(budget_s: float) -> float:
    """CPU a code call may use before its parent ends its worker: the budget, with room for
    the in-interpreter limit to be raised and answered (a well-behaved call stops there)."""
    return budget_s * 1.5 + 0.05


def kernel_limit_s(used_s: float, budget_s: float) -> int:
    """The soft RLIMIT_CPU for a call starting after `used_s` of CPU: whole seconds (all the
    kernel counts), at least a second past the parent's cap, so that the parent's look,
    which says why the worker was ended, comes first and the kernel stays the backstop."""
    return math.ceil(used_s + cpu_cap_s(budget_s) + KERNEL_SLACK_S)


def tree_cpu_s(pid: int) -> float | None:
    """Seconds of CPU used by `pid` and its descendants alive now; None once it is gone."""
    total, seen, todo = 0.0, set[int](), [pid]
    while todo:
        current = todo.pop()
        if current in seen:
            continue
        seen.add(current)
        used = _own_cpu_s(current)
        if used is None:
            if current == pid:
                return None
            continue  # a child that ended meanwhile
        total += used
        todo += _children(current)
    return total


def _own_cpu_s(pid: int) -> float | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return None
    # after the command's closing parenthesis: state is field 3; utime, stime are 14 and 15,
    # cutime, cstime (its children that ended and were waited for) 16 and 17
    fields = stat[stat.rindex(b")") + 2 :].split()
    return sum(int(f) for f in fields[11:15]) * TICK_S


def _children(pid: int) -> list[int]:
    found: list[int] = []
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return found
    for tid in tasks:
        try:
            found += [int(c) for c in Path(f"/proc/{pid}/task/{tid}/children").read_text().split()]
        except OSError:
            continue
    return found
