"""MQTT 3.1.1 (paho-mqtt; Mosquitto on this machine): a client per consumer subscribed to
`perf/<run>/<topic>`. `--confirm` or `--persistent` publish at QoS 1 (acknowledged, kept for the
session), else QoS 0. Paho runs its own network thread; receipts are timed there and handed to
the event loop. It cannot filter by content: consumers filter on receipt."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any
from urllib.parse import urlsplit

import paho.mqtt.client as mqtt
from paho.mqtt.enums import CallbackAPIVersion

from tidings.sim.perf.targets.base import Deliver, unreachable
from tidings.sim.perf.workload import Workload


class MqttTarget:
    name = "mqtt"
    filters = False

    def __init__(self, url: str | None, workload: Workload) -> None:
        self.url = url or "mqtt://127.0.0.1:1883"
        parts = urlsplit(self.url)
        self.host, self.port = parts.hostname or "127.0.0.1", parts.port or 1883
        self.workload = workload
        self.qos = 1 if workload.confirm or workload.persistent else 0
        self._clients: list[mqtt.Client] = []
        self._publisher: _Publisher | None = None

    def topic_name(self, topic: int) -> str:
        return f"perf/{self.workload.run_id}/{topic}"

    async def _connect(self, client: mqtt.Client) -> None:
        loop = asyncio.get_running_loop()
        connected: asyncio.Future[None] = loop.create_future()
        client.on_connect = _settler(loop, connected)
        try:
            await asyncio.to_thread(client.connect, self.host, self.port, 30)
        except OSError as exc:
            raise unreachable(self.name, self.url, exc) from None
        client.loop_start()
        self._clients.append(client)
        await asyncio.wait_for(connected, 10)

    async def open(self) -> None:
        self._publisher = _Publisher(asyncio.get_running_loop(), self.qos)
        await self._connect(self._publisher.client)

    async def subscribe(self, consumer: int, topic: int, wanted: range, deliver: Deliver) -> None:
        loop = asyncio.get_running_loop()
        client = mqtt.Client(CallbackAPIVersion.VERSION2)
        subscribed: asyncio.Future[None] = loop.create_future()
        client.on_subscribe = _settler(loop, subscribed)

        def on_message(_c: mqtt.Client, _u: Any, message: mqtt.MQTTMessage) -> None:
            at_ns = time.time_ns()  # timed here, in paho's thread, not when the loop gets to it
            loop.call_soon_threadsafe(lambda: deliver(consumer, bytes(message.payload), at_ns))

        client.on_message = on_message
        await self._connect(client)
        client.subscribe(self.topic_name(topic), qos=self.qos)
        await asyncio.wait_for(subscribed, 10)

    async def publish(self, producer: int, topic: int, body: bytes, x: int) -> None:
        assert self._publisher is not None
        await self._publisher.send(self.topic_name(topic), body, self.qos)

    async def close(self) -> None:
        for client in self._clients:
            client.disconnect()
            client.loop_stop()


def _settler(loop: asyncio.AbstractEventLoop, future: asyncio.Future[None]) -> Any:
    """A paho callback (any signature) that settles `future` on the event loop."""

    def callback(*_: Any) -> None:
        loop.call_soon_threadsafe(_settle, future)

    return callback


def _settle(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


class _Publisher:
    """One connection for every producer; at QoS 1, `send` waits for the broker's PUBACK."""

    def __init__(self, loop: asyncio.AbstractEventLoop, qos: int) -> None:
        self.loop = loop
        self.client = mqtt.Client(CallbackAPIVersion.VERSION2)
        self.client.max_inflight_messages_set(65535)
        self.client.max_queued_messages_set(0)
        if qos:  # at QoS 0 there is nothing to wait for, and no mid to remember
            self.client.on_publish = self._on_publish
        self._lock = threading.Lock()
        self._waiting: dict[int, asyncio.Future[None]] = {}
        self._acked: set[int] = set()

    def _on_publish(self, _c: mqtt.Client, _u: Any, mid: int, *_: Any) -> None:
        with self._lock:
            future = self._waiting.pop(mid, None)
            if future is None:
                self._acked.add(mid)
        if future is not None:
            self.loop.call_soon_threadsafe(_settle, future)

    async def send(self, topic: str, body: bytes, qos: int) -> None:
        info = self.client.publish(topic, body, qos=qos)
        if qos == 0:
            return
        future = self.loop.create_future()
        with self._lock:
            if info.mid in self._acked:
                self._acked.discard(info.mid)
                return
            self._waiting[info.mid] = future
        await future
