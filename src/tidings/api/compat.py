"""The thesis's API under /api, so its sample inputs work verbatim (plus a bearer token).

Differences from the native API, as the thesis states them: values arrive as strings and
compare as numbers where both sides parse as numbers; topic publishing sends one message
per (subscriber, matching topic); a content subscription's entries form one conjunction.
"""

from __future__ import annotations

import math
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from tidings.api.io import JSONResponse, base_url, bearer, json_body, query_number
from tidings.api.v1 import SMALL_BODY, broker_of, settings_of
from tidings.broker import Broker, PublicationInput
from tidings.errors import ErrorCode, TidingsError, invalid
from tidings.model import (
    JSON,
    Scalar,
    is_scalar,
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


async def body(request: Request) -> dict[str, Any]:
    raw = await json_body(request, settings_of(request).limits.max_publication_bytes)
    if not isinstance(raw, dict):
        raise invalid("$", "expected a JSON object")
    return raw


async def subscriber_of(request: Request, raw: dict[str, Any]) -> tuple[Broker, str]:
    sid = required(raw, "subscriberId")
    if not isinstance(sid, str):
        raise invalid("subscriberId", "expected a string")
    broker = broker_of(request)
    await broker.authenticate(sid, bearer(request))
    return broker, sid


def compat_queue_url(request: Request, subscriber_id: str) -> str:
    return f"{base_url(request, settings_of(request).public_url)}/api/queues/{subscriber_id}"


async def register_subscriber(request: Request) -> Response:
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


async def unregister_subscriber(request: Request) -> Response:
    raw = await body(request)
    broker, sid = await subscriber_of(request, raw)
    queue = raw.get("queueUrl")
    if queue is not None and queue not in (sid, compat_queue_url(request, sid)):
        raise invalid("queueUrl", "this is not the subscriber's queue")
    await broker.unregister(sid)
    return JSONResponse({"subscriberId": sid, "unregistered": True})


async def subscribe_topics(request: Request) -> Response:
    raw = await body(request)
    broker, sid = await subscriber_of(request, raw)
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


async def subscribe_content(request: Request) -> Response:
    raw = await body(request)
    broker, sid = await subscriber_of(request, raw)
    predicates = predicates_of(required(raw, "content"), broker)
    sub = await broker.subscribe(sid, "content", predicates=predicates)
    return JSONResponse(
        {
            "subscriberId": sid,
            "subscriptionId": sub.id,
            "content": [p.to_json() for p in predicates],
        }
    )


async def subscribe_function(request: Request) -> Response:
    raw = await body(request)
    broker, sid = await subscriber_of(request, raw)
    kind = required(raw, "functionType")
    if kind not in ("url", "code", "builtin"):
        raise invalid("functionType", "functionType is url, code or builtin")
    source = required(raw, "matchingFunction")
    if kind == "url" and isinstance(source, str) and "://" not in source:
        source = f"http://{source}"  # the thesis's samples omit the scheme
    native = {
        "function_type": required(raw, "subscriptionTopic"),
        kind: source,
        "params": raw.get("parameters", {}) or {},
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
    return names.get(field or "", field)


def _message(raw: dict[str, Any]) -> JSON:
    if "message" not in raw:
        raise TidingsError(ErrorCode.MISSING_FIELD, field="message")
    return raw["message"]


async def publish_topics(request: Request) -> Response:
    raw = await body(request)
    limits = settings_of(request).limits
    topics = required(raw, "topics")
    if not isinstance(topics, list) or not topics:
        raise invalid("topics", "expected a non-empty array of topics")
    checked = tuple(
        dict.fromkeys(
            validate_topic(t, f"topics[{i}]", limits, pattern=False) for i, t in enumerate(topics)
        )
    )
    result = await broker_of(request).publish_per_topic(_message(raw), checked)
    return JSONResponse({"publicationId": result.publication.id, "deliveries": result.deliveries})


def attributes_of(content: JSON, request: Request) -> dict[str, Scalar]:
    if not isinstance(content, list):
        raise invalid("content", "expected an array of {key, value}")
    attrs: dict[str, JSON] = {}
    for i, entry in enumerate(content):
        if not isinstance(entry, dict) or not isinstance(entry.get("key"), str):
            raise invalid(f"content[{i}]", "expected an object {key, value}")
        value = numeric(required(entry, "value", f"content[{i}]."))
        if not is_scalar(value):
            raise invalid(f"content[{i}].value", "a value is a string, number or boolean")
        attrs[entry["key"]] = value
    return parse_attributes(attrs, settings_of(request).limits, "content")


async def publish_content(request: Request) -> Response:
    raw = await body(request)
    attrs = attributes_of(required(raw, "content"), request)
    result = await broker_of(request).publish(PublicationInput(_message(raw), attributes=attrs))
    return JSONResponse({"publicationId": result.publication.id, "deliveries": result.deliveries})


async def publish_functions(request: Request) -> Response:
    raw = await body(request)
    types = required(raw, "subscriptionTopics")
    if not isinstance(types, list) or not types or not all(isinstance(t, str) and t for t in types):
        raise invalid("subscriptionTopics", "expected a non-empty array of strings")
    item = PublicationInput(_message(raw), function_types=tuple(dict.fromkeys(types)))
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


async def read_queue(request: Request) -> Response:
    broker, sid = broker_of(request), request.path_params["subscriber_id"]
    await broker.authenticate(sid, bearer(request))
    q = broker.settings.queues
    max_n = int(query_number(request, "max", 10, 1, q.max_pull))
    wait = query_number(request, "wait", 0, 0, q.max_wait_s)
    messages = await broker.pull(sid, max_n, wait)
    return JSONResponse({"messages": [compat_message(m) for m in messages]})


async def ack_queue(request: Request) -> Response:
    broker, sid = broker_of(request), request.path_params["subscriber_id"]
    await broker.authenticate(sid, bearer(request))
    raw = await json_body(request, SMALL_BODY * 16)
    receipts = raw.get("receipts") if isinstance(raw, dict) else None
    if not isinstance(receipts, list) or not all(isinstance(r, str) for r in receipts):
        raise invalid("receipts", "expected an array of receipt strings")
    result = await broker.ack(sid, receipts)
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
