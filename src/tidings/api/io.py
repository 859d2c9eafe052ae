"""Reading requests and writing answers: size limits, UTF-8, JSON, bearer tokens."""

from __future__ import annotations

from typing import Any

import orjson
from starlette.requests import Request
from starlette.responses import Response

from tidings.errors import ErrorCode, TidingsError, invalid


class JSONResponse(Response):
    media_type = "application/json"

    def render(self, content: Any) -> bytes:
        return orjson.dumps(content)


async def read_body(request: Request, limit: int) -> bytes:
    """The raw body, refused with 413 as soon as it passes `limit` bytes."""
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        raise TidingsError(ErrorCode.PAYLOAD_TOO_LARGE, size=int(declared), limit=limit)
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise TidingsError(ErrorCode.PAYLOAD_TOO_LARGE, size=f"more than {limit}", limit=limit)
        chunks.append(chunk)
    return b"".join(chunks)


def parse_json(body: bytes, *, allow_empty: bool = False) -> Any:
    if not body.strip():
        if allow_empty:
            return {}
        raise TidingsError(ErrorCode.INVALID_JSON, detail="the body is empty")
    try:
        body.decode("utf-8")
    except UnicodeDecodeError:
        raise TidingsError(ErrorCode.INVALID_UTF8) from None
    try:
        return orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise TidingsError(ErrorCode.INVALID_JSON, detail=str(exc)) from None


async def json_body(request: Request, limit: int, *, allow_empty: bool = False) -> Any:
    return parse_json(await read_body(request, limit), allow_empty=allow_empty)


def bearer(request: Request) -> str | None:
    """The token of `Authorization: Bearer <token>`, or None."""
    scheme, _, token = request.headers.get("authorization", "").partition(" ")
    return token.strip() or None if scheme.lower() == "bearer" else None


def query_number(request: Request, name: str, default: float, low: float, high: float) -> float:
    raw = request.query_params.get(name)
    if raw is None:
        return default
    try:
        value = float(raw)
    except ValueError:
        raise invalid(name, f"{name} must be a number") from None
    if not low <= value <= high:
        raise invalid(name, f"{name} must be between {low:g} and {high:g}")
    return value


def base_url(request: Request, public_url: str) -> str:
    return public_url.rstrip("/") if public_url else str(request.base_url).rstrip("/")
