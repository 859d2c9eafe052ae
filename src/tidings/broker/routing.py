"""Where topic and content deliveries are matched and enqueued: the matching mode behind one
seam, so the broker never asks which mode it runs in.

- `LocalRouting` (`matching = "local"`): the in-process `Matcher` matches each batch of
  publications, and their deliveries are enqueued in one group commit.
- `ElasticRouting` (`"elastic"`): E-SilboPS's operators match (`tidings.elastic`); their exit
  points enqueue and tell the broker what they enqueued.
- `SparkRouting` (`"spark"`): nothing is matched here; the pipeline's job reads the
  publication log and enqueues (`tidings.pipeline`). Functions run there too.
The thesis's per-topic publishing is served by the local index in the first two modes.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Protocol

from tidings.broker.index import SubscriptionIndex
from tidings.broker.telemetry import Telemetry
from tidings.config import Settings
from tidings.model import Publication, Subscription, SubscriptionKind
from tidings.store.base import Fanout, encode_body

if TYPE_CHECKING:
    from tidings.elastic.hosting.seam import ElasticMatching

Enqueued = Callable[[Sequence[Fanout]], None]  # told what was enqueued, wherever
Deliver = Callable[[list[Fanout]], Awaitable[None]]  # enqueue fan-outs in one commit, then tell


class Routing(Protocol):
    runs_functions: bool  # function subscriptions are evaluated by this broker

    async def start(self, enqueued: Enqueued) -> None: ...
    async def close(self) -> None: ...
    def loaded(self, subscriptions: Iterable[Subscription]) -> None:
        """The store's subscriptions, read anew (a start, or another broker changed them)."""
        ...

    def added(self, sub: Subscription) -> None: ...
    def removed(self, subscription_id: str, kind: SubscriptionKind | None) -> None: ...
    async def route(self, pubs: list[Publication]) -> list[int]:
        """Enqueue the publications' topic and content deliveries; how many each had."""
        ...

    async def route_per_topic(self, pub: Publication) -> int:
        """The thesis's topic publishing: one message per (subscriber, matching topic)."""
        ...


class Unmoved:
    """The life cycle of a routing that holds nothing of its own to start, stop or keep in
    line with the subscriptions (its index is the broker's)."""

    async def start(self, enqueued: Enqueued) -> None:
        pass

    async def close(self) -> None:
        pass

    def loaded(self, subscriptions: Iterable[Subscription]) -> None:
        pass

    def added(self, sub: Subscription) -> None:
        pass

    def removed(self, subscription_id: str, kind: SubscriptionKind | None) -> None:
        pass


class LocalRouting(Unmoved):
    runs_functions = True

    def __init__(self, index: SubscriptionIndex, telemetry: Telemetry, deliver: Deliver) -> None:
        self.index, self.telemetry, self.deliver = index, telemetry, deliver

    async def route(self, pubs: list[Publication]) -> list[int]:
        started = time.perf_counter()
        answers = await match_yielding(self.index, pubs)
        if len(self.index.matcher):
            self.telemetry.matched(len(pubs), time.perf_counter() - started)
        fanouts = [_fanout(p, m) for p, m in zip(pubs, answers, strict=True)]
        await self.deliver([f for f in fanouts if f.owners])
        return [len(f.owners) for f in fanouts]

    async def route_per_topic(self, pub: Publication) -> int:
        return await _per_topic(self.index, self.telemetry, self.deliver, pub)


class ElasticRouting:
    runs_functions = True

    def __init__(
        self,
        elastic: ElasticMatching,
        index: SubscriptionIndex,
        telemetry: Telemetry,
        deliver: Deliver,
    ) -> None:
        self.elastic, self.index, self.telemetry, self.deliver = elastic, index, telemetry, deliver

    async def start(self, enqueued: Enqueued) -> None:
        await self.elastic.start(enqueued)

    async def close(self) -> None:
        await self.elastic.close()

    def loaded(self, subscriptions: Iterable[Subscription]) -> None:
        self.elastic.load(s for s in subscriptions if s.kind in ("topic", "content"))

    def added(self, sub: Subscription) -> None:
        if sub.kind in ("topic", "content"):
            self.elastic.subscribe(sub)

    def removed(self, subscription_id: str, kind: SubscriptionKind | None) -> None:
        if kind in ("topic", "content"):
            self.elastic.unsubscribe(subscription_id)

    async def route(self, pubs: list[Publication]) -> list[int]:
        """The exit points enqueue (and tell `enqueued`); answered once they have."""
        return await self.elastic.publish(pubs)

    async def route_per_topic(self, pub: Publication) -> int:
        return await _per_topic(self.index, self.telemetry, self.deliver, pub)


class SparkRouting(Unmoved):
    runs_functions = False

    async def route(self, pubs: list[Publication]) -> list[int]:
        return [0] * len(pubs)

    async def route_per_topic(self, pub: Publication) -> int:
        return 0


def routing_for(
    settings: Settings,
    index: SubscriptionIndex,
    telemetry: Telemetry,
    deliver: Deliver,
    elastic: ElasticMatching | None,
) -> Routing:
    """The routing of the configured matching mode."""
    if settings.matching == "spark":
        return SparkRouting()
    if settings.matching == "elastic" and elastic is not None:
        return ElasticRouting(elastic, index, telemetry, deliver)
    return LocalRouting(index, telemetry, deliver)


# Matching runs on the event loop: a batch is matched a chunk of publications at a time, the
# loop free between chunks, the chunk sized so that one takes about `SLICE_S` (doubled while
# under a quarter of it, halved while over). A change to the subscriptions may land between
# two chunks: the later publications are matched as if they had come after it.
SLICE_S = 0.01
FIRST_CHUNK, MAX_CHUNK = 8, 1024


async def match_yielding(
    index: SubscriptionIndex, pubs: Sequence[Publication]
) -> list[dict[str, list[str]]]:
    """`index.match_batch(pubs)`, letting the event loop run every ~`SLICE_S` of matching."""
    answers: list[dict[str, list[str]]] = []
    chunk, start = FIRST_CHUNK, 0
    while start < len(pubs):
        began = time.perf_counter()
        answers += index.match_batch(pubs[start : start + chunk])
        start += chunk
        took = time.perf_counter() - began
        if start < len(pubs):
            await asyncio.sleep(0)
        if took < SLICE_S / 4:
            chunk = min(2 * chunk, MAX_CHUNK)
        elif took > SLICE_S:
            chunk = max(chunk // 2, 1)
    return answers


def _fanout(pub: Publication, matches: dict[str, list[str]]) -> Fanout:
    """A publication's deliveries: the matcher's answer as it is, the body encoded once (no
    object per delivery: the store makes the rows)."""
    body = encode_body(pub.to_wire()) if matches else b""
    return Fanout(pub.id, pub.id, body, pub.published_at, matches)


async def _per_topic(
    index: SubscriptionIndex, telemetry: Telemetry, deliver: Deliver, pub: Publication
) -> int:
    started = time.perf_counter()
    fanouts = index.per_topic(pub)
    if pub.topics:
        telemetry.matched(len(pub.topics), time.perf_counter() - started)
    await deliver(fanouts)
    return sum(len(f.owners) for f in fanouts)
