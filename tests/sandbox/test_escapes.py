"""At run time, in worker processes: limits contain what the compile check cannot see,
and the pool keeps serving everyone else."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from tidings.config import FunctionSettings
from tidings.sandbox.boundary import command
from tidings.sandbox.compile import code_hash
from tidings.sandbox.pool import WorkerCall, WorkerPool

PUB = {"id": "p", "data": "hello", "topics": [], "attributes": {}, "function_types": ["t"]}


def code(sid: str, body: str) -> WorkerCall:
    source = f"def match(publication):\n{body}\n"
    return WorkerCall(sid, "code", code_hash(source), source)


def code_pool(settings: FunctionSettings) -> WorkerPool:
    """A pool of code workers inside the boundary (the runner gives each subscriber its own;
    these tests drive workers directly)."""
    return WorkerPool(settings, command(settings, "code", bounded=True))


OK = code("ok", "    return publication['data'] == 'hello'")


@pytest.fixture
async def pool() -> AsyncIterator[WorkerPool]:
    p = code_pool(FunctionSettings(workers=1, cpu_ms=100, memory_mib=64))
    yield p
    await p.aclose()


@pytest.mark.parametrize(
    ("body", "error"),
    [
        ("    while True:\n        pass", "cpu time limit"),
        ("    x = [0] * (10 ** 9)\n    return True", "memory"),
        ("    def f(n):\n        return f(n + 1)\n    return f(0)", "recursion"),
        ("    return 'yes'", "not a bool"),
        ("    import os\n    return True", "ImportError"),
        ("    return [].pop()", "IndexError"),
    ],
    ids=["infinite-loop", "memory-bomb", "deep-recursion", "not-a-bool", "runtime-import", "crash"],
)
async def test_a_misbehaving_function_is_contained_and_others_still_match(
    pool: WorkerPool, body: str, error: str
) -> None:
    results = await pool.run(PUB, [code("bad", body), OK])
    assert results["bad"][0] is False and error in (results["bad"][1] or "")
    assert results["ok"] == (True, None)


async def test_a_call_past_its_wall_clock_budget_kills_its_worker_the_rest_still_run() -> None:
    # the worker's own CPU timer is set later than the parent's budget, as for a call stuck
    # in one long C-level operation that the timer cannot interrupt
    pool = code_pool(FunctionSettings(workers=1, cpu_ms=60_000, memory_mib=64))
    pool.budget_s = 0.5
    stuck = code("stuck", "    while True:\n        pass")
    try:
        results = await pool.run(PUB, [stuck, OK])
    finally:
        await pool.aclose()
    assert results["stuck"] == (False, "killed: wall-clock limit exceeded")
    assert results["ok"] == (True, None) and pool.killed == 1


async def test_huge_outputs_are_refused_not_shipped(pool: WorkerPool) -> None:
    results = await pool.run(PUB, [code("huge", "    return 'x' * 10 ** 7")])
    assert results["huge"][0] is False and "not a bool" in (results["huge"][1] or "")


async def test_subscriber_code_may_call_the_function_library(pool: WorkerPool) -> None:
    uses = code(
        "uses",
        "    from tidings.functions import call_builtin\n"
        "    return call_builtin('sentiment', publication, {'label': 'neutral'})",
    )
    assert (await pool.run(PUB, [uses]))["uses"] == (True, None)


async def test_compiled_code_is_reused_across_publications(pool: WorkerPool) -> None:
    for _ in range(3):
        assert (await pool.run(PUB, [OK]))["ok"] == (True, None)
    assert pool.killed == 0


async def test_runaways_do_not_stop_other_evaluations_running_meanwhile() -> None:
    pool = code_pool(FunctionSettings(workers=2, cpu_ms=100, memory_mib=64))
    try:
        loops = [code(f"loop{i}", "    while True:\n        pass") for i in range(3)]
        slow, fast = pool.run(PUB, loops), pool.run(PUB, [OK] * 1)
        results = await asyncio.gather(slow, fast)
        assert results[1]["ok"] == (True, None)
        assert all("cpu time limit" in (e or "") for _, e in results[0].values())
    finally:
        await pool.aclose()


@pytest.mark.parametrize(
    "body",
    [
        "    import json\n    return json.codecs.open('/etc/hostname') is not None",
        "    import re\n    return 'os' in re.enum.sys.modules",
        "    import statistics\n    return statistics.random._os.getpid() > 0",
        "    from tidings.functions import importlib\n    return importlib is not None",
        "    import tidings.functions\n    return tidings.config is not None",
        "    from string import Formatter\n    return Formatter is not None",
        "    from functools import update_wrapper\n    return update_wrapper is not None",
        "    from functools import singledispatch\n    return singledispatch is not None",
    ],
    ids=["json-codecs", "re-enum-sys", "statistics-random-os", "library-importlib",
         "tidings-package", "string-formatter", "functools-update-wrapper",
         "functools-singledispatch"],
)  # fmt: skip
async def test_allowed_modules_lead_nowhere_else(pool: WorkerPool, body: str) -> None:
    results = await pool.run(PUB, [code("walk", body)])
    assert results["walk"][0] is False and results["walk"][1]


@pytest.mark.parametrize("event", ["open", "os.system", "subprocess.Popen", "compile", "exec"])
def test_the_audit_hook_refuses_reaching_outside_while_code_runs(event: str) -> None:
    from tidings.sandbox import worker

    worker.audit(event, ())  # outside a call: the library may open its models
    worker.GUARD["on"] = True
    try:
        with pytest.raises(PermissionError):
            worker.audit(event, ())
    finally:
        worker.GUARD["on"] = False


async def test_library_code_that_compiles_strings_is_refused_inside_a_call(
    pool: WorkerPool,
) -> None:
    # namedtuple builds its class with eval: the hook refuses it like any eval in disguise
    source = (
        "from collections import namedtuple\n"
        "def match(publication):\n"
        "    return namedtuple('P', 'x y')(1, 2).x == 1\n"
    )
    results = await pool.run(PUB, [WorkerCall("nt", "code", code_hash(source), source)])
    assert results["nt"][0] is False
    assert "not allowed in a matching function" in (results["nt"][1] or "")


@pytest.mark.slow
async def test_subscriber_code_may_call_vision_functions_under_the_audit_hook() -> None:
    from tests.functions.images import WITH_FACE, encoded

    pool = code_pool(FunctionSettings(workers=1, cpu_ms=10_000))
    source = (
        "from tidings.functions import detect_faces\n"
        "def match(publication):\n"
        "    return detect_faces(publication['data'], {'min_faces': 1})\n"
    )
    photo = {**PUB, "data": {"image": encoded(WITH_FACE)}}
    try:
        results = await pool.run(photo, [WorkerCall("faces", "code", code_hash(source), source)])
    finally:
        await pool.aclose()
    assert results["faces"] == (True, None)
