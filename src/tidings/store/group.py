"""Group commit for threads: many callers' queue operations, one transaction.

Callers on any thread `submit` an operation (`store.enqueue_op(...)`, `lease_op`, `ack_op`,
`nack_op`); one writer thread gathers whatever is waiting and runs it with `Store.batch` in
one transaction. Each caller returns only once that transaction is committed, so the
promise of `enqueue` holds: when it returns, its rows are durable. (The asyncio broker has
its own equivalent, `tidings.delivery.committer.Committer`.)
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from typing import Any, Protocol, TypeVar

from tidings.store.base import AckResult, Message, NewMessage

T = TypeVar("T")
Op = Callable[[Any], Any]


class Batching(Protocol):
    """What the committer needs of a store: `SQLStore` provides it."""

    def batch(self, ops: Sequence[Op]) -> list[Any]: ...
    def enqueue_op(self, messages: Sequence[NewMessage], fresh: bool = False) -> Op: ...
    def lease_op(
        self,
        subscriber_id: str,
        max_messages: int,
        visibility_s: float,
        max_attempts: int,
        now: float,
    ) -> Op: ...
    def ack_op(self, subscriber_id: str, receipts: Sequence[str]) -> Op: ...
    def nack_op(
        self, subscriber_id: str, receipts: Sequence[str], now: float, delay_s: float = 0.0
    ) -> Op: ...


class GroupCommitter:
    def __init__(self, store: Batching, max_ops: int = 512) -> None:
        self.store = store
        self._max_ops = max_ops
        self._waiting: queue.SimpleQueue[tuple[Op, Future[Any]] | None] = queue.SimpleQueue()
        self._writer = threading.Thread(target=self._run, name="tidings-group-commit", daemon=True)
        self._writer.start()

    def submit(self, op: Callable[[Any], T]) -> T:
        """The operation's result once committed; raises what it raised, or a failed commit."""
        future: Future[T] = Future()
        self._waiting.put((op, future))
        return future.result()

    def enqueue(self, messages: Sequence[NewMessage], fresh: bool = False) -> int:
        return int(self.submit(self.store.enqueue_op(messages, fresh))) if messages else 0

    def lease(
        self,
        subscriber_id: str,
        max_messages: int,
        visibility_s: float,
        max_attempts: int,
        now: float,
    ) -> list[Message]:
        op = self.store.lease_op(subscriber_id, max_messages, visibility_s, max_attempts, now)
        return list(self.submit(op))

    def ack(self, subscriber_id: str, receipts: Sequence[str]) -> AckResult:
        result: AckResult = self.submit(self.store.ack_op(subscriber_id, receipts))
        return result

    def nack(
        self, subscriber_id: str, receipts: Sequence[str], now: float, delay_s: float = 0.0
    ) -> AckResult:
        result: AckResult = self.submit(self.store.nack_op(subscriber_id, receipts, now, delay_s))
        return result

    def close(self) -> None:
        """Commit what is waiting, then stop the writer (the store stays open)."""
        self._waiting.put(None)
        self._writer.join()

    def _run(self) -> None:
        while (batch := self._gather()) is not None:
            if batch:
                self._commit(batch)

    def _gather(self) -> list[tuple[Op, Future[Any]]] | None:
        """Block for one operation, then take whatever else is already waiting."""
        first = self._waiting.get()
        if first is None:
            return None
        batch = [first]
        while len(batch) < self._max_ops and not self._waiting.empty():
            item = self._waiting.get()
            if item is None:
                self._commit(batch)
                return None
            batch.append(item)
        return batch

    def _commit(self, batch: list[tuple[Op, Future[Any]]]) -> None:
        try:
            results = self.store.batch([op for op, _ in batch])
        except Exception as exc:  # the commit failed: nobody's writes are durable
            results = [exc] * len(batch)
        for (_, future), result in zip(batch, results, strict=True):
            if isinstance(result, Exception):
                future.set_exception(result)
            else:
                future.set_result(result)
