"""What each handler reads and answers, recorded beside it for the OpenAPI document
(`tidings.api.openapi`): the shapes themselves are `tidings.wire`'s."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from msgspec import Struct

from tidings.config import QueueSettings

F = TypeVar("F", bound=Callable[..., Any])


@dataclass(frozen=True, slots=True)
class Operation:
    """What a handler reads and answers, for the OpenAPI document."""

    body: Any = None  # a msgspec type, or None when the route reads no body
    body_required: bool = True
    query: Callable[[QueueSettings], type[Struct]] | None = None
    answer: Any = None  # the 2XX body's type; None: no body (204) or not JSON
    status: int = 200
    media: str = "application/json"
    token: bool = False  # the subscriber's bearer token is required
    # other media types of the body and of the answer, with the same schema (MessagePack)
    body_media: tuple[str, ...] = ()
    answer_media: tuple[str, ...] = ()
    headers: tuple[str, ...] = ()  # optional request headers it reads (docs/api.md)


DESCRIBED: dict[Callable[..., Any], Operation] = {}


def described(op: Operation) -> Callable[[F], F]:
    """Record a handler's types: `@described(Operation(body=AckBody, answer=Settled))`."""

    def mark(handler: F) -> F:
        DESCRIBED[handler] = op
        return handler

    return mark
