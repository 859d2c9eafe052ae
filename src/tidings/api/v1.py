"""The native API under /v1 (see docs/api.md)."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route, WebSocketRoute

from tidings.api.io import JSONResponse, base_url, bearer, json_body, query_number
from tidings.api.ws import stream
from tidings.broker import Broker, PublicationInput, Published
from tidings.config import Settings
from tidings.errors import ErrorCode, TidingsError, invalid
from tidings.model import parse_publication_body, parse_subscription_body
from tidings.store.base import AckResult, DeadLetter, Message

SMALL_BODY = 64 * 1024


def broker_of(request: Request) -> Broker:
    return request.app.state.broker  # type: ignore[no-any-return]


def settings_of(request: Request) -> Settings:
    return broker_of(request).settings


async def owner(request: Request) -> tuple[Broker, str]:
    """The broker and the path's subscriber id, once the bearer token proves ownership."""
    broker, sid = broker_of(request), request.path_params["subscriber_id"]
    await broker.authenticate(sid, bearer(request))
    return broker, sid


def queue_url(request: Request, subscriber_id: str) -> str:
    base = base_url(request, settings_of(request).public_url)
    return f"{base}/v1/subscribers/{subscriber_id}/messages"


def message_json(m: Message) -> dict[str, Any]:
    return {
        "id": m.id,
        "receipt": m.receipt,
        "attempt": m.attempt,
        "publication_id": m.publication_id,
        "subscription_ids": list(m.subscription_ids),
        "enqueued_at": m.enqueued_at,
        "body": m.body,
    }


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


async def register(request: Request) -> Response:
    body = await json_body(request, SMALL_BODY, allow_empty=True)
    ephemeral = body.get("ephemeral", False) if isinstance(body, dict) else False
    if not isinstance(ephemeral, bool):
        raise invalid("ephemeral", "expected true or false")
    subscriber, token = await broker_of(request).register(ephemeral)
    return JSONResponse(
        {"id": subscriber.id, "token": token, "queue_url": queue_url(request, subscriber.id)},
        status_code=201,
    )


async def subscriber_info(request: Request) -> Response:
    broker, sid = await owner(request)
    found, depth = await broker.subscriber(sid), await broker.depth(sid)
    return JSONResponse(
        {
            "id": sid,
            "created_at": found.created_at,
            "queue_url": queue_url(request, sid),
            "depth": {"ready": depth.ready, "leased": depth.leased, "dead": depth.dead},
        }
    )


async def unregister(request: Request) -> Response:
    broker, sid = await owner(request)
    await broker.unregister(sid)
    return Response(status_code=204)


# ---------------------------------------------------------------- subscriptions


async def create_subscription(request: Request) -> Response:
    broker, sid = await owner(request)
    raw = await json_body(request, settings_of(request).limits.max_code_bytes + SMALL_BODY)
    kind, topics, predicates, function = parse_subscription_body(raw, broker.settings.limits)
    sub = await broker.subscribe(sid, kind, topics, predicates, function)
    return JSONResponse(sub.to_json(), status_code=201)


async def list_subscriptions(request: Request) -> Response:
    broker, sid = await owner(request)
    return JSONResponse({"subscriptions": [s.to_json() for s in await broker.subscriptions(sid)]})


async def get_subscription(request: Request) -> Response:
    broker, sid = await owner(request)
    sub = await broker.subscription(sid, request.path_params["subscription_id"])
    return JSONResponse(sub.to_json())


async def delete_subscription(request: Request) -> Response:
    broker, sid = await owner(request)
    await broker.unsubscribe(sid, request.path_params["subscription_id"])
    return Response(status_code=204)


async def resume_subscription(request: Request) -> Response:
    broker, sid = await owner(request)
    sub = await broker.resume(sid, request.path_params["subscription_id"])
    return JSONResponse(sub.to_json())


# ---------------------------------------------------------------- publishing


def publication_input(raw: Any, settings: Settings) -> PublicationInput:
    data, topics, attributes, ftypes = parse_publication_body(raw, settings.limits)
    return PublicationInput(data, topics, attributes, ftypes)


async def publish(request: Request) -> Response:
    settings = settings_of(request)
    raw = await json_body(request, settings.limits.max_publication_bytes)
    result = await broker_of(request).publish(publication_input(raw, settings))
    return JSONResponse(published_json(result), status_code=201)


async def publish_batch(request: Request) -> Response:
    settings = settings_of(request)
    limits = settings.limits
    raw = await json_body(request, limits.max_publication_bytes * 16)
    items = raw.get("publications") if isinstance(raw, dict) else None
    if not isinstance(items, list) or not items:
        raise invalid("publications", "expected a non-empty array of publications")
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
    return JSONResponse({"publications": [published_json(r) for r in results]}, status_code=201)


# ---------------------------------------------------------------- receiving


async def pull(request: Request) -> Response:
    broker, sid = await owner(request)
    q = broker.settings.queues
    max_n = int(query_number(request, "max", 10, 1, q.max_pull))
    wait = query_number(request, "wait", 0, 0, q.max_wait_s)
    visibility = query_number(request, "visibility", q.visibility_timeout_s, 0, 12 * 3600)
    messages = await broker.pull(sid, max_n, wait, visibility)
    return JSONResponse({"messages": [message_json(m) for m in messages]})


async def receipts_of(request: Request) -> tuple[list[str], dict[str, Any]]:
    raw = await json_body(request, 1024 * 1024)
    receipts = raw.get("receipts") if isinstance(raw, dict) else None
    if not isinstance(receipts, list) or not all(isinstance(r, str) for r in receipts):
        raise invalid("receipts", "expected an array of receipt strings")
    return receipts, raw


async def ack(request: Request) -> Response:
    broker, sid = await owner(request)
    receipts, _ = await receipts_of(request)
    return JSONResponse(ack_json(await broker.ack(sid, receipts)))


async def nack(request: Request) -> Response:
    broker, sid = await owner(request)
    receipts, raw = await receipts_of(request)
    delay = raw.get("delay", 0)
    if isinstance(delay, bool) or not isinstance(delay, int | float) or not 0 <= delay <= 43200:
        raise invalid("delay", "delay is a number of seconds from 0 to 43200")
    return JSONResponse(ack_json(await broker.nack(sid, receipts, float(delay))))


async def dead_letters(request: Request) -> Response:
    broker, sid = await owner(request)
    limit = int(query_number(request, "limit", 100, 1, 1000))
    return JSONResponse(
        {"dead_letters": [dead_json(d) for d in await broker.dead_letters(sid, limit)]}
    )


async def redrive(request: Request) -> Response:
    broker, sid = await owner(request)
    raw = await json_body(request, 1024 * 1024, allow_empty=True)
    ids = raw.get("ids") if isinstance(raw, dict) else None
    if ids is not None and (
        not isinstance(ids, list)
        or not all(isinstance(i, int) and not isinstance(i, bool) for i in ids)
    ):
        raise invalid("ids", "expected an array of dead-letter ids (integers)")
    return JSONResponse({"redriven": await broker.redrive(sid, ids)})


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
