"""Publisher batching, off by default: `AsyncClient(url, linger=0.005, batch_size=100)`
gathers the publications of concurrent `publish()` calls for up to `linger` seconds (or
until `batch_size` wait) and sends them as one batch, as Kafka's `linger.ms` and
`batch.size` do. Each caller still gets its own publication's answer; a batch the broker
refuses fails every call in it (a batch is all or nothing)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from tidings.client import types as t

Send = Callable[[list[dict[str, Any]]], Awaitable[list[t.Published]]]
MAX_BATCH = 1000  # the broker's limit per batch


class Batcher:
    def __init__(self, send: Send, linger_s: float, size: int) -> None:
        self._send, self.linger_s, self.size = send, linger_s, min(size, MAX_BATCH)
        self._pending: list[tuple[dict[str, Any], asyncio.Future[t.Published]]] = []
        self._timer: asyncio.TimerHandle | None = None
        self._sending: set[asyncio.Task[None]] = set()

    async def add(self, body: dict[str, Any]) -> t.Published:
        loop = asyncio.get_running_loop()
        answer: asyncio.Future[t.Published] = loop.create_future()
        self._pending.append((body, answer))
        if len(self._pending) >= self.size:
            self._flush()
        elif self._timer is None:
            self._timer = loop.call_later(self.linger_s, self._flush)
        return await answer

    def _flush(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        batch, self._pending = self._pending, []
        if batch:
            task = asyncio.get_running_loop().create_task(self._deliver(batch))
            self._sending.add(task)
            task.add_done_callback(self._sending.discard)

    async def _deliver(
        self, batch: list[tuple[dict[str, Any], asyncio.Future[t.Published]]]
    ) -> None:
        try:
            published = await self._send([body for body, _ in batch])
        except Exception as exc:  # every caller in the batch learns why
            for _, answer in batch:
                if not answer.done():
                    answer.set_exception(exc)
            return
        for (_, answer), one in zip(batch, published, strict=True):
            if not answer.done():
                answer.set_result(one)

    async def flush(self) -> None:
        """Send what waits now, and wait for every batch under way."""
        self._flush()
        if self._sending:
            await asyncio.gather(*self._sending, return_exceptions=True)
