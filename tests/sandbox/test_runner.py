"""create_runner: what the broker sees. Validation at subscribe time, and one evaluate call
mixing code, builtin and URL functions, with failures as outcomes and fail_open honoured."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from tests.sandbox.endpoint import Endpoint, endpoint

from tidings.config import FunctionSettings
from tidings.errors import ErrorCode, TidingsError
from tidings.model import FunctionSpec, Publication, Subscription
from tidings.sandbox import FunctionRunner
from tidings.sandbox.runner import create_runner

CODE = "def match(publication):\n    return 'Zealand' in publication['data']\n"
PUB = Publication("p1", 0.0, data="DEBS2018 will be held in New Zealand.", function_types=("t",))


def sub(
    sid: str, kind: str, source: str, fail_open: bool = False, **params: object
) -> Subscription:
    spec = FunctionSpec("t", kind, source, params, fail_open)  # type: ignore[arg-type]
    return Subscription(sid, "s1", "function", function=spec)


@pytest.fixture
async def runner() -> AsyncIterator[FunctionRunner]:
    r = create_runner(FunctionSettings(workers=1, url_timeout_s=0.5, url_retries=0))
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
