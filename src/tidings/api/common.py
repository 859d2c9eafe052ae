"""What every API's handlers share: the broker and the webhooks behind the app, the body
limits, and the subscriber a bearer token proves."""

from __future__ import annotations

from starlette.requests import HTTPConnection

from tidings.api.io import base_url, bearer
from tidings.broker import Broker
from tidings.config import Settings
from tidings.delivery.webhooks import Webhooks

SMALL_BODY = 64 * 1024
RECEIPTS_BODY = 1024 * 1024


def broker_of(request: HTTPConnection) -> Broker:
    broker: Broker = request.app.state.broker
    return broker


def settings_of(request: HTTPConnection) -> Settings:
    return broker_of(request).settings


def webhooks_of(request: HTTPConnection) -> Webhooks:
    webhooks: Webhooks = request.app.state.webhooks
    return webhooks


async def owner(request: HTTPConnection) -> tuple[Broker, str]:
    """The broker and the path's subscriber id, once the bearer token proves ownership."""
    broker, sid = broker_of(request), request.path_params["subscriber_id"]
    await broker.authenticate(sid, bearer(request))
    return broker, sid


def public_base(request: HTTPConnection) -> str:
    """The broker's URL as its clients reach it (the `public_url` setting, if set)."""
    return base_url(request, settings_of(request).public_url)
