"""A subscriber's webhook under /v1 (docs/api.md, Webhooks): set it, read it (with its
secret, for its own token's holder), delete it, resume it after a pause. The pushing itself
is `tidings.delivery.webhooks`."""

from __future__ import annotations

from collections.abc import Sequence

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from tidings.addresses import Network, Own, deny_list, url_problem
from tidings.api import answers
from tidings.api.answers import answer
from tidings.api.common import SMALL_BODY, owner, webhooks_of
from tidings.api.io import body_as
from tidings.api.operations import Operation, described
from tidings.delivery.webhooks import no_webhook
from tidings.errors import invalid
from tidings.store.base import Endpoint
from tidings.wire import v1 as w

ALLOW_SETTING = "webhooks.allow_networks"


def endpoint_url(url: str, deny: Sequence[Network] = (), own: Own | None = None) -> str:
    """The URL, or 422 naming `url` with what is wrong with it (`addresses.url_problem`)."""
    problem = url_problem(url, deny, own, ALLOW_SETTING)
    if problem is not None:
        raise invalid("url", problem)
    return url


@described(Operation(w.WebhookBody, answer=w.Webhook, token=True))
async def set_webhook(request: Request) -> Response:
    """Push the subscriber's messages to an HTTP endpoint, retrying each for `retention_s`;
    a new URL resumes delivery."""
    _, sid = await owner(request)
    _, body = await body_as(request, w.WebhookBody, SMALL_BODY)
    webhooks = webhooks_of(request)
    settings = webhooks.settings
    deny = deny_list(
        settings.deny_networks, settings.deny_default_networks, settings.allow_networks
    )
    most = webhooks.outlet.retention_s
    if body.retention_s is not None and body.retention_s > most:
        raise invalid("retention_s", f"at most the queues' retention, {most:g} s")
    own = webhooks.outlet.own
    endpoint = await webhooks.configure(sid, endpoint_url(body.url, deny, own), body.retention_s)
    return answer(_webhook(request, endpoint))


@described(Operation(answer=w.Webhook, token=True))
async def get_webhook(request: Request) -> Response:
    """The subscriber's webhook: its URL, state, failures and secret."""
    _, sid = await owner(request)
    endpoint = await webhooks_of(request).endpoint(sid)
    if endpoint is None:
        raise no_webhook(sid)
    return answer(_webhook(request, endpoint))


@described(Operation(status=204, token=True))
async def delete_webhook(request: Request) -> Response:
    """Stop pushing; the messages stay in the queue, for pulls or a stream."""
    _, sid = await owner(request)
    await webhooks_of(request).remove(sid)
    return Response(status_code=204)


@described(Operation(answer=w.Webhook, token=True))
async def resume_webhook(request: Request) -> Response:
    """Resume a webhook paused after repeated failures at once (takes no body); a paused
    webhook also resumes by itself once a probe succeeds."""
    _, sid = await owner(request)
    return answer(_webhook(request, await webhooks_of(request).resume(sid)))


def _webhook(request: Request, endpoint: Endpoint) -> w.Webhook:
    return answers.webhook(endpoint, webhooks_of(request).outlet.retention_of(endpoint))


W = "/v1/subscribers/{subscriber_id}/webhook"
routes = [
    Route(W, set_webhook, methods=["PUT"]),
    Route(W, get_webhook, methods=["GET"]),
    Route(W, delete_webhook, methods=["DELETE"]),
    Route(f"{W}/resume", resume_webhook, methods=["POST"]),
]
