"""The MultiPub controller (section III-A.4-5): collect, solve, deploy.

Every interval it takes each region manager's counts, merges them per topic (a publisher is
counted at one region; subscribers are wherever they announced themselves), builds the
topic's instance over the known latencies `L` and `LR`, solves it, and when the answer
differs from the deployed configuration publishes the new one, with a higher version, on
`placement/config` at every region: region managers and clients hear it on their streams.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from tidings.client.asyncio import AsyncClient
from tidings.client.multiregion import CONFIG_TOPIC, Placement
from tidings.placement.model import Choice, Floats, Instance
from tidings.placement.regions import RegionManager, TopicCounts
from tidings.placement.solver import solve


@dataclass(frozen=True, slots=True)
class Constraint:
    ratio: float
    max_ms: float


@dataclass
class Controller:
    """Solves every topic the region managers saw; `step()` once per observation interval."""

    managers: Sequence[RegionManager]
    L: Floats
    LR: Floats
    alpha: Floats
    beta: Floats
    constraints: dict[str, Constraint]
    deployed: dict[str, Placement] = field(default_factory=dict)
    history: list[tuple[str, Choice]] = field(default_factory=list)

    async def step(self) -> dict[str, Choice]:
        merged = _merge([m.counts() for m in self.managers])
        answers: dict[str, Choice] = {}
        for topic, (publishers, subscribers) in merged.items():
            constraint = self.constraints.get(topic)
            if constraint is None or not publishers or not subscribers:
                continue
            choice = solve(self.instance(publishers, subscribers, constraint))
            answers[topic] = choice
            self.history.append((topic, choice))
            await self._deploy(topic, choice)
        return answers

    def instance(
        self, publishers: dict[int, list[float]], subscribers: set[int], constraint: Constraint
    ) -> Instance:
        known = range(len(self.L))  # a client without latencies cannot be placed: left out
        clients = sorted(c for c in publishers if c in known)
        return Instance(
            self.L, self.LR, self.alpha, self.beta,
            np.array(clients, dtype=np.int64),
            tuple(np.array(publishers[c], dtype=np.float64) for c in clients),
            np.array(sorted(c for c in subscribers if c in known), dtype=np.int64),
            constraint.ratio, constraint.max_ms,
        )  # fmt: skip

    async def _deploy(self, topic: str, choice: Choice) -> None:
        c = choice.evaluation.configuration
        current = self.deployed.get(topic)
        if current is not None and (current.regions, current.mode) == (c.regions, c.mode.value):
            return
        version = current.version + 1 if current is not None else 1
        self.deployed[topic] = Placement(version, c.regions, c.mode.value)
        await self.announce(topic)

    async def announce(self, topic: str) -> None:
        """Publish the topic's deployed configuration at every region."""
        placement = self.deployed[topic]
        for manager in self.managers:
            async with AsyncClient(manager.url) as region:
                await region.publish(
                    placement.to_json(), topics=[CONFIG_TOPIC], attributes={"topic": topic}
                )


def _merge(
    counts: Sequence[dict[str, TopicCounts]],
) -> dict[str, tuple[dict[int, list[float]], set[int]]]:
    merged: dict[str, tuple[dict[int, list[float]], set[int]]] = {}
    for per_region in counts:
        for topic, c in per_region.items():
            publishers, subscribers = merged.setdefault(topic, ({}, set()))
            for client, sizes in c.publishers.items():
                publishers.setdefault(client, []).extend(sizes)
            subscribers.update(c.subscribers)
    return merged
