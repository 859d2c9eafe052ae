"""A memory cgroup per code worker where the kernel grants one (skipped, with the reason,
where it does not); the address-space limit is tested everywhere (test_tenants, test_escapes)."""

from __future__ import annotations

import pytest

from tidings.config import FunctionSettings
from tidings.model import FunctionSpec, Publication, Subscription
from tidings.sandbox.cgroup import find
from tidings.sandbox.runner import create_runner

BASE, WHY_NOT = find()
HOG = (
    "def match(publication):\n    held = []\n    while True:\n        held.append(' ' * 1000000)\n"
)


@pytest.mark.skipif(BASE is None, reason=f"no memory cgroup granted here: {WHY_NOT}")
async def test_each_code_worker_runs_in_a_memory_cgroup_of_its_own() -> None:
    runner = create_runner(FunctionSettings(workers=1, memory_mib=64))
    pub = Publication("p", 0.0, data="x", function_types=("t",))
    subs = [
        Subscription(f"s-{o}", o, "function", function=FunctionSpec("t", "code", HOG))
        for o in ("a", "b")
    ]
    try:
        outcomes = await runner.evaluate(pub, subs)
        assert all(o.error for o in outcomes)  # the hog is stopped, by one wall or the other
        cgroups = []
        for owner in ("a", "b"):
            worker = runner.main.workers._tenants[owner].worker
            if worker is None:  # ended by the cgroup's OOM killer: its next call binds another
                continue
            assert worker.cgroup is not None
            assert int((worker.cgroup / "memory.max").read_text()) == runner.cgroups.max_bytes
            cgroups.append(worker.cgroup)
        assert len(set(cgroups)) == len(cgroups)  # one each
    finally:
        await runner.aclose()
    assert not any(BASE.glob("tidings-worker-*"))  # removed with their workers


def test_where_no_cgroup_is_granted_the_reason_is_said() -> None:
    base, why_not = find()
    assert (base is None) == bool(why_not)
