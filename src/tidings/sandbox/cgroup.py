"""A memory cgroup per code worker, where the kernel grants one: a second memory wall
beside the worker's RLIMIT_AS, that also counts what RLIMIT_AS does not (its /tmp, memfd
files, page cache).

Granted when the unified hierarchy (v2) is mounted at /sys/fs/cgroup with the memory
controller enabled for the children of the broker's own cgroup or of its parent (a root
broker in a container; a systemd unit with `Delegate=yes` whose broker runs in a leaf), and
that cgroup is writable: each worker then gets a sibling cgroup of its own with
`memory.max`. Where the memory controller is on a v1 hierarchy instead (at
/sys/fs/cgroup/memory: older hosts and hybrid layouts), the same under the broker's own
memory cgroup or its parent, with `memory.limit_in_bytes` (and memory plus swap capped
alike, where the kernel counts swap). Each worker's cgroup is entered before bubblewrap
starts. Otherwise the runner says so once in its log, and RLIMIT_AS alone bounds a worker's
memory (docs/sandbox.md).
"""

from __future__ import annotations

import contextlib
import itertools
import os
import secrets
from dataclasses import dataclass
from pathlib import Path

HIERARCHY = Path("/sys/fs/cgroup")
BASE_MIB = 256  # the worker itself: the interpreter, the library and its models (~150 MB)
# enter the cgroup, then become the worker's command line
ENTER = 'echo $$ > "$0/cgroup.procs" && exec "$@"'
PREFIX = "tidings-worker-"
# workers' cgroups not yet empty when released (the worker's own process, under bubblewrap,
# may still be exiting): removed at a later start
_busy: set[Path] = set()


@dataclass(frozen=True, slots=True)
class Layout:
    """A hierarchy's files: the memory limit, and how swap is kept out."""

    limit: str
    swap: str
    swap_alone: bool  # v2 caps swap by itself (0); v1 caps memory and swap together


V2 = Layout("memory.max", "memory.swap.max", swap_alone=True)
V1 = Layout("memory.limit_in_bytes", "memory.memsw.limit_in_bytes", swap_alone=False)


def own_cgroup(controller: str = "") -> str:
    """This process's cgroup: in the unified hierarchy, or in the v1 one of `controller`."""
    with open("/proc/self/cgroup") as f:
        for line in f:
            _, controllers, path = line.rstrip("\n").split(":", 2)
            if controllers.split(",") == [controller] or (not controller and not controllers):
                return path
    return ""


def locate(hierarchy: Path = HIERARCHY) -> tuple[Path | None, Layout, str]:
    """Where workers' cgroups are made, in which layout, or None and why not: the unified
    hierarchy first, else a v1 memory hierarchy."""
    base, why = find(hierarchy)
    if base is not None:
        return base, V2, ""
    v1 = hierarchy / "memory"
    if not (v1 / V1.limit).exists():
        return None, V2, f"{why}; no v1 memory hierarchy at {v1} either"
    own = v1 / own_cgroup("memory").lstrip("/")
    for candidate in dict.fromkeys([own, own.parent]):
        if (candidate / V1.limit).exists() and os.access(candidate, os.W_OK):
            return candidate, V1, ""
    return None, V1, f"{why}; the v1 memory cgroup {own} and its parent are not writable here"


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
        self.base, self.layout, self.problem = locate(hierarchy)
        self._names = itertools.count()
        self._token = secrets.token_hex(4)  # a pid is reused; a dead broker's names stay
        if self.base is not None:
            sweep_stale(self.base)

    def wrap(self, argv: list[str]) -> tuple[list[str], Path | None]:
        """`argv` started inside a new cgroup of its own (and that cgroup), or unchanged
        where none is granted or this one cannot be made."""
        if self.base is None:
            return argv, None
        release_busy()
        path = self.base / f"{PREFIX}{os.getpid()}-{self._token}-{next(self._names)}"
        try:
            path.mkdir()
            (path / self.layout.limit).write_text(str(self.max_bytes))
            with contextlib.suppress(OSError):  # no swap to spill into, where it is counted
                swap = "0" if self.layout.swap_alone else str(self.max_bytes)
                (path / self.layout.swap).write_text(swap)
        except OSError:
            release(path)
            return argv, None
        return ["/bin/sh", "-c", ENTER, str(path), *argv], path


def release(path: Path | None) -> None:
    """Remove a worker's cgroup once it has ended (later, while a process is still in it)."""
    if path is None:
        return
    try:
        path.rmdir()
    except FileNotFoundError:
        pass
    except OSError:
        _busy.add(path)
        return
    _busy.discard(path)


def release_busy() -> None:
    """Remove the workers' cgroups that were not yet empty when released."""
    for path in list(_busy):
        release(path)


def sweep_stale(base: Path) -> None:
    """Remove the empty workers' cgroups of brokers no longer running (killed before they
    could remove them); a cgroup with a process in it is not removed by the kernel."""
    for path in base.glob(f"{PREFIX}*"):
        pid = path.name.removeprefix(PREFIX).split("-", 1)[0]
        if pid.isdigit() and not Path(f"/proc/{pid}").exists():
            with contextlib.suppress(OSError):
                path.rmdir()
