"""Exception handlers: every error answers `{"error": {"code", "message", "field"}}`."""

from __future__ import annotations

import logging
import math

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Match
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from tidings.api.answers import answer, error
from tidings.errors import ErrorCode, TidingsError

log = logging.getLogger("tidings.api")

HTTP_CODES = {404: ErrorCode.NOT_FOUND, 405: ErrorCode.METHOD_NOT_ALLOWED}


async def tidings_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, TidingsError)
    retry = retry_after(exc)
    return answer(error(exc), exc.status, {"Retry-After": retry} if retry else None)


def retry_after(exc: TidingsError) -> str | None:
    """The `Retry-After` of a refusal that says when to come back, in whole seconds."""
    retryable = exc.code in (ErrorCode.RATE_LIMITED, ErrorCode.UNAVAILABLE)
    retry = exc.params.get("retry_s") if retryable else None
    return str(max(1, math.ceil(float(retry)))) if retry else None


async def http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    code = HTTP_CODES.get(exc.status_code, ErrorCode.NOT_FOUND)
    err = TidingsError(code, detail=f"no route for {request.method} {request.url.path}")
    headers = {"Allow": allowed(request)} if exc.status_code == 405 else None
    return answer(error(err), exc.status_code, headers)


def allowed(request: Request) -> str:
    """Every method of every route on this path (one Route per method: Starlette's own
    `Allow` would name only the first route's)."""
    methods: set[str] = set()
    for route in request.app.routes:
        match, _ = route.matches(request.scope)
        if match is not Match.NONE:
            methods |= getattr(route, "methods", None) or set()
    return ", ".join(sorted(methods))


HANDLERS = {TidingsError: tidings_error, HTTPException: http_error}


class Internal:
    """Answers an unexpected exception with a JSON 500 and keeps the connection: Starlette's
    outermost handler re-raises after answering, and the server then drops the keep-alive
    connection, failing the client's next, valid request."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = False

        async def watch(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, receive, watch)
        except Exception:
            log.exception("unhandled error on %s %s", scope.get("method"), scope.get("path"))
            if started:  # half an answer sent: only closing the connection can end it
                raise
            body = answer(error(TidingsError(ErrorCode.INTERNAL)), 500)
            await body(scope, receive, send)
