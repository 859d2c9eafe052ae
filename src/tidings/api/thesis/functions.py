"""The custom function library served as URL functions, under the thesis's names, so a
subscription may point at `http://<broker>/api/DetectFaces` exactly as its configuration did.

Each takes the URL-function body `{"publication": {...}, "params": {...}}` and answers
`{"match": bool}`. The work runs in the function runner's library workers, never in the
broker's process (docs/functions.md): an image past `functions.max_image_pixels` or a text
past `functions.max_text_bytes` is refused there before any work (413), and each client
address gets `functions.detect_rate_per_s` calls a second, `functions.detect_burst` at once
(429 with `Retry-After`); loopback clients only with `limits.rate_limit_loopback`. At most
`functions.detect_concurrency` bodies are read and worked on at once, from all clients;
the others wait their turn unread (a body of up to 8 MiB costs the broker several copies
while it is parsed and handed to a worker: twenty at once took it from 214 to 622 MB).
"""

from __future__ import annotations

import math
import time
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from tidings.api.answers import answer, error
from tidings.api.io import body_as
from tidings.api.operations import Operation, described
from tidings.broker.quotas import loopback
from tidings.broker.rates import TokenBuckets
from tidings.config import FunctionSettings, Limits
from tidings.delivery.admission import Admission
from tidings.errors import ErrorCode, TidingsError
from tidings.functions import SERVED, check_builtin
from tidings.functions.caps import PREFIX
from tidings.model import check_depth
from tidings.networks import address_key
from tidings.sandbox.runner import SandboxRunner
from tidings.wire import thesis as w

LIMIT = 8 * 1024 * 1024
CLIENTS = 10_000  # addresses remembered by the rate limit; past it, the longest idle are forgotten


def buckets(request: Request, settings: FunctionSettings) -> TokenBuckets:
    found = getattr(request.app.state, "detect_buckets", None)
    if not isinstance(found, TokenBuckets):
        rate, burst = settings.detect_rate_per_s, max(1, settings.detect_burst)
        found = TokenBuckets(rate, burst, time.monotonic, max_keys=CLIENTS)
        request.app.state.detect_buckets = found
    return found


def gate(request: Request, settings: FunctionSettings) -> Admission:
    found = getattr(request.app.state, "detect_gate", None)
    if not isinstance(found, Admission):
        found = request.app.state.detect_gate = Admission(settings.detect_concurrency)
    return found


def limited(request: Request, settings: FunctionSettings, limits: Limits) -> Response | None:
    """429 past the address's rate; this machine's clients (the broker's own URL functions
    among them) only with `limits.rate_limit_loopback`, as for registrations."""
    address = request.client.host if request.client else ""
    if loopback(address) and not limits.rate_limit_loopback:
        return None
    wait = buckets(request, settings).take(address_key(address)[0])  # an IPv6 client's /64
    if not wait:
        return None
    detail = f"at most {settings.detect_rate_per_s:g} calls a second from one address"
    refused = TidingsError(ErrorCode.RATE_LIMITED, detail=detail, retry_s=math.ceil(wait))
    return answer(error(refused), refused.status, {"Retry-After": str(math.ceil(wait))})


def endpoint(name: str) -> Any:
    @described(Operation(w.FunctionCallBody, answer=w.Match))
    async def handle(request: Request) -> Response:
        broker = request.app.state.broker
        settings = broker.settings.functions
        if (refused := limited(request, settings, broker.settings.limits)) is not None:
            return refused
        async with gate(request, settings).turn("library"):
            return await call(request, broker, name)

    handle.__doc__ = f"The {name} function as a URL function."
    handle.__name__ = name
    return handle


async def call(request: Request, broker: Any, name: str) -> Response:
    """Read, check and run one call, in the library's workers."""
    raw, body = await body_as(request, w.FunctionCallBody, LIMIT)
    limits = broker.settings.limits
    check_depth(raw["publication"], "publication", limits)
    check_depth(body.params, "params", limits)
    check_builtin(name, body.params, field="$")
    runner = broker.functions.runner
    if not isinstance(runner, SandboxRunner):
        raise TidingsError(ErrorCode.UNAVAILABLE, detail="function matching is not enabled")
    matched, problem = await runner.call_library(name, raw["publication"], body.params)
    if problem is not None:
        raise refusal(problem)
    return answer(w.Match(matched))


def refusal(problem: str) -> TidingsError:
    """A library call's failure as the client's error: an input past its cap (413), a
    limit of the worker (422), else ours (500)."""
    if problem.startswith(PREFIX):
        return TidingsError(ErrorCode.INPUT_TOO_LARGE, field="publication.data",
                            detail=problem.removeprefix(PREFIX + ": "))  # fmt: skip
    if problem.startswith(("killed:", "cpu time limit", "memory limit")):
        return TidingsError(ErrorCode.LIMIT_EXCEEDED, field="publication.data", detail=problem)
    return TidingsError(ErrorCode.INTERNAL)


routes = [Route(f"/api/{path}", endpoint(name), methods=["POST"]) for path, name in SERVED.items()]
