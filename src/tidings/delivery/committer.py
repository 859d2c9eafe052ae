"""Group commit: store operations submitted concurrently share one transaction.

Each caller hands over an operation (`Store.lease_op`, `ack_op`, `enqueue_op`, ...) and
waits; one flusher at a time runs everything pending in a single `Store.batch` on a worker
thread, then answers every waiter. Under load, a hundred subscribers' leases and a
publisher's enqueue become one commit instead of a hundred and one; a caller still gets
its answer only after its own writes are committed.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

T = TypeVar("T")
Op = Callable[[Any], Any]


class Committer:
    def __init__(self, run_batch: Callable[[Sequence[Op]], list[Any]], max_ops: int = 512):
        self._run_batch = run_batch
        self._max_ops = max_ops
        self._pending: list[tuple[Op, asyncio.Future[Any]]] = []
        self._flushing = False

    async def submit(self, op: Callable[[Any], T]) -> T:
        """The operation's result once committed; what it raised, or a failed commit."""
        future: asyncio.Future[T] = asyncio.get_running_loop().create_future()
        self._pending.append((op, future))
        if not self._flushing:
            self._flushing = True
            asyncio.get_running_loop().create_task(self._flush())
        return await future

    async def _flush(self) -> None:
        try:
            while self._pending:
                batch, self._pending = (
                    self._pending[: self._max_ops],
                    self._pending[self._max_ops :],
                )
                try:
                    results = await asyncio.to_thread(self._run_batch, [op for op, _ in batch])
                except Exception as exc:  # the commit failed: nobody's writes are durable
                    results = [exc] * len(batch)
                for (_, future), result in zip(batch, results, strict=True):
                    if future.done():
                        continue
                    if isinstance(result, Exception):
                        future.set_exception(result)
                    else:
                        future.set_result(result)
        finally:
            self._flushing = False
