"""A memory cgroup (v2) per code worker, where the kernel grants one: a second memory wall
beside the worker's RLIMIT_AS, that also counts what RLIMIT_AS does not (its /tmp, memfd
files, page cache).

Granted when the unified hierarchy is mounted at /sys/fs/cgroup with the memory controller
enabled for the children of the broker's own cgroup or of its parent (a root broker in a
container; a systemd unit with `Delegate=yes` whose broker runs in a leaf), and that cgroup
is writable: each worker then gets a sibling cgroup of its own with `memory.max`, entered
before bubblewrap starts. Otherwise the runner says so once in its log, and RLIMIT_AS alone
bounds a worker's memory (docs/sandbox.md).
"""

from __future__ import annotations

import contextlib
import itertools
import os
from pathlib import Path

HIERARCHY = Path("/sys/fs/cgroup")
BASE_MIB = 256  # the worker itself: the interpreter, the library and its models (~150 MB)
# enter the cgroup, then become the worker's command line
ENTER = 'echo $$ > "$0/cgroup.procs" && exec "$@"'


def own_cgroup() -> str:
    with open("/proc/self/cgroup") as f:
        return next((line[3:].strip() for line in f if line.startswith("0::")), "")


def find(hierarchy: Path = HIERARCHY) -> tuple[Path | None, str]:
    """Where workers' cgroups are made, or None and why not."""
    if not (hierarchy / "cgroup.controllers").exists():
        return None, f"no cgroup v2 hierarchy at {hierarchy} (cgroup v1 or hybrid)"
    own = hierarchy / own_cgroup().lstrip("/")
    for candidate in dict.fromkeys([own, own.parent]):
        try:
            enabled = (candidate / "cgroup.subtree_control").read_text().split()
        except OSError:
            continue
        if "memory" in enabled and os.access(candidate, os.W_OK):
            return candidate, ""
    return None, f"the memory controller is not delegated to {own} or its parent"


class MemoryCgroups:
    def __init__(self, memory_mib: int, hierarchy: Path = HIERARCHY) -> None:
        self.max_bytes = (BASE_MIB + memory_mib) * 1024 * 1024
        self.base, self.problem = find(hierarchy)
        self._names = itertools.count()

    def wrap(self, argv: list[str]) -> tuple[list[str], Path | None]:
        """`argv` started inside a new cgroup of its own (and that cgroup), or unchanged
        where none is granted or this one cannot be made."""
        if self.base is None:
            return argv, None
        path = self.base / f"tidings-worker-{os.getpid()}-{next(self._names)}"
        try:
            path.mkdir()
            (path / "memory.max").write_text(str(self.max_bytes))
            with contextlib.suppress(OSError):  # no swap to spill into, where it is counted
                (path / "memory.swap.max").write_text("0")
        except OSError:
            release(path)
            return argv, None
        return ["/bin/sh", "-c", ENTER, str(path), *argv], path


def release(path: Path | None) -> None:
    """Remove a worker's cgroup once it has ended."""
    if path is not None:
        with contextlib.suppress(OSError):
            path.rmdir()
