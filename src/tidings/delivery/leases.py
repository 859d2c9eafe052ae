"""What this process leased, by receipt, so that an acknowledgement can be logged with the
publication it settles (the store answers an ack with receipts only).

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
        self._open: OrderedDict[str, Message] = OrderedDict()

    def __len__(self) -> int:
        return len(self._open)

    def remember(self, messages: Iterable[Message]) -> None:
        for m in messages:
            self._open[m.receipt] = m
        while len(self._open) > self.capacity:
            self._open.popitem(last=False)

    def settle(self, receipts: Sequence[str]) -> list[Message]:
        """Forget these receipts; the messages this process had leased under them."""
        found = (self._open.pop(r, None) for r in receipts)
        return [m for m in found if m is not None]
