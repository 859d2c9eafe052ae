"""MQTT 3.1.1 (Mosquitto on this machine) through a lean client over asyncio streams: a
connection per consumer subscribed to `perf/<run>/<topic>`. `--confirm` or `--persistent`
publish at QoS 1, pipelined (a batch in one write) and counted back by their PUBACKs, which
the broker sends in publishing order; consumers PUBACK each message, all of one read in one
write. `--persistent` also keeps the consumers' sessions (clean-session 0). Else QoS 0. It
cannot filter by content: consumers filter on receipt.

paho-mqtt hands every message from its network thread to the event loop; that fell behind and
Mosquitto dropped messages for the slow consumer, so the old figures measured paho."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from urllib.parse import urlsplit

from tidings.sim.perf.targets import mqtt_wire as m
from tidings.sim.perf.targets.acks import OrderedAcks
from tidings.sim.perf.targets.base import Deliver, refuse, unreachable
from tidings.sim.perf.traffic import Workload

READ_CHUNK = 256 * 1024
OnMessage = Callable[[bytes, int], None]  # payload, receive time (time.time_ns)


class MqttError(Exception):
    """The broker refused the connection or the subscription."""


class MqttConnection:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer
        self.packets = m.PacketReader()
        self.acks = OrderedAcks()
        self.on_message: OnMessage | None = None
        self.error: Exception | None = None
        self._next_id = 0
        self._subacks: asyncio.Queue[m.Packet | Exception] = asyncio.Queue()
        self._reading: asyncio.Task[None] | None = None

    @classmethod
    async def open(cls, host: str, port: int, client_id: str, clean: bool) -> MqttConnection:
        reader, writer = await asyncio.open_connection(host, port, limit=READ_CHUNK)
        connection = cls(reader, writer)
        writer.write(m.connect(client_id, clean))
        packets: list[m.Packet] = []
        while not packets:
            data = await reader.read(READ_CHUNK)
            if not data:
                raise ConnectionResetError("the broker closed the connection before CONNACK")
            packets = connection.packets.feed(data)
        if packets[0].kind != m.CONNACK or m.connack_code(packets[0]):
            raise MqttError(f"connection refused: {packets[0]}")
        connection._reading = asyncio.create_task(connection._read())
        return connection

    def packet_id(self) -> int:
        self._next_id = self._next_id % 65535 + 1
        return self._next_id

    async def subscribe(self, topic: str, qos: int) -> None:
        self.writer.write(m.subscribe(self.packet_id(), topic, qos))
        answer = await self._subacks.get()
        if isinstance(answer, Exception):
            raise answer
        if answer.body[-1] == 0x80:
            raise MqttError(f"subscription to {topic} refused")

    async def publish(self, topic: str, bodies: list[bytes], qos: int) -> None:
        """Every body in one write; at QoS 1, return once every PUBACK has come."""
        if self.error is not None:
            raise self.error
        if not qos:
            self.writer.write(b"".join(m.publish_qos0(topic, body) for body in bodies))
            await self.writer.drain()
            return
        name = m.string(topic)
        done = self.acks.reserve(len(bodies))
        self.writer.write(b"".join(m.publish_qos1(name, self.packet_id(), b) for b in bodies))
        await self.writer.drain()
        await done

    async def _read(self) -> None:
        try:
            while True:
                data = await self.reader.read(READ_CHUNK)
                if not data:
                    raise ConnectionResetError("the broker closed the connection")
                self._dispatch(self.packets.feed(data), time.time_ns())
        except (OSError, m.PacketError) as exc:
            self.error = exc
            self.acks.fail(exc)
            self._subacks.put_nowait(exc)

    def _dispatch(self, packets: list[m.Packet], at_ns: int) -> None:
        pubacks, acked = [], 0
        for incoming in packets:
            if incoming.kind == m.PUBLISH:
                message = m.publish_of(incoming)
                if self.on_message is not None:
                    self.on_message(message.payload, at_ns)
                if message.packet_id:
                    pubacks.append(m.puback(message.packet_id))
            elif incoming.kind == m.PUBACK:
                acked += 1
            elif incoming.kind == m.SUBACK:
                self._subacks.put_nowait(incoming)
        if acked:
            self.acks.on_acks(acked)
        if pubacks:
            self.writer.write(b"".join(pubacks))

    async def close(self) -> None:
        if self.error is None:
            self.writer.write(m.disconnect())
        if self._reading is not None:
            self._reading.cancel()
            await asyncio.gather(self._reading, return_exceptions=True)
        self.writer.close()
        with contextlib.suppress(OSError):
            await self.writer.wait_closed()


class MqttTarget:
    name = "mqtt"
    filters = False

    def __init__(self, url: str | None, workload: Workload) -> None:
        self.url = url or "mqtt://127.0.0.1:1883"
        parts = urlsplit(self.url)
        self.host, self.port = parts.hostname or "127.0.0.1", parts.port or 1883
        self.workload = workload
        self.qos = 1 if workload.confirm or workload.persistent else 0
        self._connections: list[MqttConnection] = []
        self._consumers: list[MqttConnection] = []
        self._kept: list[str] = []  # client ids whose sessions the broker keeps

    @property
    def closed(self) -> int:
        """Consumer connections the broker closed (another client taking over the client
        id, say): their messages from then on are counted lost, not waited for in silence."""
        return sum(c.error is not None for c in self._consumers)

    def topic_name(self, topic: int) -> str:
        return f"perf/{self.workload.run_id}/{topic}"

    async def _connect(self, client_id: str, clean: bool) -> MqttConnection:
        try:
            connection = await MqttConnection.open(self.host, self.port, client_id, clean)
        except (OSError, MqttError) as exc:
            raise unreachable(self.name, self.url, exc) from None
        self._connections.append(connection)
        return connection

    async def open(self) -> None:
        self._publisher = await self._connect(f"perf-{self.workload.run_id}-pub", clean=True)

    async def prepare(self, consumer: int, topic: int, wanted: range) -> None:
        raise refuse("--offline", self.name, "Mosquitto keeps 1,000 messages for a client away")

    async def subscribe(self, consumer: int, topic: int, wanted: range, deliver: Deliver) -> None:
        client_id = f"perf-{self.workload.run_id}-{consumer}"
        connection = await self._connect(client_id, clean=not self.workload.persistent)
        self._consumers.append(connection)
        if self.workload.persistent:
            self._kept.append(client_id)
        connection.on_message = lambda payload, at_ns: deliver(consumer, payload, at_ns)
        await connection.subscribe(self.topic_name(topic), self.qos)

    async def publish_batch(
        self, producer: int, topic: int, bodies: list[bytes], xs: list[int]
    ) -> None:
        await self._publisher.publish(self.topic_name(topic), bodies, self.qos)

    async def close(self) -> None:
        for connection in self._connections:
            await connection.close()
        for client_id in self._kept:  # a clean session discards the kept one
            await (await self._connect(client_id, clean=True)).close()
