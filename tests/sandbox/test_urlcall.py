"""URL functions against a real endpoint on loopback: answers, retries, timeouts, breakers."""

from __future__ import annotations

import socket
from collections.abc import AsyncIterator

import pytest
from tests.sandbox.endpoint import Endpoint, endpoint

from tidings.addresses import Own
from tidings.config import FunctionSettings
from tidings.sandbox.urlcall import OPEN_AFTER, URLCaller

PUB = {"id": "p", "data": "hello"}
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
