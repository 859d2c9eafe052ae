"""Subscribing under the thesis's /api: to topics, by content (one conjunction of
conditions whose values compare as numbers where both sides are numbers), by a function."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from tidings.api import answers
from tidings.api.answers import answer
from tidings.api.operations import Operation, described
from tidings.api.thesis.common import numeric, owned
from tidings.broker import Broker
from tidings.errors import TidingsError, invalid
from tidings.model import (
    JSON,
    convert,
    parse_function_spec,
    parse_predicates,
    parse_topic_filters,
    required,
)
from tidings.wire import thesis as w


@described(Operation(w.SubscribeTopicsBody, answer=w.CompatSubscribed, token=True))
async def subscribe_topics(request: Request) -> Response:
    """Subscribe to topics."""
    broker, sid, raw = await owned(request, w.SubscribeTopicsBody)
    topics = parse_topic_filters(required(raw, "topics"), broker.settings.limits)
    sub = await broker.subscribe(sid, "topic", topics=topics)
    return answer(w.CompatSubscribed(sid, sub.id, topics=list(topics)))


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


@described(Operation(w.SubscribeContentBody, answer=w.CompatSubscribed, token=True))
async def subscribe_content(request: Request) -> Response:
    """Subscribe by content: one conjunction of conditions on attributes."""
    broker, sid, raw = await owned(request, w.SubscribeContentBody)
    predicates = predicates_of(required(raw, "content"), broker)
    try:
        sub = await broker.subscribe(sid, "content", predicates=predicates)
    except TidingsError as exc:  # a budget's refusal names the thesis's field
        exc.field = (exc.field or "").replace("predicates[", "content[") or None
        raise
    content = [answers.predicate(p) for p in predicates]
    return answer(w.CompatSubscribed(sid, sub.id, content=content))


@described(Operation(w.SubscribeFunctionBody, answer=w.CompatSubscribed, token=True))
async def subscribe_function(request: Request) -> Response:
    """Subscribe by a matching function (url, code or builtin) for a subscription topic."""
    broker, sid, raw = await owned(request, w.SubscribeFunctionBody)
    fn = convert(raw, w.SubscribeFunctionBody)
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
    return answer(w.CompatSubscribed(sid, sub.id, subscriptionTopic=spec.function_type))


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


routes = [
    Route("/api/SubscribeTopics", subscribe_topics, methods=["POST"]),
    Route("/api/SubscribeContent", subscribe_content, methods=["POST"]),
    Route("/api/SubscribeFunction", subscribe_function, methods=["POST"]),
]
