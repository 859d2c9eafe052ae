"""Subscribers under /v1: registering one, reading it (its queue's depth, its webhook) and
deleting it."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from tidings.api import answers
from tidings.api.answers import answer
from tidings.api.common import SMALL_BODY, broker_of, owner, public_base, webhooks_of
from tidings.api.io import SIMULATION_HEADER, bearer, body_as, scope_simulation
from tidings.api.operations import Operation, described
from tidings.wire import v1 as w

S = "/v1/subscribers/{subscriber_id}"


def queue_url(request: Request, subscriber_id: str) -> str:
    return f"{public_base(request)}/v1/subscribers/{subscriber_id}/messages"


@described(
    Operation(w.RegisterBody, False, answer=w.Registered, status=201, headers=(SIMULATION_HEADER,))
)
async def register(request: Request) -> Response:
    """Register a subscriber: its id, its bearer token (shown once) and its queue's URL."""
    _, body = await body_as(request, w.RegisterBody, SMALL_BODY, allow_empty=True)
    client = request.client.host if request.client else ""
    broker = broker_of(request)
    simulation = scope_simulation(request.scope)
    subscriber, token = await broker.register(body.ephemeral, client, bearer(request), simulation)
    return answer(w.Registered(subscriber.id, token, queue_url(request, subscriber.id)), 201)


@described(Operation(answer=w.SubscriberInfo, token=True))
async def subscriber_info(request: Request) -> Response:
    """The subscriber, its queue's depth and its webhook (or null)."""
    broker, sid = await owner(request)
    found, depth = await broker.subscriber(sid), await broker.depth(sid)
    hook = await webhooks_of(request).endpoint(sid)
    webhook = w.WebhookState(hook.url, hook.state, hook.reason) if hook else None
    info = w.SubscriberInfo(
        sid, found.created_at, queue_url(request, sid), answers.depth(depth), webhook
    )
    return answer(info)


@described(Operation(status=204, token=True))
async def unregister(request: Request) -> Response:
    """Delete the subscriber, its subscriptions, queue and dead letters."""
    broker, sid = await owner(request)
    await broker.unregister(sid)
    return Response(status_code=204)


routes = [
    Route("/v1/subscribers", register, methods=["POST"]),
    Route(S, subscriber_info, methods=["GET"]),
    Route(S, unregister, methods=["DELETE"]),
]
