"""The native API under /v1 (see docs/api.md)."""

from __future__ import annotations

import base64
from typing import Any

import orjson
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route, WebSocketRoute

from tidings.api import schemas as t
from tidings.api.io import JSONResponse, base_url, bearer, body_as, publication_body, query_as
from tidings.api.schemas import Operation, described
from tidings.api.serve import listable
from tidings.api.ws import stream
from tidings.broker import Broker, PublicationInput, Published
from tidings.config import Settings
from tidings.delivery.frames import messages_answer, msgpack_answer
from tidings.delivery.webhooks import Webhooks
from tidings.errors import ErrorCode, TidingsError
from tidings.model import (
    check_receipts,
    convert,
    parse_publication_body,
    parse_subscription_body,
)
from tidings.store.base import AckResult, DeadLetter

SMALL_BODY = 64 * 1024
RECEIPTS_BODY = 1024 * 1024


def broker_of(request: Request) -> Broker:
    return request.app.state.broker  # type: ignore[no-any-return]


def settings_of(request: Request) -> Settings:
    return broker_of(request).settings


def webhooks_of(request: Request) -> Webhooks:
    return request.app.state.webhooks  # type: ignore[no-any-return]


async def owner(request: Request) -> tuple[Broker, str]:
    """The broker and the path's subscriber id, once the bearer token proves ownership."""
    broker, sid = broker_of(request), request.path_params["subscriber_id"]
    await broker.authenticate(sid, bearer(request))
    return broker, sid


def queue_url(request: Request, subscriber_id: str) -> str:
    base = base_url(request, settings_of(request).public_url)
    return f"{base}/v1/subscribers/{subscriber_id}/messages"


def dead_json(d: DeadLetter) -> dict[str, Any]:
    return {
        "id": d.id,
        "publication_id": d.publication_id,
        "attempt": d.attempt,
        "subscription_ids": list(d.subscription_ids),
        "enqueued_at": d.enqueued_at,
        "reason": d.reason,
        "dead_at": d.dead_at,
        "body": d.body,
    }


def published_json(p: Published) -> dict[str, Any]:
    return {
        "id": p.publication.id,
        "published_at": p.publication.published_at,
        "deliveries": p.deliveries,
    }


def ack_json(result: AckResult) -> dict[str, Any]:
    return {"acked": result.acked, "unknown": result.unknown}


# ---------------------------------------------------------------- subscribers


@described(Operation(t.RegisterBody, False, answer=t.Registered, status=201))
async def register(request: Request) -> Response:
    """Register a subscriber: its id, its bearer token (shown once) and its queue's URL."""
    _, body = await body_as(request, t.RegisterBody, SMALL_BODY, allow_empty=True)
    subscriber, token = await broker_of(request).register(body.ephemeral)
    return JSONResponse(
        {"id": subscriber.id, "token": token, "queue_url": queue_url(request, subscriber.id)},
        status_code=201,
    )


@described(Operation(answer=t.SubscriberInfo, token=True))
async def subscriber_info(request: Request) -> Response:
    """The subscriber, its queue's depth and its webhook (or null)."""
    broker, sid = await owner(request)
    found, depth = await broker.subscriber(sid), await broker.depth(sid)
    hook = await webhooks_of(request).endpoint(sid)
    return JSONResponse(
        {
            "id": sid,
            "created_at": found.created_at,
            "queue_url": queue_url(request, sid),
            "depth": {"ready": depth.ready, "leased": depth.leased, "dead": depth.dead},
            "webhook": hook and {"url": hook.url, "state": hook.state, "reason": hook.reason},
        }
    )


@described(Operation(status=204, token=True))
async def unregister(request: Request) -> Response:
    """Delete the subscriber, its subscriptions, queue and dead letters."""
    broker, sid = await owner(request)
    await broker.unregister(sid)
    return Response(status_code=204)


# ---------------------------------------------------------------- subscriptions


@described(Operation(t.Subscribe, answer=t.SubscriptionOut, status=201, token=True))
async def create_subscription(request: Request) -> Response:
    """Subscribe by topics, by predicates on attributes, or by a function."""
    broker, sid = await owner(request)
    limit = settings_of(request).limits.max_code_bytes + SMALL_BODY
    raw, _ = await body_as(request, t.SubscriptionBody, limit)
    kind, topics, predicates, function = parse_subscription_body(raw, broker.settings.limits)
    sub = await broker.subscribe(sid, kind, topics, predicates, function)
    return JSONResponse(sub.to_json(), status_code=201)


@described(Operation(answer=t.Subscriptions, token=True))
async def list_subscriptions(request: Request) -> Response:
    """The subscriber's subscriptions."""
    broker, sid = await owner(request)
    return JSONResponse({"subscriptions": [s.to_json() for s in await broker.subscriptions(sid)]})


@described(Operation(answer=t.SubscriptionOut, token=True))
async def get_subscription(request: Request) -> Response:
    """One subscription."""
    broker, sid = await owner(request)
    sub = await broker.subscription(sid, request.path_params["subscription_id"])
    return JSONResponse(sub.to_json())


@described(Operation(status=204, token=True))
async def delete_subscription(request: Request) -> Response:
    """Unsubscribe."""
    broker, sid = await owner(request)
    await broker.unsubscribe(sid, request.path_params["subscription_id"])
    return Response(status_code=204)


@described(Operation(answer=t.SubscriptionOut, token=True))
async def resume_subscription(request: Request) -> Response:
    """Resume a function subscription suspended after repeated failures (takes no body)."""
    broker, sid = await owner(request)
    sub = await broker.resume(sid, request.path_params["subscription_id"])
    return JSONResponse(sub.to_json())


# ---------------------------------------------------------------- publishing


def publication_input(raw: Any, settings: Settings) -> PublicationInput:
    """A publication from its decoded body. Binary `data` (MessagePack `bin`) is kept as its
    base64 text, marked `data_encoding: base64`; binary anywhere else has no JSON form."""
    encoding = "json"
    if isinstance(raw, dict) and isinstance(raw.get("data"), bytes | bytearray):
        raw = {**raw, "data": base64.b64encode(raw["data"]).decode()}
        encoding = "base64"
    data, topics, attributes, ftypes = parse_publication_body(raw, settings.limits)
    try:
        orjson.dumps(data)
    except orjson.JSONEncodeError:
        raise TidingsError(
            ErrorCode.INVALID_FIELD,
            field="data",
            detail="binary data is taken only as the whole of data",
        ) from None
    return PublicationInput(data, topics, attributes, ftypes, encoding)


@described(
    Operation(
        t.PublicationBody, answer=t.Published, status=201, body_media=("application/msgpack",)
    )
)
async def publish(request: Request) -> Response:
    """Publish one publication: its topics, attributes, function types and data."""
    settings = settings_of(request)
    raw = await publication_body(request, settings.limits.max_publication_bytes)
    convert(raw, t.PublicationBody)
    result = await broker_of(request).publish(publication_input(raw, settings))
    return JSONResponse(published_json(result), status_code=201)


@described(
    Operation(
        t.BatchBody,
        query=t.batch_query,
        answer=t.BatchAnswer,
        status=201,
        body_media=("application/msgpack",),
    )
)
async def publish_batch(request: Request) -> Response:
    """Publish many publications in one call (one group commit)."""
    settings = settings_of(request)
    answer = query_as(request, t.BatchQuery).answer
    limits = settings.limits
    raw = await publication_body(request, limits.max_publication_bytes * 16)
    convert(raw, t.BatchBody)
    items = raw["publications"]
    if len(items) > limits.max_batch:
        raise TidingsError(
            ErrorCode.LIMIT_EXCEEDED,
            field="publications",
            detail=f"at most {limits.max_batch} publications per batch",
        )
    inputs = []
    for i, item in enumerate(items):
        try:
            inputs.append(publication_input(item, settings))
        except TidingsError as exc:
            exc.field = (
                f"publications[{i}].{exc.field}"
                if exc.field not in (None, "$")
                else f"publications[{i}]"
            )
            raise
    results = await broker_of(request).publish_batch(inputs)
    if answer == "count":
        counted = {"published": len(results), "deliveries": sum(r.deliveries for r in results)}
        return JSONResponse(counted, status_code=201)
    return JSONResponse({"publications": [published_json(r) for r in results]}, status_code=201)


# ---------------------------------------------------------------- receiving


@described(
    Operation(
        query=t.pull_query, answer=t.Messages, token=True, answer_media=("application/msgpack",)
    )
)
async def pull(request: Request) -> Response:
    """Lease up to `max` messages, waiting up to `wait` seconds for the first."""
    broker, sid = await owner(request)
    q = query_as(request, t.pull_query(broker.settings.queues))
    messages = await broker.pull(sid, q.max, q.wait, q.visibility)
    if q.encoding == "msgpack":
        return Response(msgpack_answer(messages, q.form), media_type="application/msgpack")
    return Response(messages_answer(messages, q.form), media_type="application/json")


@described(Operation(t.AckBody, answer=t.Settled, token=True))
async def ack(request: Request) -> Response:
    """Acknowledge (delete) leased messages by their receipts."""
    broker, sid = await owner(request)
    _, body = await body_as(request, t.AckBody, RECEIPTS_BODY)
    return JSONResponse(ack_json(await broker.ack(sid, check_receipts(body.receipts))))


@described(Operation(t.NackBody, answer=t.Settled, token=True))
async def nack(request: Request) -> Response:
    """Release leased messages for redelivery, after `delay` seconds."""
    broker, sid = await owner(request)
    _, body = await body_as(request, t.NackBody, RECEIPTS_BODY)
    result = await broker.nack(sid, check_receipts(body.receipts), body.delay)
    return JSONResponse(ack_json(result))


@described(Operation(query=t.dead_letters_query, answer=t.DeadLetters, token=True))
async def dead_letters(request: Request) -> Response:
    """The subscriber's dead letters, oldest first."""
    broker, sid = await owner(request)
    q = query_as(request, t.DeadLettersQuery)
    letters = await broker.dead_letters(sid, q.limit)
    return JSONResponse({"dead_letters": listable(letters, dead_json)})


@described(Operation(t.RedriveBody, False, answer=t.Redriven, token=True))
async def redrive(request: Request) -> Response:
    """Move dead letters (all, or the given ids) back to the queue."""
    broker, sid = await owner(request)
    _, body = await body_as(request, t.RedriveBody, RECEIPTS_BODY, allow_empty=True)
    return JSONResponse({"redriven": await broker.redrive(sid, body.ids)})


S = "/v1/subscribers/{subscriber_id}"
routes = [
    Route("/v1/subscribers", register, methods=["POST"]),
    Route(S, subscriber_info, methods=["GET"]),
    Route(S, unregister, methods=["DELETE"]),
    Route(f"{S}/subscriptions", create_subscription, methods=["POST"]),
    Route(f"{S}/subscriptions", list_subscriptions, methods=["GET"]),
    Route(f"{S}/subscriptions/{{subscription_id}}", get_subscription, methods=["GET"]),
    Route(f"{S}/subscriptions/{{subscription_id}}", delete_subscription, methods=["DELETE"]),
    Route(f"{S}/subscriptions/{{subscription_id}}/resume", resume_subscription, methods=["POST"]),
    Route("/v1/publications", publish, methods=["POST"]),
    Route("/v1/publications/batch", publish_batch, methods=["POST"]),
    Route(f"{S}/messages", pull, methods=["GET"]),
    Route(f"{S}/messages/ack", ack, methods=["POST"]),
    Route(f"{S}/messages/nack", nack, methods=["POST"]),
    Route(f"{S}/dead-letters", dead_letters, methods=["GET"]),
    Route(f"{S}/dead-letters/redrive", redrive, methods=["POST"]),
    WebSocketRoute(f"{S}/stream", stream),
]
