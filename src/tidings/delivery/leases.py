"""What this process leased, by subscriber and receipt, so that an acknowledgement can be
logged with the publication it settles (the store answers an ack with receipts only, and a
receipt names a delivery within its subscriber's queue: on the log layout two subscribers'
first deliveries both have `1.1.<nonce>`).

Bounded: the oldest leases are forgotten first; a forgotten or foreign receipt (leased by
another broker on a shared store) is acknowledged all the same, just not logged. What is
kept of a lease is what its acknowledgement's log line and timing need, never the body: a
hundred thousand leases of 256 KiB bodies held 25 GiB.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial
from itertools import islice, repeat
from operator import itemgetter
from typing import Any, NamedTuple

from tidings.store.base import Message


class Leased(NamedTuple):
    """A lease as its acknowledgement is logged (`tidings.eventlog.Delivered`)."""

    subscriber_id: str
    publication_id: str
    subscription_ids: tuple[str, ...]
    attempt: int
    enqueued_at: float


# a message's key here and what is kept of it, taken by position from the tuple it is, in C
# (a Python loop over the messages cost more than the dictionary itself)
_KEY = itemgetter(1, 7)  # subscriber_id, receipt
_KEPT = itemgetter(1, 2, 3, 6, 5)  # Leased's fields
_leased: Callable[[tuple[Any, ...]], Leased] = partial(tuple.__new__, Leased)


class Leases:
    def __init__(self, capacity: int = 100_000) -> None:
        self.capacity = capacity
        # in the order leased (a plain dict: an OrderedDict's links cost half the time of a
        # fan-out's lease bookkeeping)
        self._open: dict[tuple[str, str], tuple[Any, ...]] = {}

    def __len__(self) -> int:
        return len(self._open)

    def remember(self, messages: Sequence[Message]) -> None:
        held = self._open
        held.update(zip(map(_KEY, messages), map(_KEPT, messages), strict=True))
        if len(held) > self.capacity:
            self._forget_oldest()

    def _forget_oldest(self) -> None:
        """Down to the capacity less an eighth, the oldest first, into a new dictionary: the
        front of one whose oldest leases were settled is a run of holes, which forgetting one
        at a time would walk again each time; a copy walks them once an eighth of the
        capacity."""
        held = self._open
        keep = self.capacity - self.capacity // 8
        self._open = dict(islice(held.items(), len(held) - keep, None))

    def settle(self, subscriber_id: str, receipts: Sequence[str]) -> list[Leased]:
        """Forget these receipts of the subscriber's; the leases this process made under
        them."""
        found = map(self._open.pop, zip(repeat(subscriber_id), receipts), repeat(None))
        return list(map(_leased, filter(None, found)))
