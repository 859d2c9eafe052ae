"""NATS core (at most once, no persistence) and NATS JetStream (a stream per run, a push
consumer per subscriber acknowledging with ack policy "all"), through nats-py. Subjects
`perf.<run>.<topic>`. A batch is published in one go: core NATS then flushes (a PING/PONG,
for back-pressure: nats-py may send the PING ahead of commands still in its buffer, so the
PONG bounds how far the publisher runs ahead, not what the server has read); JetStream
publishes carry a reply inbox and the batch returns once its publish acks have come
(pipelined, not one request per message). Neither filters by content: consumers filter on
receipt."""

from __future__ import annotations

import asyncio
import time

import nats
from nats.aio.client import Client
from nats.aio.msg import Msg
from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy, StorageType, StreamConfig

from tidings.sim.perf.targets.acks import OrderedAcks
from tidings.sim.perf.targets.base import Deliver, probe, refuse, stop_tasks, unreachable
from tidings.sim.perf.traffic import Workload

PENDING_MSGS = 10_000_000  # nats-py drops messages beyond its per-subscription limits
PENDING_BYTES = 4 * 1024**3
ACK_EVERY = 500  # JetStream receipts per ack (policy "all": one ack covers those before it)
ACK_INTERVAL_S = 0.02  # and a timer acks the rest
MAX_ACK_PENDING = 20_000
PROBE_TIMEOUT_S = 10  # as long as nats-py waits for a flush's PONG


async def _quiet(_: Exception) -> None:
    """nats-py logs connection errors itself unless given a callback."""


async def _processed(connection: Client) -> None:
    """Return once the server has handled what this connection has sent so far (a SUB: the
    server routes to it from then on). Not `flush()`: nats-py writes its PING straight to the
    socket, ahead of the commands still in its pending buffer, so the PONG can come before
    the server has read the SUB, and a publisher on another connection beats it (a consumer
    once lost the run's first two batches). A message to ourselves goes through that buffer
    behind the SUB, and the server handles one connection's commands in order."""
    probe = await connection.subscribe(connection.new_inbox())
    try:
        await connection.publish(probe.subject, b"")
        await probe.next_msg(timeout=PROBE_TIMEOUT_S)
    finally:
        await probe.unsubscribe()


class NatsTarget:
    name = "nats"
    filters = False
    closed = 0

    def __init__(self, url: str | None, workload: Workload) -> None:
        self.url = url or "nats://127.0.0.1:4222"
        self.workload = workload
        self._connections: list[Client] = []
        self._tasks: list[asyncio.Task[None]] = []
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

    async def prepare(self, consumer: int, topic: int, wanted: range) -> None:
        raise refuse("--offline", self.name, "core NATS keeps nothing for an absent consumer")

    async def subscribe(self, consumer: int, topic: int, wanted: range, deliver: Deliver) -> None:
        connection = await self._connect()

        async def on_message(message: Msg) -> None:
            deliver(consumer, message.data, time.time_ns())

        await connection.subscribe(
            self.subject(topic),
            cb=on_message,
            pending_msgs_limit=PENDING_MSGS,
            pending_bytes_limit=PENDING_BYTES,
        )
        await _processed(connection)

    async def publish_batch(
        self, producer: int, topic: int, bodies: list[bytes], xs: list[int]
    ) -> None:
        connection, subject = self._connections[0], self.subject(topic)
        for body in bodies:
            await connection.publish(subject, body)
        await connection.flush()

    async def close(self) -> None:
        await stop_tasks(self._tasks)
        for connection in reversed(self._connections):
            await connection.drain()


class _PublishAcks(OrderedAcks):
    """JetStream publish acks on one inbox, in publishing order (one stream)."""

    async def on_ack(self, message: Msg) -> None:
        refused = b'"error"' in message.data
        error = RuntimeError(f"JetStream refused a publish: {message.data!r}") if refused else None
        self.on_acks(1, error)


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
        self._acks = _PublishAcks()
        self._inbox = connection.new_inbox()
        await connection.subscribe(
            self._inbox, cb=self._acks.on_ack, pending_msgs_limit=PENDING_MSGS
        )

    async def prepare(self, consumer: int, topic: int, wanted: range) -> None:
        """The run's stream keeps every message; a consumer created later starts at the first."""

    async def subscribe(self, consumer: int, topic: int, wanted: range, deliver: Deliver) -> None:
        connection = await self._connect()
        acker = _Acker(connection)
        inbox = connection.new_inbox()

        async def on_message(message: Msg) -> None:
            deliver(consumer, message.data, time.time_ns())
            await acker.received(message.reply)

        await connection.subscribe(
            inbox, cb=on_message, pending_msgs_limit=PENDING_MSGS, pending_bytes_limit=PENDING_BYTES
        )
        config = ConsumerConfig(
            deliver_subject=inbox,
            deliver_policy=DeliverPolicy.ALL,  # the stream is the run's: all is this run's
            ack_policy=AckPolicy.ALL,
            ack_wait=120,
            max_ack_pending=MAX_ACK_PENDING,
            filter_subject=self.subject(topic),
        )
        await connection.jetstream().add_consumer(self.stream, config)
        self._tasks.append(asyncio.create_task(acker.every(ACK_INTERVAL_S)))

    async def publish_batch(
        self, producer: int, topic: int, bodies: list[bytes], xs: list[int]
    ) -> None:
        connection, subject = self._connections[0], self.subject(topic)
        if not self.workload.confirm:
            await super().publish_batch(producer, topic, bodies, xs)
            return
        done = self._acks.reserve(len(bodies))
        for body in bodies:
            await connection.publish(subject, body, reply=self._inbox)
        await done

    async def close(self) -> None:
        await stop_tasks(self._tasks)
        if self._connections and getattr(self, "_owner", False):
            await self._connections[0].jetstream().delete_stream(self.stream)
        await super().close()


class _Acker:
    """Acks a consumer's receipts: every ACK_EVERY-th, and the last one on a timer."""

    def __init__(self, connection: Client) -> None:
        self.connection = connection
        self.unacked = 0
        self.last_reply = ""

    async def received(self, reply: str) -> None:
        self.last_reply, self.unacked = reply, self.unacked + 1
        if self.unacked >= ACK_EVERY:
            await self.ack()

    async def ack(self) -> None:
        if self.unacked:
            self.unacked = 0
            await self.connection.publish(self.last_reply, b"+ACK")

    async def every(self, interval_s: float) -> None:
        while True:
            await asyncio.sleep(interval_s)
            await self.ack()
