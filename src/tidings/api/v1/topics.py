"""The topics under /v1/admin: those this broker has seen published to, each with its
publications and the deliveries they made, in counts and rates (`tidings.broker.traffic`)."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from tidings.api.answers import answer
from tidings.api.operations import Operation, described
from tidings.api.v1.admin import admin
from tidings.broker.traffic import WINDOW_S, Traffic
from tidings.wire import admin as w

PRECISION = 3  # rates in msg/s, to the thousandth


def _rate(value: float) -> float:
    return round(value, PRECISION)


def _other(traffic: Traffic) -> w.OtherTraffic:
    return w.OtherTraffic(
        traffic.publications,
        traffic.deliveries,
        _rate(traffic.publications_per_s),
        _rate(traffic.deliveries_per_s),
    )


@described(Operation(answer=w.Topics, token=True))
async def topics(request: Request) -> Response:
    """The topics seen since the broker started, busiest first: publications and their
    deliveries, counted and per second over the last seconds; past `max_topics`, the
    least busy are summed as `other`."""
    broker = admin(request)
    traffic = broker.telemetry.topics
    shown, other = traffic.snapshot()
    rows = [
        w.TopicTraffic(
            topic,
            t.publications,
            t.deliveries,
            _rate(t.publications_per_s),
            _rate(t.deliveries_per_s),
        )
        for topic, t in shown
    ]
    return answer(w.Topics(rows, _other(other), traffic.keep, WINDOW_S))


routes = [Route("/v1/admin/topics", topics, methods=["GET"])]
