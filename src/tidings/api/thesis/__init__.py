"""The thesis's API under /api, so its sample inputs work verbatim (plus a bearer token):
subscribers, subscriptions, publications, queues, and its function library served as URL
functions.

Differences from the native API, as the thesis states them: values arrive as strings and
compare as numbers where both sides parse as numbers; topic publishing sends one message
per (subscriber, matching topic); a content subscription's entries form one conjunction.
"""

from starlette.routing import BaseRoute

from tidings.api.thesis import functions, publications, queues, subscribers, subscriptions

routes: list[BaseRoute] = [
    *subscribers.routes,
    *subscriptions.routes,
    *publications.routes,
    *queues.routes,
    *functions.routes,
]
