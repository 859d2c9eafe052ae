"""Redis Pub/Sub (redis-py asyncio): a connection per consumer subscribed to `perf.<run>.<topic>`.
At most once and kept nowhere, so `--persistent` is refused. A batch of PUBLISHes goes out in
one write on a connection of redis-py's pool, packed once per channel; a task reads the
replies (the subscriber counts) in order and completes each batch's window. redis-py's
pipeline packs every command anew in Python and held the publisher to ~60,000/s. With
hiredis installed redis-py parses with it. It cannot filter by content: consumers filter on
receipt."""

from __future__ import annotations

import asyncio
import contextlib
import time

import redis.asyncio as aioredis
from redis.asyncio.client import PubSub
from redis.exceptions import ConnectionError as RedisConnectionError

from tidings.sim.perf.targets.acks import OrderedAcks
from tidings.sim.perf.targets.base import Deliver, refuse, stop_tasks, unreachable
from tidings.sim.perf.traffic import Workload


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
        self._acks = OrderedAcks()
        self._prefixes: dict[int, bytes] = {}

    def channel(self, topic: int) -> str:
        return f"perf.{self.workload.run_id}.{topic}"

    async def open(self) -> None:
        try:
            await self._client.ping()
            pool = self._client.connection_pool
            self._publisher = await pool.get_connection()  # type: ignore[no-untyped-call]
        except (OSError, RedisConnectionError) as exc:
            raise unreachable(self.name, self.url, exc) from None
        self._tasks.append(asyncio.create_task(self._read_replies()))

    async def _read_replies(self) -> None:
        try:
            while True:
                await self._publisher.read_response()
                self._acks.on_acks(1)
        except (OSError, RedisConnectionError) as exc:
            self._acks.fail(exc)

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
        prefix = self._prefixes.get(topic)
        if prefix is None:
            channel = self.channel(topic).encode()
            head = b"*3\r\n$7\r\nPUBLISH\r\n$%d\r\n%s\r\n$%d\r\n"
            prefix = self._prefixes[topic] = head % (len(channel), channel, self.workload.size)
        done = self._acks.reserve(len(bodies))
        await self._publisher.send_packed_command(
            b"".join(prefix + body + b"\r\n" for body in bodies), check_health=False
        )
        await done

    async def close(self) -> None:
        await stop_tasks(self._tasks)
        for pubsub in self._pubsubs:
            with contextlib.suppress(RedisConnectionError):
                await pubsub.aclose()  # type: ignore[no-untyped-call]
        if hasattr(self, "_publisher"):
            await self._publisher.disconnect()
        await self._client.aclose()


async def _listen(pubsub: PubSub, consumer: int, deliver: Deliver) -> None:
    async for message in pubsub.listen():
        if message["type"] == "message":
            deliver(consumer, message["data"], time.time_ns())
