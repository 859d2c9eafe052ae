"""Records (the broker's and the store's) as the wire shapes the API answers with
(`tidings.wire`), and the one way an answer is encoded: msgspec, from the shape."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

import msgspec
from starlette.responses import Response

from tidings.broker import Published
from tidings.errors import TidingsError
from tidings.model import FunctionSpec, Predicate, Subscription
from tidings.store.base import AckResult, DeadLetter, Endpoint
from tidings.wire import v1 as w
from tidings.wire.base import ErrorAnswer, ErrorDetail, Settled

JSON_MEDIA = "application/json"


def answer(shape: Any, status: int = 200, headers: Mapping[str, str] | None = None) -> Response:
    """A JSON answer encoded from its wire shape (a Struct, or a container of them)."""
    return Response(msgspec.json.encode(shape), status, headers, media_type=JSON_MEDIA)


class Counts(Protocol):
    """A queue's counts (the store's depth, the broker's gauges)."""

    @property
    def ready(self) -> int: ...
    @property
    def leased(self) -> int: ...
    @property
    def dead(self) -> int: ...


def depth(found: Counts) -> w.Depth:
    """A queue's depth, from its counts."""
    return w.Depth(found.ready, found.leased, found.dead)


def published(p: Published) -> w.Published:
    return w.Published(
        p.publication.id,
        p.publication.published_at,
        p.deliveries,
        p.duplicate,
        p.evaluations,
        p.progress_token,
    )


def settled(result: AckResult) -> Settled:
    return Settled(result.acked, result.unknown)


def dead_letter(d: DeadLetter) -> w.DeadLetterOut:
    return w.DeadLetterOut(
        d.id,
        d.publication_id,
        d.attempt,
        list(d.subscription_ids),
        d.enqueued_at,
        d.reason,
        d.dead_at,
        d.body,
    )


def webhook(e: Endpoint, retention_s: float) -> w.Webhook:
    """`retention_s`: how long its messages are retried (`Outlet.retention_of`)."""
    return w.Webhook(e.url, e.state, e.reason, e.failures, e.updated_at, e.secret, retention_s)


def predicate(p: Predicate) -> w.PredicateOut:
    value = list(p.value) if isinstance(p.value, tuple) else p.value
    return w.PredicateOut(p.key, p.op.value, value)


def function(f: FunctionSpec) -> w.FunctionOut:
    fn = w.FunctionOut(f.function_type, dict(f.params), f.fail_open)
    setattr(fn, f.kind, f.source)  # exactly one of code, url, builtin
    return fn


def subscription(s: Subscription) -> w.SubscriptionOut:
    out = w.SubscriptionOut(s.id, s.subscriber_id, s.kind, s.created_at, s.status, s.status_reason)
    if s.kind == "topic":
        out.topics = list(s.topics)
    elif s.kind == "content":
        out.predicates = [predicate(p) for p in s.predicates]
    elif s.function is not None:
        out.function = function(s.function)
    return out


def error(exc: TidingsError) -> ErrorAnswer:
    """The error answer every API gives."""
    return ErrorAnswer(ErrorDetail(exc.code.value, exc.message, exc.field))
