"""The controller's state as the brokers show it (`placement/state`, `tidings.wire.placement`):
every topic it places with its regions by name, the mode, the clients per region, and the
decision that put it there. Pure: built from what the controller holds."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

import msgspec

from tidings.client.multiregion import Placement
from tidings.placement.model import Choice
from tidings.placement.regions import TopicCounts
from tidings.wire.placement import (
    MAX_STATE_BYTES,
    MAX_TOPICS,
    Decision,
    PlacementState,
    RegionClients,
    TopicPlacement,
)


@dataclass(frozen=True, slots=True)
class Decided:
    """A topic's configuration as the controller chose it: the choice, under which
    constraint (ratio %, max ms), and when (seconds since the epoch)."""

    choice: Choice
    ratio: float
    max_ms: float
    at: float

    def to_wire(self) -> Decision:
        e = self.choice.evaluation
        objective: Literal["cost", "latency"] = "cost" if e.meets else "latency"  # choose's rules
        return Decision(
            self.at, objective, self.ratio, self.max_ms, e.percentile_ms, e.cost, e.meets
        )


def build(
    names: Sequence[str],
    deployed: Mapping[str, Placement],
    decided: Mapping[str, Decided],
    counts: Sequence[Mapping[str, TopicCounts]],
    interval_s: float,
    at: float,
) -> PlacementState:
    """The state at `at`: topics by name, at most `MAX_TOPICS` and `MAX_STATE_BYTES` in all
    (the rest counted in `omitted`); `counts` are the region managers' of the last interval,
    in the order of `names`."""
    topics = [
        _topic(names, topic, deployed[topic], decided.get(topic), counts)
        for topic in sorted(deployed)[:MAX_TOPICS]
    ]
    state = PlacementState(at, interval_s, list(names), topics, len(deployed) - len(topics))
    while len(encoded(state)) > MAX_STATE_BYTES and state.topics:
        state.topics.pop()
        state.omitted += 1
    return state


def encoded(state: PlacementState) -> bytes:
    return msgspec.json.encode(state)


def unchanging(state: PlacementState) -> dict[str, object]:
    """The state without its time: two states equal here say the same thing."""
    out: dict[str, object] = msgspec.to_builtins(state)
    del out["at"]
    return out


def _topic(
    names: Sequence[str],
    topic: str,
    placement: Placement,
    decided: Decided | None,
    counts: Sequence[Mapping[str, TopicCounts]],
) -> TopicPlacement:
    clients = []
    for name, per_topic in zip(names, counts, strict=True):
        seen = per_topic.get(topic)
        if seen is not None and (seen.publishers or seen.subscribers):
            clients.append(RegionClients(name, len(seen.publishers), len(seen.subscribers)))
    return TopicPlacement(
        topic,
        placement.version,
        [names[r] for r in placement.regions],
        "routed" if placement.mode == "routed" else "direct",
        clients,
        decided.to_wire() if decided is not None else None,
    )
