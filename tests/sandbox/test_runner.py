"""create_runner: what the broker sees. Validation at subscribe time, and one evaluate call
mixing code, builtin and URL functions, with failures as outcomes and fail_open honoured."""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
from tests.api.conftest import Sub
from tests.sandbox.endpoint import Endpoint, endpoint

from tidings.config import FunctionSettings, load_settings
from tidings.errors import ErrorCode, TidingsError
from tidings.model import FunctionSpec, Publication, Subscription
from tidings.sandbox import FunctionOutcome, FunctionRunner
from tidings.sandbox.runner import START_CHUNK, create_runner
from tidings.server import EmbeddedServer

CODE = "def match(publication):\n    return 'Zealand' in publication['data']\n"
PUB = Publication("p1", 0.0, data="DEBS2018 will be held in New Zealand.", function_types=("t",))


def sub(
    sid: str, kind: str, source: str, fail_open: bool = False, **params: object
) -> Subscription:
    spec = FunctionSpec("t", kind, source, params, fail_open)  # type: ignore[arg-type]
    return Subscription(sid, "s1", "function", function=spec)


@pytest.fixture
async def runner() -> AsyncIterator[FunctionRunner]:
    # the test endpoint listens on loopback, which URL functions reach only when allowed
    local = "127.0.0.0/8"
    r = create_runner(
        FunctionSettings(workers=1, url_timeout_s=0.5, url_retries=0, url_allow_networks=local)
    )
    yield r
    await r.aclose()


@pytest.fixture
async def ep() -> AsyncIterator[Endpoint]:
    async with endpoint() as e:
        yield e


@pytest.mark.parametrize(
    ("spec", "code", "field"),
    [
        (FunctionSpec("t", "code", "import os\ndef match(p):\n    return True"),
         ErrorCode.FUNCTION_FORBIDDEN, "function.code"),
        (FunctionSpec("t", "code", "def other(p):\n    return True"),
         ErrorCode.FUNCTION_INVALID, "function.code"),
        (FunctionSpec("t", "builtin", "read_minds"),
         ErrorCode.FUNCTION_UNKNOWN, "function.builtin"),
        (FunctionSpec("t", "builtin", "detect_language", {}),
         ErrorCode.FUNCTION_INVALID, "function.params.language"),
        (FunctionSpec("t", "url", "file:///etc/passwd"),
         ErrorCode.FUNCTION_INVALID, "function.url"),
    ],
)  # fmt: skip
def test_bad_functions_are_refused_at_subscribe_time_naming_the_field(
    runner: FunctionRunner, spec: FunctionSpec, code: ErrorCode, field: str
) -> None:
    with pytest.raises(TidingsError) as caught:
        runner.validate(spec)
    assert (caught.value.code, caught.value.field) == (code, field)


async def test_code_builtin_and_url_functions_are_evaluated_together(
    runner: FunctionRunner, ep: Endpoint
) -> None:
    subs = [
        sub("code", "code", CODE),
        sub("english", "builtin", "detect_language", language="en"),
        sub("spanish", "builtin", "detect_language", language="es"),
        sub("url", "url", ep.url("/yes")),
    ]
    outcomes = await runner.evaluate(PUB, subs)
    assert {o.subscription_id: (o.matched, o.error) for o in outcomes} == {
        "code": (True, None),
        "english": (True, None),
        "spanish": (False, None),
        "url": (True, None),
    }


async def test_a_failed_call_matches_only_when_its_subscription_fails_open(
    runner: FunctionRunner, ep: Endpoint
) -> None:
    raising = "def match(publication):\n    return 1 / 0\n"
    subs = [
        sub("closed", "url", ep.url("/broken")),
        sub("open", "url", ep.url("/broken"), fail_open=True),
        sub("code-open", "code", raising, fail_open=True),
    ]
    outcomes = {o.subscription_id: o for o in await runner.evaluate(PUB, subs)}
    assert [outcomes[s].matched for s in ("closed", "open", "code-open")] == [False, True, True]
    assert all(o.error for o in outcomes.values())
    assert "ZeroDivisionError" in (outcomes["code-open"].error or "")


FLAKY_THEN_STUCK = (
    "def match(publication):\n"
    "    if publication['data'] == 'first':\n"
    "        return 1 / 0\n"
    "    while True:\n"
    "        pass\n"
)


@pytest.fixture
async def patient_runner() -> AsyncIterator[FunctionRunner]:
    """A runner whose URL calls wait 30 s: 768 of them to one local endpoint, beside a busy
    test suite, took longer than the other tests' half second."""
    settings = FunctionSettings(
        workers=1, url_timeout_s=30.0, url_retries=0, url_allow_networks="127.0.0.0/8"
    )
    r = create_runner(settings)
    yield r
    await r.aclose()


async def test_a_fan_out_to_thousands_of_subscribers_starts_in_chunks_the_loop_running_between(
    patient_runner: FunctionRunner, ep: Endpoint
) -> None:
    runner = patient_runner
    """Each subscriber's evaluation started in the same go of the event loop had stalled it
    about a second at 32,000: another task now runs between chunks of `START_CHUNK`."""
    total = 3 * START_CHUNK
    subs = [owned(f"s{i}", f"o{i}", ep.url("/yes"), "url") for i in range(total)]
    started, seen, done = 0, set(), False
    call = runner.urls.call  # type: ignore[attr-defined]

    async def counted(*args: object, **kwargs: object) -> object:
        nonlocal started
        started += 1
        return await call(*args, **kwargs)

    runner.urls.call = counted  # type: ignore[attr-defined]

    async def watch() -> None:
        while not done:
            seen.add(started)
            await asyncio.sleep(0)

    watcher = asyncio.ensure_future(watch())
    outcomes = await runner.evaluate(pub("hello"), subs)
    done = True
    await watcher
    assert len(outcomes) == total and all(o.matched for o in outcomes)
    assert any(0 < n < total for n in seen)  # it ran while the evaluations were starting


def owned(sid: str, owner: str, source: str, kind: str = "code") -> Subscription:
    spec = FunctionSpec("t", kind, source)  # type: ignore[arg-type]
    return Subscription(sid, owner, "function", function=spec)


def pub(data: str) -> Publication:
    return Publication(data, 0.0, data=data, function_types=("t",))


async def test_a_runaway_subscriber_never_holds_back_another_subscribers_outcomes() -> None:
    # the runaway's CPU budget is a minute: it would hold a shared request that long
    runner = create_runner(FunctionSettings(workers=1, cpu_ms=60_000))
    bad = owned("bad", "u-bad", FLAKY_THEN_STUCK)
    good = owned("good", "u-good", CODE)
    try:
        first = await runner.evaluate(pub("first"), [bad, good])
        assert {o.subscription_id for o in first if o.error} == {"bad"}
        stream = runner.stream(pub("New Zealand"), [bad, good])
        assert await anext(stream) == [FunctionOutcome("good", True)]  # bad is still spinning
        await stream.aclose()
    finally:
        await runner.aclose()


async def test_a_failing_suspect_runs_one_evaluation_at_a_time_and_the_excess_is_shed() -> None:
    runner = create_runner(FunctionSettings(workers=1, cpu_ms=60_000, quarantine_queue=2))
    bad = owned("bad", "u-bad", FLAKY_THEN_STUCK)
    try:
        await runner.evaluate(pub("first"), [bad])  # fails in the shared lane: suspect
        await runner.evaluate(pub("first"), [bad])  # fails in quarantine: failing in a row
        tasks = [asyncio.ensure_future(runner.evaluate(pub("stuck"), [bad])) for _ in range(5)]
        # one runs (and is stuck), two wait for the gate, two are shed
        shed = await asyncio.gather(*tasks[3:])
        assert all((o.error or "").startswith("shed:") for outcomes in shed for o in outcomes)
        assert not any(t.done() for t in tasks[:3])
        for task in tasks[:3]:
            task.cancel()
        await asyncio.gather(*tasks[:3], return_exceptions=True)
    finally:
        await runner.aclose()


async def test_cancelled_subscriptions_queued_calls_do_not_run() -> None:
    runner = create_runner(FunctionSettings(workers=1))
    sub_ = owned("s", "u", CODE)
    try:
        queued = [asyncio.ensure_future(runner.evaluate(PUB, [sub_])) for _ in range(5)]
        await asyncio.sleep(0)  # every evaluation has its ticket
        runner.cancel("s")
        assert [await q for q in queued] == [[]] * 5
        assert await runner.evaluate(PUB, [sub_]) == [FunctionOutcome("s", True)]  # resumed
    finally:
        await runner.aclose()


def test_where_the_sandbox_cannot_start_code_is_refused_builtins_and_urls_are_not(
    tmp_path: Path,
) -> None:
    functions = FunctionSettings(
        workers=1,
        launcher=str(tmp_path / "no-bwrap"),
        url_allow_networks="127.0.0.0/8",  # the URL function below is on this machine
    )
    settings = dataclasses.replace(
        load_settings({"data_dir": tmp_path}, env={}), functions=functions
    )
    with EmbeddedServer(settings) as server, httpx.Client(base_url=server.url) as http:
        sub_ = Sub(http)
        code = sub_.post("/subscriptions", {"function": {"function_type": "t", "code": CODE}})
        assert code.status_code == 422
        error = code.json()["error"]
        assert (error["code"], error["field"]) == ("function_sandbox_unavailable", "function.code")
        assert "no-bwrap" in error["message"]
        sub_.subscribe(function={"function_type": "t", "builtin": "detect_language",
                                 "params": {"language": "en"}})  # fmt: skip
        sub_.subscribe(function={"function_type": "t", "url": "http://127.0.0.1:9/never"})
        published = http.post("/v1/publications", json={"data": PUB.data, "function_types": ["t"]})
        assert published.status_code == 201
        assert delivered(sub_, published.json()["id"])  # the builtin ran, outside the sandbox


async def test_with_code_functions_off_code_is_refused_without_a_probe_even_if_unsafe(
    tmp_path: Path,
) -> None:
    functions = FunctionSettings(
        workers=1,
        launcher=str(tmp_path / "no-bwrap"),  # a probe would say so
        unsafe_code_functions=True,
        code_functions=False,
    )
    runner = create_runner(functions)
    try:
        with pytest.raises(TidingsError) as caught:
            runner.validate(FunctionSpec("t", "code", CODE))
        assert caught.value.code is ErrorCode.FUNCTION_SANDBOX_UNAVAILABLE
        assert "code_functions" in caught.value.message and "no-bwrap" not in caught.value.message
        runner.validate(FunctionSpec("t", "builtin", "detect_language", {"language": "en"}))
    finally:
        await runner.aclose()


def test_unsafe_code_functions_run_without_the_sandbox_after_a_loud_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    functions = FunctionSettings(
        workers=1, launcher=str(tmp_path / "no-bwrap"), unsafe_code_functions=True
    )
    settings = dataclasses.replace(
        load_settings({"data_dir": tmp_path}, env={}), functions=functions
    )
    with EmbeddedServer(settings) as server, httpx.Client(base_url=server.url) as http:
        assert any("UNSAFE" in r.getMessage() for r in caplog.records)
        sub_ = Sub(http)
        sub_.subscribe(function={"function_type": "t", "code": CODE})
        published = http.post("/v1/publications", json={"data": PUB.data, "function_types": ["t"]})
        assert delivered(sub_, published.json()["id"])


def delivered(sub_: Sub, publication_id: str) -> bool:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if any(m["publication_id"] == publication_id for m in sub_.drain()):
            return True
        time.sleep(0.1)
    return False


def test_a_suspension_cancels_the_evaluations_still_queued(tmp_path: Path) -> None:
    # 40 publications at once, 4 failing functions: before, all 160 calls ran (161 seen)
    functions = FunctionSettings(workers=1, failures_to_suspend=3)
    settings = dataclasses.replace(
        load_settings({"data_dir": tmp_path}, env={}), functions=functions
    )
    failing = "def match(publication):\n    return 1 / 0\n"
    with EmbeddedServer(settings) as server, httpx.Client(base_url=server.url) as http:
        sub_ = Sub(http)
        for _ in range(4):
            sub_.subscribe(function={"function_type": "t", "code": failing})
        batch = [{"data": i, "function_types": ["t"]} for i in range(40)]
        assert http.post("/v1/publications/batch", json={"publications": batch}).is_success
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            subs = sub_.get("/subscriptions").json()["subscriptions"]
            if all(s["status"] == "suspended" for s in subs):
                break
            time.sleep(0.1)
        assert all(s["status"] == "suspended" for s in subs)
        calls = server.broker.metrics.value("function_calls_total")
        time.sleep(1.0)  # anything still queued would run now
        assert server.broker.metrics.value("function_calls_total") == calls
        assert calls <= 4 * (3 + 2)  # the rule's 3, and at most the request in flight


async def test_a_module_that_fails_its_first_load_fails_with_its_own_error_each_time(
    runner: FunctionRunner,
) -> None:
    """The runner sends a function's source once; a worker whose first load failed used to
    answer `KeyError: 'source'` for ever after."""
    flaky = "FAIL = 1 / 0\n\ndef match(publication):\n    return True\n"
    for _ in range(3):
        [outcome] = await runner.evaluate(PUB, [sub("f", "code", flaky)])
        assert not outcome.matched and outcome.error is not None
        assert outcome.error.startswith("ZeroDivisionError"), outcome.error
