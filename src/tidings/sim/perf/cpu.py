"""A broker's CPU time, read from /proc: the headline figure of a comparison, as it holds
on a loaded machine where throughput does not (time a broker waits for the cores is not
counted against it)."""

from __future__ import annotations

import os
from pathlib import Path

PROC = Path("/proc")
TICKS = os.sysconf("SC_CLK_TCK")


def _stat(pid: int) -> list[str] | None:
    """The fields of /proc/PID/stat after the command name (which may hold spaces)."""
    try:
        text = (PROC / str(pid) / "stat").read_text()
    except OSError:
        return None
    return text[text.rindex(")") + 2 :].split()


def _children(pids: set[int]) -> set[int]:
    found = set()
    for entry in PROC.iterdir():
        if entry.name.isdigit():
            fields = _stat(int(entry.name))
            if fields is not None and int(fields[1]) in pids:  # field 4, ppid
                found.add(int(entry.name))
    return found


def tree(pid: int) -> set[int]:
    """`pid` and its live descendants (a broker's function workers, say)."""
    seen, frontier = {pid}, {pid}
    while frontier:
        frontier = _children(frontier) - seen
        seen |= frontier
    return seen


def cpu_seconds(pid: int) -> float | None:
    """User and system CPU time of `pid` and its live descendants, in seconds; None when the
    process is gone."""
    total = 0
    for one in tree(pid):
        fields = _stat(one)
        if fields is None:
            if one == pid:
                return None
            continue  # a worker that ended meanwhile
        total += int(fields[11]) + int(fields[12])  # fields 14 and 15: utime, stime
    return total / TICKS
