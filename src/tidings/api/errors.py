"""Exception handlers: every error answers `{"error": {"code", "message", "field"}}`."""

from __future__ import annotations

import logging

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response

from tidings.api.io import JSONResponse
from tidings.errors import ErrorCode, TidingsError

log = logging.getLogger("tidings.api")

HTTP_CODES = {404: ErrorCode.NOT_FOUND, 405: ErrorCode.METHOD_NOT_ALLOWED}


async def tidings_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, TidingsError)
    return JSONResponse(exc.to_dict(), status_code=exc.status)


async def http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    code = HTTP_CODES.get(exc.status_code, ErrorCode.NOT_FOUND)
    err = TidingsError(code, detail=f"no route for {request.method} {request.url.path}")
    return JSONResponse(err.to_dict(), status_code=exc.status_code)


async def server_error(request: Request, exc: Exception) -> Response:
    log.exception("unhandled error on %s %s", request.method, request.url.path)
    return JSONResponse(TidingsError(ErrorCode.INTERNAL).to_dict(), status_code=500)


HANDLERS = {TidingsError: tidings_error, HTTPException: http_error, Exception: server_error}
