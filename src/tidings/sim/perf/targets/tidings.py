"""Tidings over its native API: publish over HTTP; consume over the WebSocket stream or by
HTTP long-poll (`transport`). It filters by content itself (a predicate subscription)."""

from __future__ import annotations

import asyncio
import contextlib
import time
from typing import Any

import orjson

from tidings.client.asyncio import AsyncClient, AsyncSubscriberHandle, Stream
from tidings.client.types import TidingsClientError
from tidings.sim.perf.targets.base import Deliver, refuse, stop_tasks, unreachable
from tidings.sim.perf.targets.http1 import Lanes
from tidings.sim.perf.workload import Workload

ACK_EVERY = 200  # receipts per ack frame under load; a timer flushes the rest
ACK_INTERVAL_S = 0.05
LANES = 16  # publishing connections: beyond this, more only queue inside the broker


class TidingsTarget:
    name = "tidings"
    filters = True
    transport = "websocket"

    def __init__(self, url: str | None, workload: Workload) -> None:
        if url is None:
            raise refuse("--url", self.name, "needs the broker's URL (the CLI embeds one)")
        self.url = url.rstrip("/")
        self.workload = workload
        self._client = AsyncClient(self.url)
        self._lanes = Lanes(self.url, min(workload.inflight, LANES))
        self._handles: list[AsyncSubscriberHandle] = []
        self._tasks: list[asyncio.Task[None]] = []

    def topic_name(self, topic: int) -> str:
        return f"perf/{self.workload.run_id}/{topic}"

    async def open(self) -> None:
        try:
            await self._client.health()
        except TidingsClientError as exc:
            raise unreachable(self.name, self.url, exc) from None

    async def subscribe(self, consumer: int, topic: int, wanted: range, deliver: Deliver) -> None:
        handle = await self._client.register()
        self._handles.append(handle)
        if self.workload.content:
            await handle.subscribe(predicates=_window(wanted))
        else:
            await handle.subscribe(topics=[self.topic_name(topic)])
        consume = _stream if self.transport == "websocket" else _poll
        ready = asyncio.get_running_loop().create_future()
        self._tasks.append(asyncio.create_task(consume(handle, consumer, deliver, ready)))
        await ready

    async def publish(self, producer: int, topic: int, body: bytes, x: int) -> None:
        publication: dict[str, Any] = {"data": body.decode(), "topics": [self.topic_name(topic)]}
        if self.workload.content:
            publication["attributes"] = {"x": x}
        await self._lanes.post("/v1/publications", orjson.dumps(publication))

    async def close(self) -> None:
        await stop_tasks(self._tasks)
        for handle in self._handles:
            with contextlib.suppress(TidingsClientError):
                await handle.unregister()
        await self._client.aclose()
        self._lanes.close()


class TidingsPullTarget(TidingsTarget):
    name = "tidings-http"
    transport = "http"


def _window(wanted: range) -> list[dict[str, Any]]:
    return [
        {"key": "x", "op": ">=", "value": wanted.start},
        {"key": "x", "op": "<", "value": wanted.stop},
    ]


async def _stream(
    handle: AsyncSubscriberHandle, consumer: int, deliver: Deliver, ready: asyncio.Future[None]
) -> None:
    async with handle.stream(prefetch=2000) as stream:
        ready.set_result(None)
        pending: list[str] = []
        flusher = asyncio.create_task(_flush_every(stream, pending))
        try:
            async for message in stream:
                deliver(consumer, message.data, time.time_ns())
                pending.append(message.receipt)
                if len(pending) >= ACK_EVERY:
                    await _flush(stream, pending)
        finally:
            flusher.cancel()


async def _flush_every(stream: Stream, pending: list[str]) -> None:
    while True:
        await asyncio.sleep(ACK_INTERVAL_S)
        await _flush(stream, pending)


async def _flush(stream: Stream, pending: list[str]) -> None:
    if pending:
        receipts = pending[:]
        pending.clear()
        await stream.ack(receipts)


async def _poll(
    handle: AsyncSubscriberHandle, consumer: int, deliver: Deliver, ready: asyncio.Future[None]
) -> None:
    ready.set_result(None)
    while True:
        batch = await handle.pull(100, wait=1)
        now = time.time_ns()
        for message in batch:
            deliver(consumer, message.data, now)
        if batch:
            await handle.ack([m.receipt for m in batch])
