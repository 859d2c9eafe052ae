"""Registering and unregistering subscribers under the thesis's /api."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from tidings.api.answers import answer
from tidings.api.common import broker_of
from tidings.api.io import bearer
from tidings.api.operations import Operation, described
from tidings.api.thesis.common import owned, queue_url
from tidings.errors import invalid
from tidings.wire import thesis as w


@described(Operation(answer=w.CompatRegistered))
async def register_subscriber(request: Request) -> Response:
    """Register a subscriber (takes no body): its id, queue and token."""
    client = request.client.host if request.client else ""
    subscriber, token = await broker_of(request).register(client=client, key=bearer(request))
    url = queue_url(request, subscriber.id)
    connection = f"Endpoint={url};Token={token}"
    return answer(w.CompatRegistered(subscriber.id, subscriber.id, url, connection, token))


@described(Operation(w.UnregisterBody, answer=w.CompatUnregistered, token=True))
async def unregister_subscriber(request: Request) -> Response:
    """Unregister a subscriber."""
    broker, sid, raw = await owned(request, w.UnregisterBody)
    queue = raw.get("queueUrl")
    if queue is not None and queue not in (sid, queue_url(request, sid)):
        raise invalid("queueUrl", "this is not the subscriber's queue")
    await broker.unregister(sid)
    return answer(w.CompatUnregistered(sid, True))


routes = [
    Route("/api/RegisterSubscriber", register_subscriber, methods=["POST"]),
    Route("/api/UnregisterSubscriber", unregister_subscriber, methods=["POST"]),
]
