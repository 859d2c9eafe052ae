"""The custom function library served as URL functions, under the thesis's names, so a
subscription may point at `http://<broker>/api/DetectFaces` exactly as its configuration did.

Each takes the URL-function body `{"publication": {...}, "params": {...}}` and answers
`{"match": bool}`. The work runs in the function runner's library workers, never in the
broker's process (docs/functions.md): an image past `functions.max_image_pixels` or a text
past `functions.max_text_bytes` is refused there before any work (413), and each client
address gets `functions.detect_rate_per_s` calls a second, `functions.detect_burst` at once
(429 with `Retry-After`); loopback clients only with `limits.rate_limit_loopback`. At most
`functions.detect_concurrency` bodies are parsed and worked on at once, from all clients;
the others wait their turn (a body of up to 8 MiB costs the broker several copies while it
is parsed and handed to a worker: twenty at once took it from 214 to 622 MB). A body is read
before that turn, at most `functions.detect_reads_per_client` at once from one client, and
`functions.detect_reads` from all: one sent slowly holds its sender's turn, not everyone's
(four such uploads held the only four turns, and every client's calls timed out behind
them), and the bodies being read stay bounded (`detect_reads` x 8 MiB).
"""

from __future__ import annotations

import math
import time
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from tidings.api.answers import answer, error
from tidings.api.beside import beside
from tidings.api.io import parse_json, read_body
from tidings.api.operations import Operation, described
from tidings.broker.quotas import loopback
from tidings.broker.rates import AddressBuckets
from tidings.config import FunctionSettings, Limits
from tidings.delivery.admission import Admission
from tidings.errors import ErrorCode, TidingsError
from tidings.functions import SERVED, check_builtin
from tidings.functions.caps import PREFIX
from tidings.model import check_depth, convert
from tidings.networks import address_key, wider_keys
from tidings.sandbox.runner import SandboxRunner
from tidings.wire import thesis as w

LIMIT = 8 * 1024 * 1024
CLIENTS = 10_000  # addresses remembered by the rate limit; past it, the longest idle are forgotten


def buckets(request: Request, settings: FunctionSettings) -> AddressBuckets:
    found = getattr(request.app.state, "detect_buckets", None)
    if not isinstance(found, AddressBuckets):
        rate, burst = settings.detect_rate_per_s, max(1, settings.detect_burst)
        found = AddressBuckets(rate, burst, time.monotonic, max_keys=CLIENTS)
        request.app.state.detect_buckets = found
    return found


def reading(request: Request, settings: FunctionSettings) -> Admission:
    """Bodies being read, by client: `functions.detect_reads_per_client` at once each."""
    found = getattr(request.app.state, "detect_reading", None)
    if not isinstance(found, Admission):
        found = Admission(settings.detect_reads_per_client)
        request.app.state.detect_reading = found
    return found


def all_reading(request: Request, settings: FunctionSettings) -> Admission:
    """Bodies being read from all clients: `functions.detect_reads` at once (each up to
    8 MiB: 20 addresses with 2 slow uploads each held 330 MB of the broker)."""
    found = getattr(request.app.state, "detect_all_reading", None)
    if not isinstance(found, Admission):
        found = request.app.state.detect_all_reading = Admission(settings.detect_reads)
    return found


def reader(request: Request, limits: Limits) -> str:
    """Whose turn reading a body takes: its client's address (an IPv6 client's /64); this
    machine's clients (the broker's own URL functions among them) each their own, unless
    `limits.rate_limit_loopback`."""
    address = request.client.host if request.client else ""
    key, local = address_key(address)
    if local and not limits.rate_limit_loopback:
        return f"{key}:{id(request)}"
    return key


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
    wait = buckets(request, settings).take(address)  # an IPv6 client's /64, /48 and /32
    if not wait:
        return None
    detail = f"at most {settings.detect_rate_per_s:g} calls a second from one address"
    if wider_keys(address):
        detail += " (an IPv6 /64; its /48 4 times that, its /32 16 times)"
    refused = TidingsError(ErrorCode.RATE_LIMITED, detail=detail, retry_s=math.ceil(wait))
    return answer(error(refused), refused.status, {"Retry-After": str(math.ceil(wait))})


def endpoint(name: str) -> Any:
    @described(Operation(w.FunctionCallBody, answer=w.Match))
    async def handle(request: Request) -> Response:
        broker = request.app.state.broker
        settings = broker.settings.functions
        limits = broker.settings.limits
        if (refused := limited(request, settings, limits)) is not None:
            return refused
        async with (
            reading(request, settings).turn(reader(request, limits)),  # its sender's first,
            all_reading(request, settings).turn("all"),  # then one of all
        ):
            body = await read_body(request, LIMIT)
        async with gate(request, settings).turn("library"):
            return await call(body, broker, name)

    handle.__doc__ = f"The {name} function as a URL function."
    handle.__name__ = name
    return handle


async def call(body: bytes, broker: Any, name: str) -> Response:
    """Check and run one call, in the library's workers."""
    raw = await beside(len(body), lambda: parse_json(body))
    call = convert(raw, w.FunctionCallBody)
    limits = broker.settings.limits
    check_depth(raw["publication"], "publication", limits)
    check_depth(call.params, "params", limits)
    check_builtin(name, call.params, field="$")
    runner = broker.functions.runner
    if not isinstance(runner, SandboxRunner):
        raise TidingsError(ErrorCode.UNAVAILABLE, detail="function matching is not enabled")
    matched, problem = await runner.call_library(name, raw["publication"], call.params)
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
