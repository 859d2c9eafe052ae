"""NATS core (at most once, no persistence) and NATS JetStream (a stream per run, an ephemeral
push consumer per subscriber, acknowledged). Subjects `perf.<run>.<topic>`. Neither filters by
content: consumers filter on receipt."""

from __future__ import annotations

import time

import nats
from nats.aio.client import Client
from nats.aio.msg import Msg
from nats.js.api import DeliverPolicy, StorageType, StreamConfig

from tidings.sim.perf.targets.base import Deliver, probe, refuse, unreachable
from tidings.sim.perf.workload import Workload


async def _quiet(_: Exception) -> None:
    """nats-py logs connection errors itself unless given a callback."""


class NatsTarget:
    name = "nats"
    filters = False

    def __init__(self, url: str | None, workload: Workload) -> None:
        self.url = url or "nats://127.0.0.1:4222"
        self.workload = workload
        self._connections: list[Client] = []
        self._check(workload)

    def _check(self, workload: Workload) -> None:
        if workload.persistent:
            raise refuse("--persistent", self.name, "core NATS keeps nothing; use nats-jetstream")
        if workload.confirm:
            raise refuse("--confirm", self.name, "core NATS has no confirms; use nats-jetstream")

    def subject(self, topic: int) -> str:
        return f"perf.{self.workload.run_id}.{topic}"

    async def _connect(self) -> Client:
        await probe(self.name, self.url, 4222)  # nats-py retries a refused connect for minutes
        try:
            connection = await nats.connect(
                self.url, allow_reconnect=False, connect_timeout=3, error_cb=_quiet
            )
        except (TimeoutError, OSError, nats.errors.Error) as exc:
            raise unreachable(self.name, self.url, exc) from None
        self._connections.append(connection)
        return connection

    async def open(self) -> None:
        await self._connect()

    async def subscribe(self, consumer: int, topic: int, wanted: range, deliver: Deliver) -> None:
        connection = await self._connect()

        async def on_message(message: Msg) -> None:
            deliver(consumer, message.data, time.time_ns())

        await connection.subscribe(self.subject(topic), cb=on_message)
        await connection.flush()  # the server has the interest once the flush returns

    async def publish(self, producer: int, topic: int, body: bytes, x: int) -> None:
        await self._connections[0].publish(self.subject(topic), body)

    async def close(self) -> None:
        for connection in reversed(self._connections):
            await connection.drain()


class JetStreamTarget(NatsTarget):
    name = "nats-jetstream"

    def _check(self, workload: Workload) -> None:
        """JetStream has both persistence (file storage) and confirms (publish acks)."""

    @property
    def stream(self) -> str:
        return f"PERF_{self.workload.run_id}"

    async def open(self) -> None:
        connection = await self._connect()
        self._owner = True  # consumer processes share the stream; only its creator deletes it
        storage = StorageType.FILE if self.workload.persistent else StorageType.MEMORY
        config = StreamConfig(
            self.stream, subjects=[f"perf.{self.workload.run_id}.>"], storage=storage
        )
        await connection.jetstream().add_stream(config)

    async def subscribe(self, consumer: int, topic: int, wanted: range, deliver: Deliver) -> None:
        connection = await self._connect()

        async def on_message(message: Msg) -> None:
            deliver(consumer, message.data, time.time_ns())
            await message.ack()

        await connection.jetstream().subscribe(
            self.subject(topic),
            cb=on_message,
            stream=self.stream,
            manual_ack=True,
            deliver_policy=DeliverPolicy.NEW,
        )

    async def publish(self, producer: int, topic: int, body: bytes, x: int) -> None:
        connection = self._connections[0]
        if self.workload.confirm:
            await connection.jetstream().publish(self.subject(topic), body, stream=self.stream)
        else:
            await connection.publish(self.subject(topic), body)

    async def close(self) -> None:
        if self._connections and getattr(self, "_owner", False):
            await self._connections[0].jetstream().delete_stream(self.stream)
        await super().close()
