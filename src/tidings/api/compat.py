"""The thesis's API under /api, so its sample inputs work verbatim (plus a bearer token).

Differences from the native API, as the thesis states them: values arrive as strings and
compare as numbers where both sides parse as numbers; topic publishing sends one message
per (subscriber, matching topic); a content subscription's entries form one conjunction.
"""

from __future__ import annotations

import math
from typing import Any, TypeVar

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from tidings.api import schemas as t
from tidings.api.io import JSONResponse, base_url, bearer, body_as, json_body, query_as
from tidings.api.schemas import Operation, described
from tidings.api.serve import servable
from tidings.api.v1 import RECEIPTS_BODY, broker_of, settings_of
from tidings.broker import Broker, PublicationInput
from tidings.errors import TidingsError, invalid
from tidings.model import (
    JSON,
    Scalar,
    check_depth,
    check_receipts,
    convert,
    parse_attributes,
    parse_function_spec,
    parse_predicates,
    parse_topic_filters,
    required,
    validate_topic,
)
from tidings.store.base import Message


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


T = TypeVar("T")


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


def compat_queue_url(request: Request, subscriber_id: str) -> str:
    return f"{base_url(request, settings_of(request).public_url)}/api/queues/{subscriber_id}"


@described(Operation(answer=t.CompatRegistered))
async def register_subscriber(request: Request) -> Response:
    """Register a subscriber (takes no body): its id, queue and token."""
    subscriber, token = await broker_of(request).register()
    url = compat_queue_url(request, subscriber.id)
    return JSONResponse(
        {
            "subscriberId": subscriber.id,
            "queueName": subscriber.id,
            "queueUrl": url,
            "connectionString": f"Endpoint={url};Token={token}",
            "token": token,
        }
    )


@described(Operation(t.UnregisterBody, answer=t.CompatUnregistered, token=True))
async def unregister_subscriber(request: Request) -> Response:
    """Unregister a subscriber."""
    broker, sid, raw = await owned(request, t.UnregisterBody)
    queue = raw.get("queueUrl")
    if queue is not None and queue not in (sid, compat_queue_url(request, sid)):
        raise invalid("queueUrl", "this is not the subscriber's queue")
    await broker.unregister(sid)
    return JSONResponse({"subscriberId": sid, "unregistered": True})


@described(Operation(t.SubscribeTopicsBody, answer=t.CompatSubscribed, token=True))
async def subscribe_topics(request: Request) -> Response:
    """Subscribe to topics."""
    broker, sid, raw = await owned(request, t.SubscribeTopicsBody)
    topics = parse_topic_filters(required(raw, "topics"), broker.settings.limits)
    sub = await broker.subscribe(sid, "topic", topics=topics)
    return JSONResponse({"subscriberId": sid, "subscriptionId": sub.id, "topics": list(topics)})


def predicates_of(content: JSON, broker: Broker) -> Any:
    if not isinstance(content, list) or not content:
        raise invalid("content", "expected a non-empty array of {key, value, condition}")
    native = []
    for i, entry in enumerate(content):
        if not isinstance(entry, dict):
            raise invalid(f"content[{i}]", "expected an object {key, value, condition}")
        value = required(entry, "value", f"content[{i}].")
        native.append(
            {
                "key": entry.get("key"),
                "op": entry.get("condition", "="),
                "value": [numeric(v) for v in value] if isinstance(value, list) else numeric(value),
            }
        )
    try:
        return parse_predicates(native, broker.settings.limits, "content")
    except TidingsError as exc:  # name the thesis's field, not ours
        exc.field = (exc.field or "").replace(".op", ".condition")
        raise


@described(Operation(t.SubscribeContentBody, answer=t.CompatSubscribed, token=True))
async def subscribe_content(request: Request) -> Response:
    """Subscribe by content: one conjunction of conditions on attributes."""
    broker, sid, raw = await owned(request, t.SubscribeContentBody)
    predicates = predicates_of(required(raw, "content"), broker)
    sub = await broker.subscribe(sid, "content", predicates=predicates)
    return JSONResponse(
        {
            "subscriberId": sid,
            "subscriptionId": sub.id,
            "content": [p.to_json() for p in predicates],
        }
    )


@described(Operation(t.SubscribeFunctionBody, answer=t.CompatSubscribed, token=True))
async def subscribe_function(request: Request) -> Response:
    """Subscribe by a matching function (url, code or builtin) for a subscription topic."""
    broker, sid, raw = await owned(request, t.SubscribeFunctionBody)
    fn = convert(raw, t.SubscribeFunctionBody)
    source = fn.matchingFunction
    if fn.functionType == "url" and "://" not in source:
        source = f"http://{source}"  # the thesis's samples omit the scheme
    native = {
        "function_type": fn.subscriptionTopic,
        fn.functionType: source,
        "params": fn.parameters or {},
    }
    try:
        spec = parse_function_spec(native, "function", broker.settings.limits)
    except TidingsError as exc:
        exc.field = _thesis_field(exc.field)
        raise
    try:
        sub = await broker.subscribe(sid, "function", function=spec)
    except TidingsError as exc:  # refusals of the code itself, under the thesis's name
        exc.field = _thesis_field(exc.field)
        raise
    return JSONResponse(
        {"subscriberId": sid, "subscriptionId": sub.id, "subscriptionTopic": spec.function_type}
    )


def _thesis_field(field: str | None) -> str | None:
    names = {
        "function.function_type": "subscriptionTopic",
        "function.params": "parameters",
        "function.url": "matchingFunction",
        "function.code": "matchingFunction",
        "function.builtin": "matchingFunction",
    }
    if field and field.startswith("function.params."):
        return "parameters." + field.removeprefix("function.params.")
    return names.get(field or "", field)


def _message(message: JSON, request: Request) -> JSON:
    return check_depth(message, "message", settings_of(request).limits)


@described(Operation(t.PublishTopicsBody, answer=t.CompatPublished))
async def publish_topics(request: Request) -> Response:
    """Publish to topics: one message per (subscriber, matching topic)."""
    sent = await body(request, t.PublishTopicsBody)
    limits = settings_of(request).limits
    checked = tuple(
        dict.fromkeys(
            validate_topic(topic, f"topics[{i}]", limits, pattern=False)
            for i, topic in enumerate(sent.topics)
        )
    )
    result = await broker_of(request).publish_per_topic(_message(sent.message, request), checked)
    return JSONResponse({"publicationId": result.publication.id, "deliveries": result.deliveries})


def attributes_of(content: list[t.ContentValue], request: Request) -> dict[str, Scalar]:
    attrs = {entry.key: numeric(entry.value) for entry in content}
    return parse_attributes(attrs, settings_of(request).limits, "content")


@described(Operation(t.PublishContentBody, answer=t.CompatPublished))
async def publish_content(request: Request) -> Response:
    """Publish with content: attributes as {key, value} entries."""
    sent = await body(request, t.PublishContentBody)
    attrs = attributes_of(sent.content, request)
    item = PublicationInput(_message(sent.message, request), attributes=attrs)
    result = await broker_of(request).publish(item)
    return JSONResponse({"publicationId": result.publication.id, "deliveries": result.deliveries})


@described(Operation(t.PublishFunctionsBody, answer=t.CompatPublished))
async def publish_functions(request: Request) -> Response:
    """Publish to the function subscriptions of the given subscription topics."""
    sent = await body(request, t.PublishFunctionsBody)
    types = tuple(dict.fromkeys(sent.subscriptionTopics))
    item = PublicationInput(_message(sent.message, request), function_types=types)
    result = await broker_of(request).publish(item)
    return JSONResponse({"publicationId": result.publication.id, "deliveries": result.deliveries})


def compat_message(m: Message) -> dict[str, Any]:
    pub = m.body if isinstance(m.body, dict) else {}
    attrs = pub.get("attributes") or {}
    inner = {
        "message": pub.get("data"),
        "publicationId": m.publication_id,
        "topic": pub.get("matched_topic"),
        "topics": pub.get("topics", []),
        "content": [{"key": k, "value": v} for k, v in attrs.items()],
        "subscriptionTopics": pub.get("function_types", []),
        "subscriptionIds": list(m.subscription_ids),
    }
    return {"id": m.id, "receipt": m.receipt, "attempt": m.attempt, "body": inner}


@described(Operation(query=t.compat_pull_query, answer=t.CompatMessages, token=True))
async def read_queue(request: Request) -> Response:
    """Lease up to `max` messages of the queue, waiting up to `wait` seconds."""
    broker, sid = broker_of(request), request.path_params["subscriber_id"]
    await broker.authenticate(sid, bearer(request))
    q = query_as(request, t.compat_pull_query(broker.settings.queues))
    messages = await broker.pull(sid, q.max, q.wait)
    served = await servable(broker, sid, messages, compat_message)
    return JSONResponse({"messages": list(served.values())})


@described(Operation(t.AckBody, answer=t.Settled, token=True))
async def ack_queue(request: Request) -> Response:
    """Acknowledge (delete) leased messages by their receipts."""
    broker, sid = broker_of(request), request.path_params["subscriber_id"]
    await broker.authenticate(sid, bearer(request))
    _, raw = await body_as(request, t.AckBody, RECEIPTS_BODY)
    result = await broker.ack(sid, check_receipts(raw.receipts))
    return JSONResponse({"acked": result.acked, "unknown": result.unknown})


routes = [
    Route("/api/RegisterSubscriber", register_subscriber, methods=["POST"]),
    Route("/api/UnregisterSubscriber", unregister_subscriber, methods=["POST"]),
    Route("/api/SubscribeTopics", subscribe_topics, methods=["POST"]),
    Route("/api/SubscribeContent", subscribe_content, methods=["POST"]),
    Route("/api/SubscribeFunction", subscribe_function, methods=["POST"]),
    Route("/api/PublishTopics", publish_topics, methods=["POST"]),
    Route("/api/PublishContent", publish_content, methods=["POST"]),
    Route("/api/PublishFunctions", publish_functions, methods=["POST"]),
    Route("/api/queues/{subscriber_id}", read_queue, methods=["GET"]),
    Route("/api/queues/{subscriber_id}/ack", ack_queue, methods=["POST"]),
]
