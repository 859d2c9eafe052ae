"""Fair turns by subscriber: at most `slots` evaluations run at once (the CPU budget), and
a free slot goes to the subscribers waiting in turn, round-robin, whatever the length of
each one's queue. A subscriber with many slow evaluations waits behind its own; a
neighbour with one waits at most one turn of each subscriber ahead of it."""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager


class FairShare:
    def __init__(self, slots: int) -> None:
        self.free = max(1, slots)
        # owner -> its waiters, in the order owners take their turns (a dict is the ring)
        self._waiting: dict[str, deque[asyncio.Future[None]]] = {}

    def waiting(self, owner: str) -> int:
        return len(self._waiting.get(owner, ()))

    @asynccontextmanager
    async def turn(self, owner: str) -> AsyncIterator[None]:
        await self._acquire(owner)
        try:
            yield
        finally:
            self._release()

    async def _acquire(self, owner: str) -> None:
        if self.free > 0 and not self._waiting:
            self.free -= 1
            return
        granted: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiting.setdefault(owner, deque()).append(granted)
        try:
            await granted
        except asyncio.CancelledError:
            if granted.done() and not granted.cancelled():
                self._release()  # granted as it was cancelled: pass the slot on
            raise

    def _release(self) -> None:
        self.free += 1
        while self.free > 0 and self._waiting:
            owner = next(iter(self._waiting))
            queue = self._waiting.pop(owner)
            granted = queue.popleft()
            if queue:
                self._waiting[owner] = queue  # to the back of the ring
            if not granted.done():  # a cancelled waiter is skipped
                self.free -= 1
                granted.set_result(None)
