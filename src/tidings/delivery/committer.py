"""Group commit: every queue operation of the process goes through one committer.

Callers hand over an operation as a value (`Enqueue`, `Lease`, `Ack`, `Nack`, `Reject`) and
wait; one flusher at a time runs everything pending with a single `Store.apply` (one
transaction) on a worker thread, then answers every waiter. Under load, a hundred
subscribers' leases and acks and a publisher's enqueue become one commit instead of a
hundred and one; a caller still gets its answer only after its own writes are committed.
Fresh enqueues waiting together (new publications, from many requests) are merged into one
operation: a few bulk statements for all of them instead of a few for each; so are publishes
with dedup ids (`PublishOnce`).

A long-poll or stream that found its queue empty while no commit runs parks its next lease
here (`park`): the first commit enqueuing for that subscriber runs the lease after its
enqueues, in the same transaction, and the deliveries leave with the commit that accepted
them instead of a commit or two later (a woken lease waited for the commit after the one
running when it woke), a commit's overhead saved. While a commit runs, nothing is parked: the
next commit comes soon, and a lease then takes what both enqueued, where a parked one would
halve a busy stream's batches (+7% broker CPU per message one publish per request, docs/perf.md).

A small batch (`INLINE_OPS`, weighed by `_weight`) is offered to the store to run at once on the
event loop's own thread (`Store.apply_now`: the embedded store takes it unless it would
wait for another thread or process). At low and moderate rates every message costs a few
commits of one or two operations, and handing each to a worker thread and back (a wake-up
of that thread, the interpreter's lock passed to it and back, a wake-up of the loop) cost
more broker CPU than the commit itself, and a worker thread's commit held the loop's
thread waiting for the interpreter's lock anyway (docs/perf.md). A larger batch, one the
store would wait for, and every batch of a store across the network run on a worker thread,
so that the loop serves the other connections meanwhile.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import Any, overload

from tidings.store.base import (
    ENQUEUES,
    SETTLES,
    Ack,
    AckResult,
    DedupClaim,
    DedupKey,
    Discharge,
    Enqueue,
    Hasten,
    Lease,
    Message,
    Nack,
    Owe,
    PublishOnce,
    QueueOp,
    Reject,
)

Apply = Callable[[Sequence[QueueOp]], list[Any]]
Parked = tuple[Callable[[], Lease], asyncio.Future[list[Message]]]
ApplyNow = Callable[[Sequence[QueueOp]], list[Any] | None]
# a batch this small (`_weight`) is offered to `apply_now` first: 64 before left a fan-out's
# hundred leases and a batch publish's acknowledgements to a worker thread, whose hand-offs
# and contention for the interpreter's lock cost more than the loop's wait (docs/perf.md)
INLINE_OPS = 1024
# a lease weighs what it asks for up to this: a hundred streams' leases still run on the
# loop's thread, while a batch of them can take at most 128 x 500 messages there
LEASE_WEIGHT = 8


def _never(ops: Sequence[QueueOp]) -> None:
    return None


class Committer:
    def __init__(self, apply: Apply, max_ops: int = 512, apply_now: ApplyNow = _never) -> None:
        self._apply, self._apply_now = apply, apply_now
        self._max_ops = max_ops
        self._pending: list[tuple[QueueOp, asyncio.Future[Any]]] = []
        self._flushing = False
        self._flusher: asyncio.Task[None] | None = None
        self._parked: dict[str, list[Parked]] = {}
        self.commits = 0  # transactions run, for the tests and the metrics

    @overload
    async def submit(self, op: Enqueue | Hasten | Owe | Discharge) -> int: ...
    @overload
    async def submit(self, op: Lease) -> list[Message]: ...
    @overload
    async def submit(self, op: Ack | Nack) -> AckResult: ...
    @overload
    async def submit(self, op: Reject) -> bool: ...
    @overload
    async def submit(self, op: PublishOnce) -> dict[DedupKey, DedupClaim]: ...
    async def submit(self, op: QueueOp) -> Any:
        """The operation's answer once committed; what it raised, or a failed commit."""
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._pending.append((op, future))
        self._start()
        try:
            return await future
        except asyncio.CancelledError:  # answered, but its caller was cancelled before it ran
            if isinstance(op, Lease) and succeeded(future):
                self.hand_back(op.subscriber_id, future.result(), op.now)
            raise

    def _start(self) -> None:
        if not self._flushing:
            self._flushing = True
            self._flusher = asyncio.get_running_loop().create_task(self._flush())

    def hand_back(self, subscriber_id: str, leased: Sequence[Message], now: float) -> None:
        """Leased messages nobody will receive (their caller stopped waiting): handed back
        in the next commit rather than after their visibility timeout."""
        if leased:
            receipts = [m.receipt for m in leased]
            future = asyncio.get_running_loop().create_future()
            self._pending.append((Nack(subscriber_id, receipts, now), future))
            self._start()

    def park(
        self, subscriber_id: str, lease: Callable[[], Lease], most: int = 0
    ) -> asyncio.Future[list[Message]] | None:
        """The lease `lease()` makes, run in the first commit that enqueues for this
        subscriber, after those enqueues; its answer (or failure) is the future's. The
        caller waits for it and for its other wake-ups, and `unpark`s it when one of
        those comes first. None: `most` of the subscriber's leases are parked already
        (as many as it may run at once, `Admission`; 0: no bound)."""
        if self._flushing:  # (busy: a later commit's lease finds more to take at once)
            return None
        parked = self._parked.setdefault(subscriber_id, [])
        if most and len(parked) >= most:
            return None
        future: asyncio.Future[list[Message]] = asyncio.get_running_loop().create_future()
        parked.append((lease, future))
        return future

    def unpark(self, subscriber_id: str, future: asyncio.Future[list[Message]]) -> bool:
        """True: the lease was still parked, and is no longer; False: a commit took it
        (its future has, or will have, the answer)."""
        parked = self._parked.get(subscriber_id, [])
        for i, (_, waiting) in enumerate(parked):
            if waiting is future:
                del parked[i]
                if not parked:
                    del self._parked[subscriber_id]
                return True
        return False

    def _unparked(self, ops: Sequence[QueueOp]) -> list[tuple[QueueOp, asyncio.Future[Any]]]:
        """The parked leases of the subscribers these operations enqueue for."""
        taken: list[tuple[QueueOp, asyncio.Future[Any]]] = []
        for subscriber_id in _recipients(ops, self._parked):
            for lease, future in self._parked.pop(subscriber_id):
                if not future.done():  # (its waiter gave up)
                    taken.append((lease(), future))
        return taken

    async def _flush(self) -> None:
        try:
            while self._pending:
                batch = self._pending[: self._max_ops]
                del self._pending[: self._max_ops]
                if self._parked:
                    batch += self._unparked([op for op, _ in batch])
                ops = [op for op, _ in batch]
                try:
                    small = sum(map(_weight, ops)) <= INLINE_OPS
                    results = self._run(ops, self._apply_now) if small else None
                    if results is None:
                        results = await asyncio.to_thread(self._run, ops, self._apply)
                except Exception as exc:  # the commit failed: nobody's writes are durable
                    results = [exc] * len(batch)
                self.commits += 1
                for (op, future), result in zip(batch, results, strict=True):
                    if future.done():  # its caller gave up waiting (cancelled)
                        if isinstance(op, Lease) and isinstance(result, list):
                            self.hand_back(op.subscriber_id, result, op.now)
                        continue
                    if isinstance(result, Exception):
                        future.set_exception(result)
                    else:
                        future.set_result(result)
        finally:
            self._flushing = False

    @overload
    def _run(self, ops: list[QueueOp], apply: Apply) -> list[Any]: ...
    @overload
    def _run(self, ops: list[QueueOp], apply: ApplyNow) -> list[Any] | None: ...
    def _run(self, ops: list[QueueOp], apply: ApplyNow) -> list[Any] | None:
        """Apply `ops` with their fresh enqueues merged into one and their publishes with
        dedup ids into another, run first; each merged operation's callers get their own
        share of its answer (or its failure). None: `apply` ran nothing (`apply_now`)."""
        groups = [
            g
            for g in (
                [i for i, op in enumerate(ops) if isinstance(op, Enqueue) and op.fresh],
                [i for i, op in enumerate(ops) if isinstance(op, PublishOnce)],
            )
            if len(g) > 1
        ]
        if not groups:
            return apply(ops)
        merged = {i for g in groups for i in g}
        rest = [i for i in range(len(ops)) if i not in merged]
        answers = apply([*(_merged([ops[i] for i in g]) for g in groups),
                         *(ops[i] for i in rest)])  # fmt: skip
        if answers is None:
            return None
        out: list[Any] = [None] * len(ops)
        for group, answer in zip(groups, answers, strict=False):
            for i in group:
                out[i] = answer if isinstance(answer, Exception) else _share(ops[i], answer)
        for i, answer in zip(rest, answers[len(groups) :], strict=True):
            out[i] = answer
        return out


def succeeded(future: asyncio.Future[Any]) -> bool:
    """Whether the future holds a result (not a failure, not cancelled)."""
    return future.done() and not future.cancelled() and future.exception() is None


def _weight(op: QueueOp) -> int:
    """What an operation costs to commit, roughly: a fan-out's deliveries, an ack's
    receipts; a lease what it may take, counted up to `LEASE_WEIGHT` (a stream's lease
    mostly finds a few messages, yet 512 of 500 each over a backlog would hold the loop's
    thread for a second or two); one for the rest."""
    if isinstance(op, Enqueue):
        return op.size()
    if isinstance(op, SETTLES):
        return len(op.receipts)
    if isinstance(op, Lease):
        return min(op.max_messages, LEASE_WEIGHT)
    return 1


def _recipients(ops: Sequence[QueueOp], among: dict[str, Any]) -> set[str]:
    """The subscribers in `among` that these operations enqueue for (or may: a publish with
    dedup ids enqueues unless its claim is refused)."""
    found: set[str] = set()
    for op in ops:
        if isinstance(op, Enqueue):
            found |= among.keys() & {m.subscriber_id for m in op.messages}
        if isinstance(op, ENQUEUES):
            for f in op.fanouts:
                found |= among.keys() & f.owners.keys()
    return found


def _merged(ops: list[QueueOp]) -> QueueOp:
    """Fresh enqueues as one; publishes with dedup ids as one (a later claim of an id
    claimed earlier in it is refused, as it would have been in its own operation)."""
    if all(isinstance(op, PublishOnce) for op in ops):
        once = [op for op in ops if isinstance(op, PublishOnce)]
        claims = [c for op in once for c in op.claims]
        fanouts = [f for op in once for f in op.fanouts]
        return PublishOnce(claims, max(op.now for op in once), fanouts)
    fresh = [op for op in ops if isinstance(op, Enqueue)]
    return Enqueue(
        [m for op in fresh for m in op.messages],
        fresh=True,
        fanouts=[f for op in fresh for f in op.fanouts],
    )


def _share(op: QueueOp, answer: Any) -> Any:
    """One caller's answer out of its merged operation's."""
    if isinstance(op, PublishOnce):
        return {c.key: answer[c.key] for c in op.claims if c.key in answer}
    return op.size() if isinstance(op, Enqueue) else answer
