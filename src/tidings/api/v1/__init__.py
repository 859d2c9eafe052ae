"""The native API under /v1 (docs/api.md), a module per resource: subscribers, their
subscriptions, publications, queues (pulls, acknowledgements, dead letters), the push
stream, webhooks, and the admin calls."""

from starlette.routing import BaseRoute

from tidings.api.v1 import (
    admin,
    publications,
    queues,
    stream,
    subscribers,
    subscriptions,
    webhooks,
)

routes: list[BaseRoute] = [
    *subscribers.routes,
    *subscriptions.routes,
    *publications.routes,
    *queues.routes,
    *stream.routes,
    *webhooks.routes,
    *admin.routes,
]
