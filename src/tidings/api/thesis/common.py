"""What the thesis's API's handlers share: its numbers that arrive as strings, reading a
body, and the subscriber named in a body whose token must prove it."""

from __future__ import annotations

import math
from typing import Any, TypeVar

from starlette.requests import Request

from tidings.api.common import broker_of, public_base, settings_of
from tidings.api.io import bearer, body_as, json_body
from tidings.broker import Broker
from tidings.model import JSON, convert

T = TypeVar("T")


def numeric(value: JSON) -> JSON:
    """ "1000" -> 1000 and "2.5" -> 2.5; anything else unchanged."""
    if not isinstance(value, str):
        return value
    try:
        number = float(value)
    except ValueError:
        return value
    if not math.isfinite(number):
        return value
    return (
        int(number)
        if number.is_integer() and "." not in value and "e" not in value.lower()
        else number
    )


async def body(request: Request, into: type[T]) -> T:
    """The body as the type that validates it."""
    _, typed = await body_as(request, into, settings_of(request).limits.max_publication_bytes)
    return typed


async def owned(request: Request, into: type[T]) -> tuple[Broker, str, dict[str, Any]]:
    """The broker, the body's subscriberId and the body, the token checked before the
    body's shape (as the native API checks it before reading the body)."""
    raw = await json_body(request, settings_of(request).limits.max_publication_bytes)
    sid = raw.get("subscriberId") if isinstance(raw, dict) else None
    broker = broker_of(request)
    if isinstance(sid, str):
        await broker.authenticate(sid, bearer(request))
    convert(raw, into)
    return broker, raw["subscriberId"], raw


def queue_url(request: Request, subscriber_id: str) -> str:
    return f"{public_base(request)}/api/queues/{subscriber_id}"
