"""The native API under /v1 (docs/api.md), a module per resource: subscribers, their
subscriptions, publications, queues (pulls, acknowledgements, dead letters), browsing and
purging a queue, the push stream, webhooks, the function library, and the admin calls (the
topics' traffic and the placement among them)."""

from starlette.routing import BaseRoute

from tidings.api.v1 import (
    admin,
    browse,
    functions,
    placement,
    publications,
    queues,
    stream,
    subscribers,
    subscriptions,
    topics,
    webhooks,
)

routes: list[BaseRoute] = [
    *subscribers.routes,
    *subscriptions.routes,
    *publications.routes,
    *queues.routes,
    *browse.routes,
    *functions.routes,
    *stream.routes,
    *webhooks.routes,
    *admin.routes,
    *topics.routes,
    *placement.routes,
]
