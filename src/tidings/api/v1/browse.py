"""Looking into a subscriber's queue under /v1 without taking from it, and purging it: the
waiting messages a page at a time, leases and attempts untouched, and their deletion (the
leased ones stay with their holders; `tidings.store.browse`)."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from tidings.api.answers import answer
from tidings.api.common import owner
from tidings.api.io import query_as
from tidings.api.operations import Operation, described
from tidings.api.serve import listable
from tidings.store.base import QueuedMessage
from tidings.wire import v1 as w

Q = "/v1/subscribers/{subscriber_id}/queue"


def queued(m: QueuedMessage, now: float) -> w.QueuedOut:
    return w.QueuedOut(
        m.id,
        m.publication_id,
        list(m.subscription_ids),
        m.attempt,
        m.enqueued_at,
        round(max(0.0, now - m.enqueued_at), 3),
        m.ready_at,
        m.body,
    )


@described(Operation(query=w.browse_query, answer=w.Queued, token=True))
async def browse(request: Request) -> Response:
    """The queue's waiting messages (every one not leased right now) in FIFO order, with
    their attempts and age, a page at a time; nothing is leased and no attempt counted."""
    broker, sid = await owner(request)
    q = query_as(request, w.BrowseQuery)
    found = await broker.browse(sid, q.after, q.limit)
    now = broker.clock()
    page = listable(found, lambda m: queued(m, now))
    following = found[-1].id if found and found.more else None  # ended by count or bytes
    return answer({"messages": page, "next": following})


@described(Operation(answer=w.Purged, token=True))
async def purge(request: Request) -> Response:
    """Delete the queue's waiting messages; the ones leased right now stay
    with their holders, who may still acknowledge them, and wait again if they come back."""
    broker, sid = await owner(request)
    return answer(w.Purged(await broker.purge(sid)))


routes = [
    Route(f"{Q}/messages", browse, methods=["GET"]),
    Route(f"{Q}/messages", purge, methods=["DELETE"]),
]
