"""Subscribers' queues as the API and the push channels use them: pull (a long-poll over
the committer's leases), ack, nack, release, reject. Every operation goes through the one
`Committer`; what a lease or an ack means for metrics and logs is told to an observer."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from typing import Protocol

from tidings.config import QueueSettings
from tidings.delivery.admission import Admission
from tidings.delivery.committer import Committer, succeeded
from tidings.delivery.signals import Signals
from tidings.store.base import Ack, AckResult, Hasten, Lease, Message, Nack, Reject


class QueueObserver(Protocol):
    def leased(self, messages: list[Message], now: float) -> None: ...
    def acked(self, subscriber_id: str, receipts: list[str], now: float) -> None: ...
    def nacked(self, subscriber_id: str, receipts: list[str]) -> None: ...
    def rejected(self, subscriber_id: str, message: Message, reason: str) -> None: ...


class SubscriberQueues:
    def __init__(
        self,
        committer: Committer,
        settings: QueueSettings,
        signals: Signals,
        observer: QueueObserver,
        clock: Callable[[], float],
        admission: Admission | None = None,
        may_lease: Callable[[str, float], bool] = lambda _sid, _now: True,
    ) -> None:
        self.committer, self.settings, self.signals = committer, settings, signals
        self.observer, self.clock, self.may_lease = observer, clock, may_lease
        most = settings.max_concurrent_ops_per_subscriber
        self.admission = Admission(most) if admission is None else admission

    async def pull(
        self,
        subscriber_id: str,
        max_messages: int,
        wait_s: float,
        visibility_s: float | None = None,
        max_bytes: int | None = None,
        *,
        max_attempts: int | None = None,
        quick: bool = False,
    ) -> list[Message]:
        """`quick`: a reader that asks again and again (a push stream) skips its first
        lease when the store's memory says it would come back empty, and waits for a signal
        instead; each later look is a lease, so what another process wrote (which only a
        transaction takes in) is found within the second, as by a waiting pull. At low
        rates one lease in two came back empty: a commit, a thread's hand-off, for nothing."""
        q = self.settings
        visibility = q.visibility_timeout_s if visibility_s is None else visibility_s
        attempts = q.max_attempts if max_attempts is None else max_attempts

        def lease() -> Lease:
            return Lease(subscriber_id, max_messages, visibility, attempts, self.clock(), max_bytes)

        deadline = time.monotonic() + min(wait_s, q.max_wait_s)
        while True:
            if quick and not self.may_lease(subscriber_id, self.clock()):
                leased: list[Message] = []  # the store's memory: a lease would find nothing
            else:
                async with self.admission.turn(subscriber_id):  # not held while waiting below
                    leased = await self.committer.submit(lease())
            quick = False
            remaining = deadline - time.monotonic()
            if not leased and remaining > 0:
                # another process may enqueue or a lease may expire: look again at least
                # each second; an enqueue here leases in its own commit (`Committer.park`)
                leased = await self._parked(subscriber_id, lease, min(remaining, 1.0))
                remaining = deadline - time.monotonic()
            if leased or remaining <= 0:
                if leased:
                    self.observer.leased(leased, self.clock())
                return leased

    async def _parked(
        self, subscriber_id: str, lease: Callable[[], Lease], timeout: float
    ) -> list[Message]:
        """Wait for a wake-up with the next lease parked (`Committer.park`): what it found
        if a commit took it, else nothing (the caller leases again)."""
        parked = self.committer.park(subscriber_id, lease, self.admission.most)
        if parked is None:  # (as many as may run at once are parked already)
            await self.signals.wait(subscriber_id, timeout)
            return []

        def answered(future: asyncio.Future[list[Message]]) -> None:
            if not future.cancelled():  # (wakes the wait below)
                self.signals.notify([subscriber_id])

        parked.add_done_callback(answered)
        try:
            await self.signals.wait(subscriber_id, timeout)
        except BaseException:
            if self.committer.unpark(subscriber_id, parked) or not parked.done():
                parked.cancel()  # (taken: what it leases goes back when answered)
            elif succeeded(parked):
                self.committer.hand_back(subscriber_id, parked.result(), self.clock())
            raise
        if self.committer.unpark(subscriber_id, parked):
            parked.cancel()
            return []
        try:
            return await parked  # (a commit took it: answered with it, or soon after)
        except Exception:  # (its commit failed: the caller's own lease answers for itself)
            return []

    async def ack(self, subscriber_id: str, receipts: Sequence[str]) -> AckResult:
        async with self.admission.turn(subscriber_id):
            result = await self.committer.submit(Ack(subscriber_id, receipts))
        self.observer.acked(subscriber_id, result.acked, self.clock())
        return result

    async def nack(
        self, subscriber_id: str, receipts: Sequence[str], delay_s: float = 0.0
    ) -> AckResult:
        async with self.admission.turn(subscriber_id):
            now = self.clock()
            result = await self.committer.submit(Nack(subscriber_id, receipts, now, delay_s))
        self.observer.nacked(subscriber_id, result.acked)
        self.signals.notify([subscriber_id])
        return result

    async def release(self, subscriber_id: str, receipts: Sequence[str]) -> AckResult:
        return await self.nack(subscriber_id, receipts)

    async def hasten(self, subscriber_id: str) -> int:
        """Make the messages waiting out a backoff ready now (an endpoint answers again)."""
        hastened = await self.committer.submit(Hasten(subscriber_id, self.clock()))
        if hastened:
            self.signals.notify([subscriber_id])
        return hastened

    async def reject(self, subscriber_id: str, message: Message, reason: str) -> None:
        """Dead-letter one leased message that cannot be served (e.g. its answer does not
        encode), alone: the rest of its batch is delivered as usual."""
        moved = await self.committer.submit(
            Reject(subscriber_id, message.receipt, reason, self.clock())
        )
        if moved:
            self.observer.rejected(subscriber_id, message, reason)
