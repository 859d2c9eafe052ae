"""Publishing under the thesis's /api: to topics (one message per subscriber and matching
topic), with content (attributes as {key, value} entries), to function subscriptions."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from tidings.api.answers import answer
from tidings.api.common import broker_of, settings_of
from tidings.api.io import bearer
from tidings.api.operations import Operation, described
from tidings.api.thesis.common import body, numeric
from tidings.broker import PublicationInput, Published
from tidings.errors import invalid
from tidings.model import JSON, Scalar, check_depth, parse_attributes, validate_topic
from tidings.wire import thesis as w

DEDUP_HEADER = "tidings-dedup-id"


def _message(message: JSON, request: Request) -> JSON:
    return check_depth(message, "message", settings_of(request).limits)


def dedup_id(request: Request, field: str | None) -> str | None:
    """The publication's dedup id: the body's `dedupId`, else the `Tidings-Dedup-Id`
    header (at most 128 characters either way)."""
    sent = field or request.headers.get(DEDUP_HEADER) or None
    if sent is not None and len(sent) > 128:
        raise invalid("Tidings-Dedup-Id", "a dedup id is at most 128 characters")
    return sent


def _published(result: Published) -> w.CompatPublished:
    return w.CompatPublished(result.publication.id, result.deliveries, result.duplicate)


@described(Operation(w.PublishTopicsBody, answer=w.CompatPublished))
async def publish_topics(request: Request) -> Response:
    """Publish to topics: one message per (subscriber, matching topic)."""
    sent = await body(request, w.PublishTopicsBody)
    limits = settings_of(request).limits
    checked = tuple(
        dict.fromkeys(
            validate_topic(topic, f"topics[{i}]", limits, pattern=False)
            for i, topic in enumerate(sent.topics)
        )
    )
    data = _message(sent.message, request)
    result = await broker_of(request).publish_per_topic(
        data, checked, dedup_id(request, sent.dedupId), bearer(request)
    )
    return answer(_published(result))


def attributes_of(content: list[w.ContentValue], request: Request) -> dict[str, Scalar]:
    attrs = {entry.key: numeric(entry.value) for entry in content}
    return parse_attributes(attrs, settings_of(request).limits, "content")


@described(Operation(w.PublishContentBody, answer=w.CompatPublished))
async def publish_content(request: Request) -> Response:
    """Publish with content: attributes as {key, value} entries."""
    sent = await body(request, w.PublishContentBody)
    attrs = attributes_of(sent.content, request)
    item = PublicationInput(
        _message(sent.message, request),
        attributes=attrs,
        dedup_id=dedup_id(request, sent.dedupId),
    )
    return answer(_published(await broker_of(request).publish(item, bearer(request))))


@described(Operation(w.PublishFunctionsBody, answer=w.CompatPublished))
async def publish_functions(request: Request) -> Response:
    """Publish to the function subscriptions of the given subscription topics."""
    sent = await body(request, w.PublishFunctionsBody)
    types = tuple(dict.fromkeys(sent.subscriptionTopics))
    item = PublicationInput(
        _message(sent.message, request),
        function_types=types,
        dedup_id=dedup_id(request, sent.dedupId),
    )
    return answer(_published(await broker_of(request).publish(item, bearer(request))))


routes = [
    Route("/api/PublishTopics", publish_topics, methods=["POST"]),
    Route("/api/PublishContent", publish_content, methods=["POST"]),
    Route("/api/PublishFunctions", publish_functions, methods=["POST"]),
]
