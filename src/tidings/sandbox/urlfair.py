"""Fair shares of the URL calls in flight: at most `slots` at once for all subscribers, at
most `per_subscriber` of them one subscriber's, and at most `queue` of a subscriber's calls
waiting (more are shed at once, as failures of that subscriber alone).

The shared slots are taken in turns (`sandbox/fair.py`): a subscriber holds at most
`per_subscriber` of them, and a free slot goes to the waiting subscriber that has held
slots least, in time (a slow endpoint's calls cost their subscriber the time they took).
So a subscriber with 1,000 calls waiting takes one turn before one with a single call
waiting gets its own, and the endpoint of the first never sees more than `per_subscriber`
of its calls at once.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass

from tidings.sandbox.fair import FairShare


class Shed(Exception):
    """The subscriber already has its most calls waiting: this one is not queued."""


@dataclass(slots=True)
class _Calls:
    """One subscriber's calls in the share: waiting, or in flight."""

    waiting: int = 0
    flying: int = 0


class URLShare:
    def __init__(self, slots: int, per_subscriber: int, queue: int) -> None:
        self.turns = FairShare(slots, per_owner=per_subscriber)
        self.queue = max(1, queue)
        self._calls: dict[str, _Calls] = {}  # only subscribers with calls in the share

    def waiting(self, owner: str) -> int:
        calls = self._calls.get(owner)
        return calls.waiting if calls else 0

    def in_flight(self, owner: str) -> int:
        calls = self._calls.get(owner)
        return calls.flying if calls else 0

    @asynccontextmanager
    async def slot(self, owner: str) -> AsyncIterator[None]:
        """Held while one of `owner`'s calls is in flight; raises Shed at once when
        `queue` of its calls already wait."""
        calls = self._calls.setdefault(owner, _Calls())
        if calls.waiting >= self.queue:
            if not calls.flying and not calls.waiting:
                del self._calls[owner]
            raise Shed(f"shed: {self.queue} URL calls of this subscriber wait")
        calls.waiting += 1
        flying = False
        try:
            async with self.turns.turn(owner):
                calls.waiting -= 1
                calls.flying += 1
                flying = True
                yield
        finally:
            if flying:
                calls.flying -= 1
            else:
                calls.waiting -= 1
            if not calls.waiting and not calls.flying:
                del self._calls[owner]
