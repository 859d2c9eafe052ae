"""What this process leased, by subscriber and receipt, so that an acknowledgement can be
logged with the publication it settles (the store answers an ack with receipts only, and a
receipt names a delivery within its subscriber's queue: on the log layout two subscribers'
first deliveries both have `1.1.<nonce>`).

Bounded: the oldest leases are forgotten first; a forgotten or foreign receipt (leased by
another broker on a shared store) is acknowledged all the same, just not logged.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable, Sequence

from tidings.store.base import Message


class Leases:
    def __init__(self, capacity: int = 100_000) -> None:
        self.capacity = capacity
        self._open: OrderedDict[tuple[str, str], Message] = OrderedDict()

    def __len__(self) -> int:
        return len(self._open)

    def remember(self, messages: Iterable[Message]) -> None:
        for m in messages:
            self._open[m.subscriber_id, m.receipt] = m
        while len(self._open) > self.capacity:
            self._open.popitem(last=False)

    def settle(self, subscriber_id: str, receipts: Sequence[str]) -> list[Message]:
        """Forget these receipts of the subscriber's; the messages this process had leased
        under them."""
        found = (self._open.pop((subscriber_id, r), None) for r in receipts)
        return [m for m in found if m is not None]
