"""RabbitMQ over AMQP 0-9-1 (aio-pika): a topic exchange per run, a queue per consumer bound to
its topic. `--confirm` uses publisher confirms; `--persistent` durable queues and persistent
messages. It cannot filter by content: its consumers filter on receipt."""

from __future__ import annotations

import time

import aio_pika
from aio_pika.abc import (
    AbstractChannel,
    AbstractConnection,
    AbstractExchange,
    AbstractIncomingMessage,
)

from tidings.sim.perf.targets.base import Deliver, probe, unreachable
from tidings.sim.perf.workload import Workload

PREFETCH = 2000


class RabbitTarget:
    name = "rabbitmq"
    filters = False

    def __init__(self, url: str | None, workload: Workload) -> None:
        self.url = url or "amqp://guest:guest@127.0.0.1:5672/"
        self.workload = workload
        self._connections: list[AbstractConnection] = []
        self._exchange: AbstractExchange | None = None
        self._queues: list[str] = []

    async def _connect(self) -> AbstractConnection:
        await probe(self.name, self.url, 5672)  # else aio-pika also logs the refusal itself
        try:
            connection = await aio_pika.connect(self.url, timeout=5)
        except (TimeoutError, OSError, aio_pika.exceptions.AMQPError) as exc:
            raise unreachable(self.name, self.url, exc) from None
        self._connections.append(connection)
        return connection

    async def open(self) -> None:
        connection = await self._connect()
        channel = await connection.channel(publisher_confirms=self.workload.confirm)
        self._exchange = await self._declare_exchange(channel)

    async def _declare_exchange(self, channel: AbstractChannel) -> AbstractExchange:
        return await channel.declare_exchange(
            f"perf.{self.workload.run_id}", aio_pika.ExchangeType.TOPIC, auto_delete=True
        )

    async def subscribe(self, consumer: int, topic: int, wanted: range, deliver: Deliver) -> None:
        channel = await (await self._connect()).channel()
        await channel.set_qos(prefetch_count=PREFETCH)
        durable = self.workload.persistent
        queue = await channel.declare_queue(
            f"perf.{self.workload.run_id}.{consumer}", durable=durable, exclusive=not durable
        )
        self._queues.append(queue.name)
        await queue.bind(await self._declare_exchange(channel), routing_key=str(topic))

        async def on_message(message: AbstractIncomingMessage) -> None:
            deliver(consumer, message.body, time.time_ns())
            await message.ack()

        await queue.consume(on_message)

    async def publish(self, producer: int, topic: int, body: bytes, x: int) -> None:
        assert self._exchange is not None
        mode = aio_pika.DeliveryMode.PERSISTENT if self.workload.persistent else None
        await self._exchange.publish(
            aio_pika.Message(body, delivery_mode=mode), routing_key=str(topic)
        )

    async def close(self) -> None:
        if (
            self._connections and self.workload.persistent
        ):  # exclusive queues go with their connection
            channel = await self._connections[0].channel()
            for name in self._queues:
                await channel.queue_delete(name)
        for connection in reversed(self._connections):
            await connection.close()
