"""The MultiPub controller (section III-A.4-5): collect, solve, deploy.

Every interval it takes each region manager's counts, merges them per topic (a publisher is
counted at one region; subscribers are wherever they announced themselves), builds the
topic's instance over the known latencies `L` and `LR`, solves it, and when the answer
differs from the deployed configuration publishes the new one, with a higher version, on
`placement/config` at every region: region managers and clients hear it on their streams.

It also publishes its state, with the world's region names, on `placement/state` at every
region whenever it changes (and every `REPUBLISH_STEPS` intervals, for a broker that
restarted meanwhile): each topic's regions, mode and clients per region, and the decision
that put it there (`placement/state.py`); the brokers show it (`GET /v1/admin/placement`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import msgspec
import numpy as np

from tidings.client.asyncio import AsyncClient
from tidings.client.multiregion import CONFIG_TOPIC, Placement
from tidings.client.types import TidingsClientError
from tidings.placement import state
from tidings.placement.model import Choice, Floats, Instance
from tidings.placement.regions import RegionManager, TopicCounts
from tidings.placement.solver import solve
from tidings.wire.placement import STATE_TOPIC

log = logging.getLogger("tidings.placement")
REPUBLISH_STEPS = 30  # an unchanged state is published again after this many intervals


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
    names: Sequence[str]  # the regions' names, in the order of the managers and L's columns
    interval_s: float = 10.0  # how often `step` runs (said in the state)
    key: str | None = None  # a publisher key, where the brokers require one (placement/)
    deployed: dict[str, Placement] = field(default_factory=dict)
    decided: dict[str, state.Decided] = field(default_factory=dict)
    history: list[tuple[str, Choice]] = field(default_factory=list)
    _shown: dict[str, Any] | None = field(default=None, init=False, repr=False)
    _unchanged: int = field(default=0, init=False, repr=False)  # intervals since

    def __post_init__(self) -> None:
        if len(self.names) != len(self.managers):
            raise ValueError("one region name per region manager, in their order")

    async def step(self) -> dict[str, Choice]:
        counts = [m.counts() for m in self.managers]
        answers: dict[str, Choice] = {}
        for topic, (publishers, subscribers) in _merge(counts).items():
            constraint = self.constraints.get(topic)
            if constraint is None or not publishers or not subscribers:
                continue
            choice = solve(self.instance(publishers, subscribers, constraint))
            answers[topic] = choice
            self.history.append((topic, choice))
            await self._deploy(topic, choice, constraint)
        await self.show(counts)
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

    async def _deploy(self, topic: str, choice: Choice, constraint: Constraint) -> None:
        c = choice.evaluation.configuration
        current = self.deployed.get(topic)
        if current is not None and (current.regions, current.mode) == (c.regions, c.mode.value):
            return
        version = current.version + 1 if current is not None else 1
        self.deployed[topic] = Placement(version, c.regions, c.mode.value)
        self.decided[topic] = state.Decided(
            choice, constraint.ratio, constraint.max_ms, time.time()
        )
        await self.announce(topic)

    async def announce(self, topic: str) -> None:
        """Publish the topic's deployed configuration at every region."""
        placement = self.deployed[topic]
        for manager in self.managers:
            async with AsyncClient(manager.url, key=self.key) as region:
                await region.publish(
                    placement.to_json(), topics=[CONFIG_TOPIC], attributes={"topic": topic}
                )

    async def show(self, counts: Sequence[Mapping[str, TopicCounts]]) -> None:
        """Publish the state at every region when it changed, or has not been published for
        `REPUBLISH_STEPS` intervals; a region that refuses it gets it again next time."""
        now = state.build(
            self.names, self.deployed, self.decided, counts, self.interval_s, time.time()
        )
        unchanging = state.unchanging(now)
        self._unchanged += 1  # intervals since the state last published
        if unchanging == self._shown and self._unchanged < REPUBLISH_STEPS:
            return
        body = msgspec.to_builtins(now)
        refused = 0
        for manager in self.managers:
            async with AsyncClient(manager.url, key=self.key) as region:
                try:
                    await region.publish(body, topics=[STATE_TOPIC])
                except TidingsClientError as exc:
                    refused += 1
                    log.warning("placement state not published at %s: %s", manager.url, exc)
        if not refused:
            self._shown, self._unchanged = unchanging, 0


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
