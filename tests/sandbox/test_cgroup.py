"""A memory cgroup per code worker where the kernel grants one, in the unified hierarchy or a
v1 memory hierarchy (skipped, with the reason, where neither is granted); the address-space
limit is tested everywhere (test_tenants, test_escapes)."""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tidings.config import FunctionSettings
from tidings.model import FunctionSpec, Publication, Subscription
from tidings.sandbox.cgroup import BASE_MIB, MemoryCgroups, locate, release, release_busy
from tidings.sandbox.runner import create_runner

BASE, LAYOUT, WHY_NOT = locate()
HOG = (
    "def match(publication):\n    held = []\n    while True:\n        held.append(' ' * 1000000)\n"
)


@pytest.mark.skipif(BASE is None, reason=f"no memory cgroup granted here: {WHY_NOT}")
async def test_each_code_worker_runs_in_a_memory_cgroup_of_its_own() -> None:
    runner = create_runner(FunctionSettings(workers=1, memory_mib=64))
    made: list[Path] = []  # every cgroup this runner made (others of this process may live)
    wrap = runner.cgroups.wrap

    def recorded(argv: list[str]) -> tuple[list[str], Path | None]:
        wrapped, path = wrap(argv)
        made.extend([path] if path is not None else [])
        return wrapped, path

    runner.cgroups.wrap = recorded  # type: ignore[method-assign]
    pub = Publication("p", 0.0, data="x", function_types=("t",))
    subs = [
        Subscription(f"s-{o}", o, "function", function=FunctionSpec("t", "code", HOG))
        for o in ("a", "b")
    ]
    try:
        outcomes = await runner.evaluate(pub, subs)
        assert all(o.error for o in outcomes)  # the hog is stopped, by one wall or the other
        cgroups: list[Path] = []
        for owner in ("a", "b"):
            worker = runner.main.workers._tenants[owner].worker
            if worker is None:  # ended by the cgroup's OOM killer: its next call binds another
                continue
            assert worker.cgroup is not None
            limit = (worker.cgroup / LAYOUT.limit).read_text()
            assert int(limit) == runner.cgroups.max_bytes
            cgroups.append(worker.cgroup)
        assert len(set(cgroups)) == len(cgroups)  # one each
    finally:
        await runner.aclose()
    for _ in range(100):  # a worker's own process, under bubblewrap, may still be exiting
        release_busy()
        if not any(path.exists() for path in made):
            break
        await asyncio.sleep(0.1)
    assert made and not any(path.exists() for path in made)  # removed with their workers


def test_where_no_cgroup_is_granted_the_reason_is_said() -> None:
    base, _, why_not = locate()
    assert (base is None) == bool(why_not)


@pytest.mark.skipif(BASE is None, reason=f"no memory cgroup granted here: {WHY_NOT}")
def test_a_process_in_a_workers_cgroup_is_ended_past_its_limit_whatever_its_address_space() -> None:
    """The cgroup's own wall, with no RLIMIT_AS: 200 MB past the limit, touched, is killed
    by the kernel; the same process under the limit is not."""
    cgroups = MemoryCgroups(memory_mib=0)  # the limit: BASE_MIB alone
    touch = "b = bytearray({n} * 1024 * 1024); b[::4096] = b'x' * len(b[::4096])"
    for mib, killed in ((BASE_MIB + 200, True), (BASE_MIB // 4, False)):
        argv, path = cgroups.wrap([sys.executable, "-c", touch.format(n=mib)])
        assert path is not None
        try:
            done = subprocess.run(argv, capture_output=True, timeout=120, check=False)
        finally:
            release(path)
        assert (done.returncode == -signal.SIGKILL) is killed, done.stderr[-300:]


@pytest.mark.skipif(BASE is None, reason=f"no memory cgroup granted here: {WHY_NOT}")
def test_a_dead_brokers_empty_worker_cgroups_are_removed_at_the_next_start() -> None:
    ended = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                           capture_output=True, check=True)  # fmt: skip
    assert BASE is not None
    stale = BASE / f"tidings-worker-{int(ended.stdout)}-0000-0"
    stale.mkdir()
    try:
        MemoryCgroups(memory_mib=64)
        assert not stale.exists()
    finally:
        release(stale)
