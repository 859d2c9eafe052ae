"""Group commit: concurrent enqueues share one store transaction.

Each publish hands its deliveries to the batcher and waits; one flusher at a time commits
everything pending in a single `Store.enqueue` on a worker thread, then releases every waiter.
So throughput grows with concurrency, while each publish still answers only after its own
deliveries are durable.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence

from tidings.store.base import NewMessage


class EnqueueBatcher:
    def __init__(self, enqueue: Callable[[Sequence[NewMessage]], int], max_batch: int = 5000):
        self._enqueue = enqueue
        self._max_batch = max_batch
        self._pending: list[tuple[list[NewMessage], asyncio.Future[None]]] = []
        self._flushing = False

    async def submit(self, messages: list[NewMessage]) -> None:
        """Return once `messages` are committed; raise what the store raised."""
        if not messages:
            return
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._pending.append((messages, future))
        if not self._flushing:
            self._flushing = True
            asyncio.get_running_loop().create_task(self._flush())
        await future

    def _take(self) -> list[tuple[list[NewMessage], asyncio.Future[None]]]:
        taken: list[tuple[list[NewMessage], asyncio.Future[None]]] = []
        size = 0
        while self._pending and (not taken or size + len(self._pending[0][0]) <= self._max_batch):
            item = self._pending.pop(0)
            taken.append(item)
            size += len(item[0])
        return taken

    async def _flush(self) -> None:
        try:
            while self._pending:
                batch = self._take()
                rows = [m for messages, _ in batch for m in messages]
                try:
                    await asyncio.to_thread(self._enqueue, rows)
                except Exception as exc:  # every waiter of this batch learns of the failure
                    for _, future in batch:
                        if not future.done():
                            future.set_exception(exc)
                    continue
                for _, future in batch:
                    if not future.done():
                        future.set_result(None)
        finally:
            self._flushing = False
