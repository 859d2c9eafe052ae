"""Tidings over its native API: publish over HTTP, a batch per request
(`AsyncClient.publish_batch`) or with `--batch 1` one publication per request over the lean
HTTP/1.1 client, `--inflight` of them at once; consume over the WebSocket stream, acking each
frame's messages in one ack frame, or by HTTP long-poll (`transport`). It filters by content
itself (a predicate subscription)."""

from __future__ import annotations

import asyncio
import contextlib
import time
from typing import Any

import orjson

from tidings.client.asyncio import AsyncClient, AsyncSubscriberHandle, Stream
from tidings.client.types import TidingsClientError
from tidings.sim.perf.targets.base import Deliver, refuse, stop_tasks, unreachable
from tidings.sim.perf.targets.publish_lanes import PublishLanes
from tidings.sim.perf.traffic import Workload

LANES = 64  # publishing connections for one publication per request
PREFETCH = 2000


class TidingsTarget:
    name = "tidings"
    filters = True
    transport = "websocket"

    def __init__(self, url: str | None, workload: Workload) -> None:
        if url is None:
            raise refuse("--url", self.name, "needs the broker's URL (the CLI embeds one)")
        self.url = url.rstrip("/")
        self.workload = workload
        self._client = AsyncClient(self.url, retries=0)  # measured as sent: no dedup ids
        self._lanes = PublishLanes(self.url, min(workload.inflight, LANES))
        self._handles: dict[int, AsyncSubscriberHandle] = {}
        self._tasks: list[asyncio.Task[None]] = []
        self._streams: list[Stream] = []
        self._ended = 0  # streams that ended without being reopened

    @property
    def closed(self) -> int:
        """Streams the broker closed: reopened by the client, or ended."""
        return self._ended + sum(stream.reconnects for stream in self._streams)

    def topic_name(self, topic: int) -> str:
        return f"perf/{self.workload.run_id}/{topic}"

    async def open(self) -> None:
        try:
            await self._client.health()
        except TidingsClientError as exc:
            raise unreachable(self.name, self.url, exc) from None

    async def prepare(self, consumer: int, topic: int, wanted: range) -> None:
        handle = self._handles[consumer] = await self._client.register()
        if self.workload.content:
            await handle.subscribe(predicates=_window(wanted))
        else:
            await handle.subscribe(topics=[self.topic_name(topic)])

    async def subscribe(self, consumer: int, topic: int, wanted: range, deliver: Deliver) -> None:
        if consumer not in self._handles:
            await self.prepare(consumer, topic, wanted)
        handle = self._handles[consumer]
        ready: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        if self.transport == "websocket":
            task = asyncio.create_task(self._stream(handle, consumer, deliver, ready))
        else:
            task = asyncio.create_task(_poll(handle, consumer, deliver, ready))
        self._tasks.append(task)
        await ready

    async def _stream(
        self,
        handle: AsyncSubscriberHandle,
        consumer: int,
        deliver: Deliver,
        ready: asyncio.Future[None],
    ) -> None:
        try:
            async with handle.stream(prefetch=PREFETCH) as stream:
                self._streams.append(stream)
                ready.set_result(None)
                await _consume(stream, consumer, deliver)
        except TidingsClientError as exc:
            if not ready.done():  # never opened: the subscribe fails with the reason
                ready.set_exception(exc)
                return
            self._ended += 1  # the broker ended it and refused to open it again
            raise

    async def publish_batch(
        self, producer: int, topic: int, bodies: list[bytes], xs: list[int]
    ) -> None:
        publications = [
            self._publication(topic, body, x) for body, x in zip(bodies, xs, strict=True)
        ]
        if len(publications) > 1:
            await self._client.publish_batch(publications)
        else:
            await self._lanes.post("/v1/publications", orjson.dumps(publications[0]))

    def _publication(self, topic: int, body: bytes, x: int) -> dict[str, Any]:
        publication: dict[str, Any] = {"data": body.decode(), "topics": [self.topic_name(topic)]}
        if self.workload.content:
            publication["attributes"] = {"x": x}
        return publication

    async def close(self) -> None:
        await stop_tasks(self._tasks)
        for handle in self._handles.values():
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


async def _consume(stream: Stream, consumer: int, deliver: Deliver) -> None:
    """Every message handed on; one ack per frame. The messages of a frame come one after the
    other without the loop running anything else, so an ack scheduled with the first of them
    runs once the frame is done, and carries the receipts of all of them."""
    pending: list[str] = []
    acks: set[asyncio.Task[None]] = set()
    loop = asyncio.get_running_loop()
    async for message in stream:
        deliver(consumer, message.data, time.time_ns())
        if not pending:
            task = loop.create_task(_ack(stream, pending))
            acks.add(task)
            task.add_done_callback(acks.discard)
        pending.append(message.receipt)


async def _ack(stream: Stream, pending: list[str]) -> None:
    receipts = pending[:]
    pending.clear()
    await stream.ack(receipts)  # on a broken stream: nothing to settle, they come again


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
