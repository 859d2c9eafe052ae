"""The placement's state, as the MultiPub controller publishes it on `placement/state` and
the broker answers it at `GET /v1/admin/placement` (docs/placement.md, docs/console.md).

The controller writes it; the broker only checks it against these bounds before keeping the
last one: anyone allowed to publish on the topic can write it (docs/placement.md says how
an operator keeps that to the controller's key).
"""

from __future__ import annotations

from typing import Annotated, Literal

from msgspec import Meta, Struct

STATE_TOPIC = "placement/state"
MAX_REGIONS = 16  # as the controller's world file (placement/files.py)
MAX_TOPICS = 200  # named in one state at most; the controller says how many it left out
MAX_STATE_BYTES = 128 * 1024  # a state's JSON, at most: the broker ignores a larger one

RegionName = Annotated[str, Meta(min_length=1, max_length=64)]
Count = Annotated[int, Meta(ge=0)]
Regions = Annotated[list[RegionName], Meta(min_length=1, max_length=MAX_REGIONS)]


class RegionClients(Struct, forbid_unknown_fields=True):
    """One topic's clients homed at one region: the publishers counted there in the last
    interval, and the subscribers that announced themselves there."""

    region: RegionName
    publishers: Count
    subscribers: Count


class Decision(Struct, forbid_unknown_fields=True):
    """Why the topic is where it is: the constraint ("`ratio` % of deliveries within
    `max_ms`"), the objective the choice followed (`cost`: the cheapest configuration that
    meets the constraint; `latency`: none meets it, so the lowest percentile), and how the
    chosen configuration scored when it was decided (`at`, seconds since the epoch)."""

    at: float
    objective: Literal["cost", "latency"]
    ratio: Annotated[float, Meta(gt=0, le=100)]
    max_ms: Annotated[float, Meta(ge=0)]
    percentile_ms: Annotated[float, Meta(ge=0)]
    cost: Annotated[float, Meta(ge=0)]
    meets: bool


class TopicPlacement(Struct, forbid_unknown_fields=True):
    """Where one topic is served: its regions by name, the mode, the configuration's
    version, its clients per region; `decision` is null for a configuration the controller
    was given rather than solved."""

    topic: Annotated[str, Meta(min_length=1, max_length=255)]
    version: Annotated[int, Meta(ge=1)]
    regions: Regions
    mode: Literal["direct", "routed"]
    clients: Annotated[list[RegionClients], Meta(max_length=MAX_REGIONS)]
    decision: Decision | None = None


class PlacementState(Struct, forbid_unknown_fields=True):
    """The controller's whole state at `at`: the world's regions in its order, and every
    topic it places (at most `MAX_TOPICS`; `omitted` more left out)."""

    at: float
    interval_s: Annotated[float, Meta(gt=0)]
    regions: Regions
    topics: Annotated[list[TopicPlacement], Meta(max_length=MAX_TOPICS)]
    omitted: Count = 0


class PlacementSeen(Struct):
    """`GET /v1/admin/placement`: the last state this broker routed on `placement/state`,
    when it came (`received_at`) in which publication; and how many publications on the
    topic it ignored since it started (too large or not a state), with the last reason."""

    state: PlacementState
    received_at: float
    publication_id: str
    ignored: int
    last_ignored: str | None
