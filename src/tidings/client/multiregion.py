"""The multi-region mode: one client of one topic served by several regions (MultiPub).

A client knows its link to every region (`urls`, one per region) and its latency to each;
its *home* is the closest region the topic's configuration selects. Subscribers subscribe to
the topic at home; every client listens there for configurations (topic `placement/config`).
Publishers send each publication, with one `placement_id`, to every selected region (direct)
or to home only, which forwards (routed).

When a configuration moves its home, a client subscribes at the new home *before* leaving the
old one, keeps both for `drain_s` (longer than any publication can still be in flight to the
old home), then leaves; publications seen twice in the overlap are dropped by `placement_id`,
so the application sees each exactly once.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from tidings.client.asyncio import AsyncClient, AsyncSubscriberHandle, Stream
from tidings.client.types import Message, TidingsClientError

log = logging.getLogger("tidings.client")

ATTEMPTS = 3  # a pooled connection the broker closed meanwhile fails once: try again
CONFIG_TOPIC = "placement/config"
PRESENCE_TOPIC = "placement/presence"


@dataclass(frozen=True, slots=True)
class Placement:
    """A deployed configuration of one topic: selected regions, mode, a rising version."""

    version: int
    regions: tuple[int, ...]
    mode: str  # "direct" | "routed"

    def to_json(self) -> dict[str, Any]:
        return {"version": self.version, "regions": list(self.regions), "mode": self.mode}

    @staticmethod
    def from_json(raw: dict[str, Any]) -> Placement:
        return Placement(int(raw["version"]), tuple(int(r) for r in raw["regions"]), raw["mode"])


@dataclass(frozen=True, slots=True)
class Delivery:
    placement_id: str
    region: int
    latency_ms: float
    data: Any


@dataclass
class _Home:
    region: int
    client: AsyncClient
    handle: AsyncSubscriberHandle
    task: asyncio.Task[None] | None = None
    ready: asyncio.Event = field(default_factory=asyncio.Event)
    closing: bool = False


class MultiRegionClient:
    """A publisher and/or subscriber of `topic`; `deliveries` holds what it received, once each."""

    def __init__(
        self,
        client: int,
        topic: str,
        urls: Sequence[str],
        latencies: Sequence[float],
        placement: Placement,
        *,
        subscriber: bool,
        drain_s: float = 1.0,
    ) -> None:
        self.client, self.topic, self.urls = client, topic, list(urls)
        self.latencies = list(latencies)
        self.placement = placement
        self.subscriber = subscriber
        self.drain_s = drain_s
        self.deliveries: list[Delivery] = []
        self.duplicates = 0  # dropped by placement_id
        self.moves: list[tuple[int, int]] = []  # (from region, to region)
        self._seen: set[str] = set()
        self._home: _Home | None = None
        self._publishers = [AsyncClient(u) for u in self.urls]
        self._moving: asyncio.Task[None] | None = None

    def closest(self, placement: Placement) -> int:
        """The selected region with the least latency; ties to the lower index."""
        return min(placement.regions, key=lambda r: (self.latencies[r], r))

    @property
    def home(self) -> int:
        assert self._home is not None
        return self._home.region

    async def start(self) -> None:
        self._home = await self._open(self.closest(self.placement))

    async def publish(self, data: dict[str, Any]) -> str:
        """One publication, sent as the configuration says; its `placement_id`."""
        placement_id = uuid.uuid4().hex
        body = {**data, "sent": time.time()}
        home = self.home
        targets = self.placement.regions if self.placement.mode == "direct" else (home,)
        routed = self.placement.mode == "routed" and len(self.placement.regions) > 1
        await asyncio.gather(
            *(
                retrying(
                    self._publishers[r],
                    body,
                    [self.topic],
                    {
                        "placement_id": placement_id,
                        "placement_client": self.client,
                        "placement_count": int(r == home),  # counted once, at home
                        "placement_forward": int(routed),
                    },
                )
                for r in targets
            )
        )
        return placement_id

    async def close(self) -> None:
        if self._moving is not None:
            with contextlib.suppress(asyncio.CancelledError):
                await self._moving
        if self._home is not None:
            await self._leave(self._home)
        for c in self._publishers:
            await c.aclose()

    # -- a home: registration, subscription, stream -----------------------------------------

    async def _open(self, region: int) -> _Home:
        client = AsyncClient(self.urls[region])
        handle = await client.register()
        topics = [self.topic, CONFIG_TOPIC] if self.subscriber else [CONFIG_TOPIC]
        await handle.subscribe(topics=topics)
        home = _Home(region, client, handle)
        home.task = asyncio.create_task(self._listen(home))
        await home.ready.wait()
        if self.subscriber:
            await self._presence(home, "join")
        return home

    async def _leave(self, home: _Home) -> None:
        if self.subscriber:
            await self._presence(home, "leave")
        home.closing = True
        if home.task is not None:
            home.task.cancel()
            try:
                await home.task
            except asyncio.CancelledError:
                pass
            except Exception:
                log.exception("the home region's stream failed before it was stopped")
        try:
            await home.handle.unregister()
        except TidingsClientError as exc:  # the region is gone: it expires the id itself
            log.info("subscriber not unregistered from the home region: %s", exc.message)
        await home.client.aclose()

    async def _presence(self, home: _Home, event: str) -> None:
        attributes = {"topic": self.topic, "client": self.client, "event": event}
        await retrying(home.client, None, [PRESENCE_TOPIC], attributes)

    async def _listen(self, home: _Home) -> None:
        try:
            async with home.handle.stream() as stream:
                home.ready.set()
                async for message in stream:
                    await self._receive(home.region, message, stream)
        except TidingsClientError:
            if not home.closing:
                raise

    async def _receive(self, region: int, message: Message[Any], stream: Stream) -> None:
        arrived = time.time()
        await stream.ack([message.receipt])
        topics = message.body.get("topics", [])
        attributes = message.body.get("attributes", {})
        if CONFIG_TOPIC in topics:
            if attributes.get("topic") == self.topic:
                self._configure(Placement.from_json(message.data))
            return
        placement_id = attributes.get("placement_id")
        if placement_id is None or self.topic not in topics:
            return
        if placement_id in self._seen:
            self.duplicates += 1
            return
        self._seen.add(placement_id)
        sent = float(message.data.get("sent", arrived))
        self.deliveries.append(
            Delivery(placement_id, region, (arrived - sent) * 1000, message.data)
        )

    # -- following configurations -----------------------------------------------------------

    def _configure(self, placement: Placement) -> None:
        if placement.version <= self.placement.version:
            return
        self.placement = placement
        if self._moving is None or self._moving.done():
            self._moving = asyncio.create_task(self._follow())

    async def _follow(self) -> None:
        """Move home until it is where the latest configuration says."""
        while self._home is not None and self.closest(self.placement) != self._home.region:
            old = self._home
            self._home = await self._open(self.closest(self.placement))
            self.moves.append((old.region, self._home.region))
            await asyncio.sleep(self.drain_s)  # the old home still delivers what is in flight
            await self._leave(old)


async def retrying(
    client: AsyncClient, data: Any, topics: list[str], attributes: dict[str, Any]
) -> None:
    """Publish, again if the broker could not be reached (subscribers drop the duplicates)."""
    await _retried(lambda: client.publish(data, topics=topics, attributes=attributes))


async def retrying_batch(client: AsyncClient, bodies: list[dict[str, Any]]) -> None:
    """Several publications (`publication_body`s) in one request, in their order; again as
    `retrying`."""
    await _retried(lambda: client.publish_batch(bodies))


async def _retried(send: Callable[[], Awaitable[object]]) -> None:
    for attempt in range(ATTEMPTS):
        try:
            await send()
            return
        except TidingsClientError as exc:
            if exc.code != "unreachable" or attempt == ATTEMPTS - 1:
                raise
