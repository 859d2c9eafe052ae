"""What a push channel (the WebSocket stream, a webhook) needs of a subscriber's queue, and
nothing more: the channels sit below the broker and know only this."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from tidings.store.base import AckResult, Message


class Queue(Protocol):
    async def pull(
        self,
        subscriber_id: str,
        max_messages: int,
        wait_s: float,
        visibility_s: float | None = None,
        *,
        max_attempts: int | None = None,
    ) -> list[Message]:
        """Lease up to `max_messages`, waiting up to `wait_s` for the first; one leased
        `max_attempts` times (the queues' setting by default) is a dead letter instead."""
        ...

    async def ack(self, subscriber_id: str, receipts: Sequence[str]) -> AckResult: ...

    async def nack(
        self, subscriber_id: str, receipts: Sequence[str], delay_s: float = 0.0
    ) -> AckResult:
        """Hand these back for redelivery after `delay_s`; the attempt counts."""
        ...

    async def release(self, subscriber_id: str, receipts: Sequence[str]) -> AckResult:
        """Hand back what was leased and never delivered (a channel closing), at once."""
        ...

    async def reject(self, subscriber_id: str, message: Message, reason: str) -> None:
        """Dead-letter one leased message, with `reason`."""
        ...

    async def hasten(self, subscriber_id: str) -> int:
        """Make the messages waiting out a backoff ready now; how many."""
        ...


class SizedQueue(Queue, Protocol):
    """A queue that bounds a lease by bytes too (`SubscriberQueues`): what the WebSocket
    stream leases from, so a batch never exceeds what its client reads."""

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
        """Lease up to `max_messages` whose bodies come to at most `max_bytes` (the first
        always), waiting up to `wait_s` for the first; `quick`: the first look may be the
        store's memory rather than a lease (a reader that asks again and again)."""
        ...
