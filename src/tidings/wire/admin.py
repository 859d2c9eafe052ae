"""The admin calls' shapes (/v1/admin): the overview, subscribers, simulations and the
elastic cluster's scaling."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from msgspec import Meta, Struct

from tidings.config import QueueSettings
from tidings.wire.base import Body
from tidings.wire.v1 import Depth


class SuspendedFunction(Struct):
    id: str
    subscriber_id: str
    function_type: str | None
    reason: str | None


class Overview(Struct):
    subscribers: int
    subscriptions: dict[str, int]
    queues: Depth
    oldest_message_age_s: float
    suspended: list[SuspendedFunction]
    counters: dict[str, float]
    settings: dict[str, Any]
    versions: dict[str, str]
    machine: dict[str, Any]


class SubscribersQuery(Struct):
    limit: Annotated[int, Meta(ge=1, le=1000, description="at most this many")] = 100
    after: Annotated[str, Meta(description="the last id of the previous page")] = ""
    origin: Annotated[
        Literal["all", "real", "simulated"],
        Meta(description="every subscriber, or only real ones, or only a simulator's"),
    ] = "all"


def subscribers_query(q: QueueSettings) -> type[SubscribersQuery]:
    return SubscribersQuery


class SubscriberRecord(Struct):
    id: str
    created_at: float
    last_seen: float
    ephemeral: bool
    depth: Depth
    simulation: str | None = None  # the simulation that made it (Tidings-Simulation)


class SubscribersPage(Struct):
    subscribers: list[SubscriberRecord]
    next: str | None


class SimulationBody(Body):
    config: Annotated[
        dict[str, Any], Meta(description="a simulator configuration, native or the thesis's")
    ]


class SimulationProgress(Struct):
    phase: str
    published: int
    planned: int
    delivered: int
    delivered_per_s: float
    p50_ms: float | None
    p99_ms: float | None
    at: float


class Simulation(Struct):
    id: str
    status: Literal["running", "done", "failed"]
    progress: SimulationProgress | None
    summary: dict[str, Any] | None
    error: str | None


class ClusterScaleBody(Body):
    matchers: int | None = None
    exit_points: int | None = None


class TopicTraffic(Struct):
    topic: str
    publications: int
    deliveries: int
    publications_per_s: float
    deliveries_per_s: float


class OtherTraffic(Struct):
    publications: int
    deliveries: int
    publications_per_s: float
    deliveries_per_s: float


class Topics(Struct):
    """The busiest topics by recent traffic (at most `max_topics`), and the rest summed."""

    topics: list[TopicTraffic]
    other: OtherTraffic
    max_topics: int
    window_s: float
