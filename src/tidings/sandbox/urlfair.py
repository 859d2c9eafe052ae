"""Fair shares of the URL calls in flight: at most `slots` at once for all subscribers, at
most `per_subscriber` of them one subscriber's, and at most `queue` of a subscriber's calls
waiting (more are shed at once, as failures of that subscriber alone).

The shared slots are taken in turns (`sandbox/fair.py`): each subscriber has up to
`per_subscriber` lanes, a lane holds one call at a time, and a free slot goes to the waiting
lane served longest ago. So a subscriber with 1,000 calls waiting takes at most its
`per_subscriber` lanes' turns before one with a single call waiting gets its turn, and the
endpoint of the first never sees more than `per_subscriber` of its calls at once. A
subscriber's own calls take its free lanes first come, first served.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass

from tidings.sandbox.fair import FairShare

LANE = "\x00"  # between a subscriber's id and its lane's number in a turn's owner


class Shed(Exception):
    """The subscriber already has its most calls waiting: this one is not queued."""


@dataclass(slots=True)
class _Calls:
    """One subscriber's calls in the share: waiting, or in flight on one of its lanes."""

    gate: asyncio.Semaphore
    lanes: list[int]
    waiting: int = 0
    flying: int = 0


class URLShare:
    def __init__(self, slots: int, per_subscriber: int, queue: int) -> None:
        self.turns = FairShare(slots)
        self.per_subscriber = max(1, per_subscriber)
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
        calls = self._calls.get(owner)
        if calls is None:
            lanes = list(range(self.per_subscriber))
            calls = self._calls[owner] = _Calls(asyncio.Semaphore(self.per_subscriber), lanes)
        if calls.waiting >= self.queue:
            raise Shed(f"shed: {self.queue} URL calls of this subscriber wait")
        calls.waiting += 1
        flying = False
        try:
            async with calls.gate:
                lane = calls.lanes.pop()  # the gate leaves one free
                try:
                    async with self.turns.turn(f"{owner}{LANE}{lane}"):
                        calls.waiting -= 1
                        calls.flying += 1
                        flying = True
                        yield
                finally:
                    calls.lanes.append(lane)
        finally:
            if flying:
                calls.flying -= 1
            else:
                calls.waiting -= 1
            if not calls.waiting and not calls.flying:
                del self._calls[owner]
