"""A subscriber's subscriptions under /v1: by topics, by predicates on attributes, or by a
function; listing, reading, deleting, resuming a suspended one."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from tidings.api import answers
from tidings.api.answers import answer
from tidings.api.common import SMALL_BODY, owner, settings_of
from tidings.api.io import body_as, query_as
from tidings.api.operations import Operation, described
from tidings.model import parse_subscription_body
from tidings.wire import v1 as w

S = "/v1/subscribers/{subscriber_id}/subscriptions"


@described(Operation(w.Subscribe, answer=w.SubscriptionOut, status=201, token=True))
async def create_subscription(request: Request) -> Response:
    """Subscribe by topics, by predicates on attributes, or by a function."""
    broker, sid = await owner(request)
    limit = settings_of(request).limits.max_code_bytes + SMALL_BODY
    raw, _ = await body_as(request, w.SubscriptionBody, limit)
    kind, topics, predicates, function = parse_subscription_body(raw, broker.settings.limits)
    sub = await broker.subscribe(sid, kind, topics, predicates, function)
    return answer(answers.subscription(sub), 201)


@described(Operation(query=w.subscriptions_query, answer=w.Subscriptions, token=True))
async def list_subscriptions(request: Request) -> Response:
    """The subscriber's subscriptions in id order, a page at a time (`limit`, and `after`
    the previous page's `next`)."""
    broker, sid = await owner(request)
    q = query_as(request, w.SubscriptionsQuery)
    found = await broker.subscriptions(sid, q.after, q.limit)
    after = found[-1].id if len(found) == q.limit else None
    return answer(w.Subscriptions([answers.subscription(s) for s in found], after))


@described(Operation(answer=w.SubscriptionOut, token=True))
async def get_subscription(request: Request) -> Response:
    """One subscription."""
    broker, sid = await owner(request)
    sub = await broker.subscription(sid, request.path_params["subscription_id"])
    return answer(answers.subscription(sub))


@described(Operation(status=204, token=True))
async def delete_subscription(request: Request) -> Response:
    """Unsubscribe."""
    broker, sid = await owner(request)
    await broker.unsubscribe(sid, request.path_params["subscription_id"])
    return Response(status_code=204)


@described(Operation(answer=w.SubscriptionOut, token=True))
async def resume_subscription(request: Request) -> Response:
    """Resume a function subscription suspended after repeated failures (takes no body)."""
    broker, sid = await owner(request)
    sub = await broker.resume(sid, request.path_params["subscription_id"])
    return answer(answers.subscription(sub))


routes = [
    Route(S, create_subscription, methods=["POST"]),
    Route(S, list_subscriptions, methods=["GET"]),
    Route(f"{S}/{{subscription_id}}", get_subscription, methods=["GET"]),
    Route(f"{S}/{{subscription_id}}", delete_subscription, methods=["DELETE"]),
    Route(f"{S}/{{subscription_id}}/resume", resume_subscription, methods=["POST"]),
]
