"""Redis Pub/Sub (redis-py asyncio): a connection per consumer subscribed to `perf.<run>.<topic>`.
At most once and kept nowhere, so `--persistent` is refused. A batch of PUBLISHes goes in one
pipeline (one write, the replies read together). It cannot filter by content: consumers filter
on receipt."""

from __future__ import annotations

import asyncio
import contextlib
import time

import redis.asyncio as aioredis
from redis.asyncio.client import PubSub
from redis.exceptions import ConnectionError as RedisConnectionError

from tidings.sim.perf.targets.base import Deliver, refuse, stop_tasks, unreachable
from tidings.sim.perf.workload import Workload


class RedisTarget:
    name = "redis"
    filters = False
    closed = 0

    def __init__(self, url: str | None, workload: Workload) -> None:
        if workload.persistent:
            raise refuse("--persistent", self.name, "Pub/Sub keeps nothing")
        self.url = url or "redis://127.0.0.1:6379/0"
        self.workload = workload
        self._client = aioredis.from_url(self.url, socket_connect_timeout=3)
        self._pubsubs: list[PubSub] = []
        self._tasks: list[asyncio.Task[None]] = []

    def channel(self, topic: int) -> str:
        return f"perf.{self.workload.run_id}.{topic}"

    async def open(self) -> None:
        try:
            await self._client.ping()
        except (OSError, RedisConnectionError) as exc:
            raise unreachable(self.name, self.url, exc) from None

    async def prepare(self, consumer: int, topic: int, wanted: range) -> None:
        raise refuse("--offline", self.name, "Pub/Sub keeps nothing for an absent subscriber")

    async def subscribe(self, consumer: int, topic: int, wanted: range, deliver: Deliver) -> None:
        pubsub = self._client.pubsub()
        self._pubsubs.append(pubsub)
        await pubsub.subscribe(self.channel(topic))
        await pubsub.get_message(timeout=5)  # the subscribe confirmation: routing has begun
        self._tasks.append(asyncio.create_task(_listen(pubsub, consumer, deliver)))

    async def publish_batch(
        self, producer: int, topic: int, bodies: list[bytes], xs: list[int]
    ) -> None:
        channel = self.channel(topic)
        pipeline = self._client.pipeline(transaction=False)
        for body in bodies:
            pipeline.publish(channel, body)
        await pipeline.execute()

    async def close(self) -> None:
        await stop_tasks(self._tasks)
        for pubsub in self._pubsubs:
            with contextlib.suppress(RedisConnectionError):
                await pubsub.aclose()  # type: ignore[no-untyped-call]
        await self._client.aclose()


async def _listen(pubsub: PubSub, consumer: int, deliver: Deliver) -> None:
    async for message in pubsub.listen():
        if message["type"] == "message":
            deliver(consumer, message["data"], time.time_ns())
