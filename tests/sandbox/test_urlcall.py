"""URL functions against a real endpoint on loopback: answers, retries, a whole-call
deadline, breakers per subscriber and origin, fair shares, shedding, dropped calls."""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import AsyncIterator

import pytest
from tests.conftest import until
from tests.sandbox.endpoint import Endpoint, endpoint

from tidings.addresses import Own
from tidings.config import FunctionSettings
from tidings.model import FunctionSpec, Publication, Subscription
from tidings.sandbox import FunctionOutcome, urlcall
from tidings.sandbox.runner import create_runner
from tidings.sandbox.urlcall import OPEN_AFTER, Breakers, URLCaller

PUB = {"id": "p", "data": "hello"}
PUBLICATION = Publication("p", 0.0, data="hello", function_types=("t",))
LOOPBACK = "127.0.0.0/8"  # the endpoints under test listen there: denied unless allowed


@pytest.fixture
async def ep() -> AsyncIterator[Endpoint]:
    async with endpoint() as e:
        yield e


@pytest.fixture
async def caller() -> AsyncIterator[URLCaller]:
    c = URLCaller(FunctionSettings(url_timeout_s=0.5, url_retries=2, url_allow_networks=LOOPBACK))
    yield c
    await c.aclose()


async def test_the_endpoint_gets_the_publication_and_params_and_its_answer_counts(
    ep: Endpoint, caller: URLCaller
) -> None:
    assert await caller.call(ep.url("/yes"), PUB, {"k": 1}) == (True, None)
    assert await caller.call(ep.url("/no"), PUB, {}) == (False, None)
    assert ep.bodies[0] == {"publication": PUB, "params": {"k": 1}}


async def test_a_failure_that_passes_is_retried(ep: Endpoint, caller: URLCaller) -> None:
    assert await caller.call(ep.url("/flaky"), PUB, {}) == (True, None)
    assert ep.calls["/flaky"] == 2


@pytest.mark.parametrize("path", ["/broken", "/nonsense", "/slow"])
async def test_a_failing_endpoint_is_no_match_with_the_error(
    ep: Endpoint, caller: URLCaller, path: str
) -> None:
    matched, error = await caller.call(ep.url(path), PUB, {})
    assert matched is False
    assert error


async def test_server_errors_are_retried_before_giving_up(ep: Endpoint, caller: URLCaller) -> None:
    await caller.call(ep.url("/broken"), PUB, {})
    assert ep.calls["/broken"] == 3  # one call and two retries


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def test_the_breaker_opens_after_repeated_failures_and_stops_calling(
    ep: Endpoint, caller: URLCaller
) -> None:
    for _ in range(OPEN_AFTER):
        await caller.call(ep.url("/broken"), PUB, {})
    calls = ep.calls["/broken"]
    matched, error = await caller.call(ep.url("/broken"), PUB, {})
    assert (matched, ep.calls["/broken"]) == (False, calls)
    assert error is not None and "circuit open" in error


async def test_one_urls_open_breaker_leaves_other_urls_alone(
    ep: Endpoint, caller: URLCaller
) -> None:
    dead = f"http://127.0.0.1:{_closed_port()}/gone"
    for _ in range(OPEN_AFTER + 1):
        assert (await caller.call(dead, PUB, {}))[0] is False
    assert await caller.call(ep.url("/yes"), PUB, {}) == (True, None)


@pytest.mark.parametrize("allow", ["", LOOPBACK])
async def test_the_broker_s_own_endpoint_is_called_for_the_library_it_serves_alone(
    ep: Endpoint, allow: str
) -> None:
    """A URL function pointed back at the broker reaches its `/api/Detect*` (the thesis's
    configurations do so), never another of its paths (registering subscribers, say), whether
    or not the operator lets URL functions reach this machine."""
    settings = FunctionSettings(url_retries=0, url_allow_networks=allow)
    own = URLCaller(settings, Own("127.0.0.1", ep.port))
    try:
        refused = ep.url("/api/RegisterSubscriber")
        assert own.problem(refused) == "the URL is this broker's own"
        assert own.problem(ep.url("/api/DetectLanguages?x=1")) is not None  # the path alone
        assert own.problem(ep.url("/api/DetectLanguages")) is None
        matched, error = await own.call(refused, PUB, {})
        assert not matched and error and "own endpoint" in error
        assert await own.call(ep.url("/api/DetectLanguages"), PUB, {}) == (True, None)
        assert set(ep.calls) == {"/api/DetectLanguages"}
    finally:
        await own.aclose()


async def test_this_machine_is_denied_unless_allowed_and_the_metadata_service_always(
    ep: Endpoint,
) -> None:
    denied = URLCaller(FunctionSettings(url_retries=0))
    allowed = URLCaller(FunctionSettings(url_retries=0, url_allow_networks=LOOPBACK))
    try:
        problem = denied.problem(ep.url("/yes")) or ""
        assert "denied network" in problem and "functions.url_allow_networks" in problem
        matched, error = await denied.call(ep.url("/yes"), PUB, {})
        assert not matched and error and "denied network" in error and not ep.calls
        assert allowed.problem(ep.url("/yes")) is None
        assert allowed.problem("http://169.254.169.254/latest/meta-data/") is not None
    finally:
        await denied.aclose()
        await allowed.aclose()


async def test_two_paths_of_one_origin_trip_one_breaker_for_their_subscriber_alone(
    ep: Endpoint, caller: URLCaller
) -> None:
    for i in range(OPEN_AFTER):
        assert (await caller.call(ep.url(f"/broken/{i}?q={i}"), PUB, {}, owner="a"))[1]
    matched, error = await caller.call(ep.url("/yes/other"), PUB, {}, owner="a")
    assert not matched and error and "circuit open" in error
    assert ep.calls["/yes/other"] == 0
    # another subscriber's calls to that origin neither wait for it nor see its errors
    assert await caller.call(ep.url("/yes/other"), PUB, {}, owner="b") == (True, None)


async def test_calls_waiting_when_their_breaker_opens_fail_without_calling(ep: Endpoint) -> None:
    settings = FunctionSettings(
        url_retries=0, url_concurrency_per_subscriber=1, url_allow_networks=LOOPBACK
    )
    caller = URLCaller(settings)
    try:
        answers = await asyncio.gather(
            *(caller.call(ep.url(f"/broken/{n}"), PUB, {}) for n in range(OPEN_AFTER + 3))
        )
    finally:
        await caller.aclose()
    assert sum(ep.calls.values()) == OPEN_AFTER
    assert sum("circuit open" in (error or "") for _, error in answers) == 3


async def test_calls_refused_by_an_open_breaker_do_not_keep_it_open(
    ep: Endpoint, caller: URLCaller, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(urlcall, "OPEN_FOR_S", 0.3)
    for _ in range(OPEN_AFTER):
        await caller.call(ep.url("/broken"), PUB, {})
    deadline = time.monotonic() + 30
    while (answer := await caller.call(ep.url("/yes"), PUB, {})) != (True, None):
        assert answer[1] and "circuit open" in answer[1]
        assert time.monotonic() < deadline, "the breaker never closed under steady calls"
        await asyncio.sleep(0.01)  # far less than the time it is open


def test_the_breakers_kept_are_bounded_the_least_recently_failed_forgotten() -> None:
    breakers = Breakers(size=3)
    for n in range(5):
        breakers.record(("a", f"http://h{n}:80"), "boom")
    assert len(breakers) == 3
    for _ in range(OPEN_AFTER):
        breakers.record(("a", "http://h4:80"), "boom")
    breakers.check(("a", "http://h0:80"))  # forgotten: closed
    with pytest.raises(RuntimeError, match="circuit open"):
        breakers.check(("a", "http://h4:80"))
    breakers.record(("a", "http://h4:80"), None)  # a success forgets the pair
    assert len(breakers) == 2


async def test_an_endless_answer_is_cut_at_the_call_s_deadline_with_no_retry_after_it(
    ep: Endpoint,
) -> None:
    caller = URLCaller(
        FunctionSettings(url_timeout_s=1, url_retries=2, url_allow_networks=LOOPBACK)
    )
    try:
        matched, error = await caller.call(ep.url("/trickle"), PUB, {})
    finally:
        await caller.aclose()
    assert not matched and error == "TimeoutError: no whole answer within 1 s"
    assert ep.calls["/trickle"] == 1  # each retry had its own 1 s before: 3 calls, 3 s


async def test_an_answer_past_64_kib_is_a_failure(ep: Endpoint, caller: URLCaller) -> None:
    matched, error = await caller.call(ep.url("/big"), PUB, {})
    assert not matched and error and "AnswerTooLarge" in error


async def test_past_its_queue_a_subscriber_s_calls_are_shed_and_its_neighbour_s_go_through(
    ep: Endpoint,
) -> None:
    settings = FunctionSettings(
        url_timeout_s=60,
        url_concurrency_per_subscriber=2,
        url_queue_per_subscriber=3,
        url_allow_networks=LOOPBACK,
    )
    caller = URLCaller(settings)
    try:
        held = [
            asyncio.ensure_future(caller.call(ep.url(f"/hold/{n}"), PUB, {}, owner="hog"))
            for n in range(5)  # two in flight, three waiting
        ]
        await until(lambda: ep.holding == 2)
        assert await caller.call(ep.url("/hold/5"), PUB, {}, owner="hog") == (
            False,
            "shed: 3 URL calls of this subscriber wait",
        )
        assert await caller.call(ep.url("/yes"), PUB, {}, owner="b") == (True, None)
        ep.release.set()
        assert await asyncio.gather(*held) == [(True, None)] * 5
    finally:
        await caller.aclose()
    assert ep.most_holding == 2
    assert "/hold/5" not in ep.calls
    assert not len(caller.breakers)  # shedding is not the endpoint's failure


async def test_a_waiting_call_no_longer_wanted_is_dropped_with_no_answer(ep: Endpoint) -> None:
    settings = FunctionSettings(url_concurrency_per_subscriber=1, url_allow_networks=LOOPBACK)
    caller, unwanted = URLCaller(settings), False
    try:
        first = asyncio.ensure_future(caller.call(ep.url("/hold/1"), PUB, {}, owner="a"))
        second = asyncio.ensure_future(
            caller.call(ep.url("/hold/2"), PUB, {}, owner="a", dropped=lambda: unwanted)
        )
        await until(lambda: ep.holding == 1 and caller.share.waiting("a") == 1)
        unwanted = True
        ep.release.set()
        assert (await first, await second) == ((True, None), None)
    finally:
        await caller.aclose()
    assert "/hold/2" not in ep.calls


async def test_a_cancelled_subscription_s_waiting_url_calls_are_dropped_by_the_runner(
    ep: Endpoint,
) -> None:
    settings = FunctionSettings(
        workers=1, url_concurrency_per_subscriber=1, url_allow_networks=LOOPBACK
    )
    runner = create_runner(settings)
    try:
        subs = [
            Subscription(sid, "s1", "function", function=FunctionSpec("t", "url", ep.url(path)))
            for sid, path in (("kept", "/hold/kept"), ("gone", "/hold/gone"))
        ]
        evaluation = asyncio.ensure_future(runner.evaluate(PUBLICATION, subs))
        await until(lambda: ep.holding == 1 and runner.urls.share.waiting("s1") == 1)
        runner.cancel("gone")
        ep.release.set()
        assert await evaluation == [FunctionOutcome("kept", True)]
    finally:
        await runner.aclose()
    assert "/hold/gone" not in ep.calls
