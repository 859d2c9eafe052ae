"""A region manager: beside one region's broker, it counts and it forwards (section III-A.3).

It subscribes to everything (`#`) at its broker. Per topic and observation interval it counts
each publisher's messages and their bytes (publications marked `placement_count`, so a direct
publication sent to several regions is counted once, at the publisher's home), and it keeps
the topic's subscribers from their presence announcements. In routed mode it forwards the
publications its publishers send it to the other selected regions, over its links to them.
"""

from __future__ import annotations

import asyncio
import logging
from collections import defaultdict
from dataclasses import dataclass
from typing import Any

import orjson

from tidings.client.asyncio import AsyncClient, AsyncSubscriberHandle, Stream
from tidings.client.multiregion import CONFIG_TOPIC, PRESENCE_TOPIC, Placement, retrying_batch
from tidings.client.types import Message, TidingsClientError, publication_body

log = logging.getLogger("tidings.placement")
FORWARD_BATCH = 500  # forwards in one request at most (the broker takes 1,000 by default)


@dataclass(frozen=True, slots=True)
class TopicCounts:
    """One topic at one region over one interval."""

    publishers: dict[int, list[float]]  # client -> sizes of the messages it sent here
    subscribers: frozenset[int]


class RegionManager:
    """`manager = RegionManager(0, url, links); await manager.start()`; `counts()` per interval."""

    def __init__(self, region: int, url: str, links: dict[int, str]) -> None:
        self.region = region
        self.url = url  # this region's broker, co-located (no delay)
        self.links = {r: AsyncClient(u) for r, u in links.items()}  # to the other regions
        self.placements: dict[str, Placement] = {}
        self.forwarded = 0
        self._sizes: dict[str, dict[int, list[float]]] = defaultdict(lambda: defaultdict(list))
        self._subscribers: dict[str, set[int]] = defaultdict(set)
        self._client = AsyncClient(url)
        self._handle: AsyncSubscriberHandle | None = None
        self._task: asyncio.Task[None] | None = None
        # per region: its forwards in the order they came, sent by one task (a task per
        # forward let a later one overtake an earlier one: a publisher's order was lost)
        self._outboxes: dict[int, asyncio.Queue[_Forward]] = {}
        self._senders: list[asyncio.Task[None]] = []

    async def start(self) -> None:
        self._handle = await self._client.register()
        await self._handle.subscribe(topics=["#"])
        ready = asyncio.Event()
        self._task = asyncio.create_task(self._listen(self._handle, ready))
        await ready.wait()

    async def close(self) -> None:
        for task in [self._task, *self._senders]:
            if task is not None:
                task.cancel()
                try:
                    await task
                except asyncio.CancelledError:
                    pass
                except Exception:
                    log.exception("a region manager's task failed before it was stopped")
        if self._handle is not None:
            try:
                await self._handle.unregister()
            except TidingsClientError as exc:  # the broker is going too: it expires the id
                log.info("region manager's subscriber not unregistered: %s", exc.message)
        for c in (self._client, *self.links.values()):
            await c.aclose()

    def counts(self) -> dict[str, TopicCounts]:
        """This interval's counts per topic; the message counts start again from zero."""
        topics = set(self._sizes) | set(self._subscribers)
        found = {
            t: TopicCounts(
                {c: list(s) for c, s in self._sizes.get(t, {}).items()},
                frozenset(self._subscribers.get(t, set())),
            )
            for t in topics
        }
        self._sizes.clear()
        return found

    def seen(self, topic: str) -> tuple[int, frozenset[int]]:
        """This interval's publications counted so far on `topic` and its subscribers here,
        without starting the count again (as `counts` does)."""
        sizes = self._sizes.get(topic, {})
        return sum(map(len, sizes.values())), frozenset(self._subscribers.get(topic, set()))

    async def _listen(self, handle: AsyncSubscriberHandle, ready: asyncio.Event) -> None:
        async with handle.stream(prefetch=1000) as stream:
            ready.set()
            async for message in stream:
                await self._receive(message, stream)

    async def _receive(self, message: Message[Any], stream: Stream) -> None:
        await stream.ack([message.receipt])
        topics = message.body.get("topics", [])
        attributes = message.body.get("attributes", {})
        if CONFIG_TOPIC in topics:
            self.placements[str(attributes["topic"])] = Placement.from_json(message.data)
        elif PRESENCE_TOPIC in topics:
            subscribers = self._subscribers[str(attributes["topic"])]
            client = int(attributes["client"])
            (subscribers.add if attributes["event"] == "join" else subscribers.discard)(client)
        elif "placement_id" in attributes:
            for topic in topics:
                await self._publication(topic, message, attributes)

    async def _publication(
        self, topic: str, message: Message[Any], attributes: dict[str, object]
    ) -> None:
        if attributes.get("placement_count"):
            size = float(len(orjson.dumps(message.data)))
            self._sizes[topic][int(attributes["placement_client"])].append(size)  # type: ignore[call-overload]
        placement = self.placements.get(topic)
        if not attributes.get("placement_forward") or placement is None:
            return
        others = [r for r in placement.regions if r != self.region and r in self.links]
        copy = {**attributes, "placement_forward": 0, "placement_count": 0}
        for r in others:  # not awaited here: the next publication must not wait a round trip
            self._outbox(r).put_nowait(_Forward(topic, message.data, copy))

    def _outbox(self, region: int) -> asyncio.Queue[_Forward]:
        outbox = self._outboxes.get(region)
        if outbox is None:
            outbox = self._outboxes[region] = asyncio.Queue()
            self._senders.append(asyncio.create_task(self._send(region, outbox)))
        return outbox

    async def _send(self, region: int, outbox: asyncio.Queue[_Forward]) -> None:
        """One region's forwards in the order they came: one request at a time, carrying
        every forward that came while the one before was on its way (so a slow link adds a
        round trip at most, not a queue)."""
        while True:
            batch = [await outbox.get()]
            while len(batch) < FORWARD_BATCH and not outbox.empty():
                batch.append(outbox.get_nowait())
            bodies = [publication_body(f.data, [f.topic], f.attributes, None) for f in batch]
            try:
                await retrying_batch(self.links[region], bodies)
            except Exception as exc:  # (region down past the retries: the next ones go on)
                log.warning(
                    "placement: %d forwards to region %d failed: %s", len(batch), region, exc
                )
            else:
                self.forwarded += len(batch)


@dataclass(frozen=True, slots=True)
class _Forward:
    topic: str
    data: object
    attributes: dict[str, object]
