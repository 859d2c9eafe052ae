"""The thesis's queues under /api: reading (leasing) messages in its message shape, and
acknowledging them."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from tidings.api import answers
from tidings.api.answers import answer
from tidings.api.common import RECEIPTS_BODY, broker_of
from tidings.api.io import bearer, body_as, query_as
from tidings.api.operations import Operation, described
from tidings.api.serve import servable
from tidings.delivery.frames import batch_bytes
from tidings.model import check_receipts
from tidings.store.base import Message
from tidings.wire import thesis as w
from tidings.wire.base import AckBody, Settled


def compat_message(m: Message) -> w.CompatMessage:
    pub = m.body if isinstance(m.body, dict) else {}
    attrs = pub.get("attributes") or {}
    inner = w.CompatBody(
        message=pub.get("data"),
        publicationId=m.publication_id,
        topic=pub.get("matched_topic"),
        topics=pub.get("topics", []),
        content=[{"key": k, "value": v} for k, v in attrs.items()],
        subscriptionTopics=pub.get("function_types", []),
        subscriptionIds=list(m.subscription_ids),
    )
    return w.CompatMessage(m.id, m.receipt, m.attempt, inner)


@described(Operation(query=w.compat_pull_query, answer=w.CompatMessages, token=True))
async def read_queue(request: Request) -> Response:
    """Lease up to `max` messages of the queue, waiting up to `wait` seconds."""
    broker, sid = broker_of(request), request.path_params["subscriber_id"]
    await broker.authenticate(sid, bearer(request))
    q = query_as(request, w.compat_pull_query(broker.settings.queues))
    messages = await broker.pull(sid, q.max, q.wait, max_bytes=batch_bytes(None))
    served = await servable(broker, sid, messages, compat_message)
    return answer({"messages": list(served.values())})


@described(Operation(AckBody, answer=Settled, token=True))
async def ack_queue(request: Request) -> Response:
    """Acknowledge (delete) leased messages by their receipts."""
    broker, sid = broker_of(request), request.path_params["subscriber_id"]
    await broker.authenticate(sid, bearer(request))
    _, raw = await body_as(request, AckBody, RECEIPTS_BODY)
    result = await broker.ack(sid, check_receipts(raw.receipts))
    return answer(answers.settled(result))


routes = [
    Route("/api/queues/{subscriber_id}", read_queue, methods=["GET"]),
    Route("/api/queues/{subscriber_id}/ack", ack_queue, methods=["POST"]),
]
