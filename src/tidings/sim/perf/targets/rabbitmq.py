"""RabbitMQ over AMQP 0-9-1 (the lean client in `amqp.py`): a direct exchange per run, a queue
per consumer bound to its topic. `--confirm` selects publisher confirms, awaited per batch
(`--batch` publishes in one write); `--persistent` durable queues and delivery-mode 2. A
consumer takes `basic.qos` PREFETCH and acks with `multiple` once per read. It cannot filter
by content: its consumers filter on receipt."""

from __future__ import annotations

import struct

from tidings.sim.perf.targets import amqp_wire as w
from tidings.sim.perf.targets.amqp import AmqpConnection, AmqpError
from tidings.sim.perf.targets.base import Deliver, probe, unreachable
from tidings.sim.perf.traffic import Workload

PREFETCH = 2000


class RabbitTarget:
    name = "rabbitmq"
    filters = False
    closed = 0

    def __init__(self, url: str | None, workload: Workload) -> None:
        self.url = url or "amqp://guest:guest@127.0.0.1:5672/"
        self.workload = workload
        self.exchange = f"perf.{workload.run_id}"
        self._publisher: AmqpConnection | None = None
        self._consumers: dict[int, AmqpConnection] = {}
        self._header = w.content_header(1, workload.size, workload.persistent)
        self._prefixes: dict[int, bytes] = {}

    def queue(self, consumer: int) -> str:
        return f"perf.{self.workload.run_id}.{consumer}"

    async def _connect(self) -> AmqpConnection:
        await probe(self.name, self.url, 5672)
        try:
            connection = await AmqpConnection.open(self.url)
        except (OSError, AmqpError) as exc:
            raise unreachable(self.name, self.url, exc) from None
        await self._declare_exchange(connection)
        return connection

    async def _declare_exchange(self, connection: AmqpConnection) -> None:
        # passive, durable, auto-delete (once its last queue is unbound), internal, no-wait
        flags = w.bits(False, False, True, False, False)
        arguments = b"\x00\x00" + w.shortstr(self.exchange) + w.shortstr("direct") + flags
        await connection.call(w.EXCHANGE_DECLARE, arguments + w.table({}), w.EXCHANGE_DECLARE_OK)

    async def open(self) -> None:
        self._publisher = await self._connect()
        if self.workload.confirm:
            await self._publisher.select_confirms()

    async def prepare(self, consumer: int, topic: int, wanted: range) -> None:
        connection = self._consumers[consumer] = await self._connect()
        durable = self.workload.persistent
        # passive, durable, exclusive (gone with the connection), auto-delete, no-wait
        flags = w.bits(False, durable, not durable, False, False)
        declare = b"\x00\x00" + w.shortstr(self.queue(consumer)) + flags + w.table({})
        await connection.call(w.QUEUE_DECLARE, declare, w.QUEUE_DECLARE_OK)
        bind = b"\x00\x00" + w.shortstr(self.queue(consumer)) + w.shortstr(self.exchange)
        bind += w.shortstr(str(topic)) + w.bits(False) + w.table({})
        await connection.call(w.QUEUE_BIND, bind, w.QUEUE_BIND_OK)

    async def subscribe(self, consumer: int, topic: int, wanted: range, deliver: Deliver) -> None:
        if consumer not in self._consumers:
            await self.prepare(consumer, topic, wanted)
        connection = self._consumers[consumer]
        connection.on_delivery = lambda body, at_ns: deliver(consumer, body, at_ns)
        qos = struct.pack(">IHB", 0, PREFETCH, 0)  # size (no limit), count, per consumer
        await connection.call(w.BASIC_QOS, qos, w.BASIC_QOS_OK)
        # queue, consumer tag (the broker's), no-local, no-ack, exclusive, no-wait
        consume = b"\x00\x00" + w.shortstr(self.queue(consumer)) + w.shortstr("")
        consume += w.bits(False, False, False, False) + w.table({})
        await connection.call(w.BASIC_CONSUME, consume, w.BASIC_CONSUME_OK)

    async def publish_batch(
        self, producer: int, topic: int, bodies: list[bytes], xs: list[int]
    ) -> None:
        assert self._publisher is not None
        prefix = self._prefixes.get(topic)
        if prefix is None:
            prefix = self._prefixes[topic] = w.publish_prefix(1, self.exchange, str(topic))
        await self._publisher.publish(prefix, self._header, bodies)

    async def close(self) -> None:
        for consumer, connection in self._consumers.items():
            if self.workload.persistent and connection.error is None:  # durable: not exclusive
                delete = b"\x00\x00" + w.shortstr(self.queue(consumer)) + w.bits(False, False)
                await connection.call(w.QUEUE_DELETE, delete, w.QUEUE_DELETE_OK)
        publisher = [self._publisher] if self._publisher is not None else []
        for connection in [*self._consumers.values(), *publisher]:
            await connection.close()
