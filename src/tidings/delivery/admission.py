"""Admission: at most `most` of one subscriber's queue operations do work at once; the rest
wait their turn in the order they came (issue #28: a tenant pulling and nacking as fast as
it can from many connections slows itself, not everyone else).

A turn is handed straight from the one leaving to the first waiting, so none can overtake
the queue. A subscriber's state lives only while it has a turn taken or waiting: the table
holds the subscribers active right now, never every one seen. `most` = 0: no bound.

A turn is the task's: inside it, asking again for the same key's turn (an API route holding
one around its parsing and the queue operation it calls, which asks too) is granted at once.
"""

from __future__ import annotations

import asyncio
import contextvars
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

# the turns the running task holds, by (admission, key); a task it starts inherits the value
# but not the turns, hence the owning task beside it
Held = tuple[asyncio.Task[object] | None, frozenset[tuple[int, str]]]
_held: contextvars.ContextVar[Held] = contextvars.ContextVar("held", default=(None, frozenset()))


@dataclass(slots=True)
class _Turns:
    taken: int = 0
    waiting: deque[asyncio.Future[None]] = field(default_factory=deque)


class Admission:
    def __init__(self, most: int, waited: Callable[[], None] = lambda: None) -> None:
        self.most = most
        self.waited = waited  # told each time an operation has to wait for its turn
        self._turns: dict[str, _Turns] = {}

    def active(self) -> int:
        """Subscribers with a turn taken or awaited (the size of the table)."""
        return len(self._turns)

    def waiting(self, key: str) -> int:
        turns = self._turns.get(key)
        return len(turns.waiting) if turns else 0

    def turn(self, key: str) -> _Turn:
        """Do the work inside (`async with`) once one of `key`'s `most` turns is free."""
        return _Turn(self, key)

    async def _take(self, key: str) -> None:
        turns = self._turns.setdefault(key, _Turns())
        if turns.taken < self.most and not turns.waiting:
            turns.taken += 1
            return
        handed: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        turns.waiting.append(handed)
        self.waited()
        try:
            await handed
        except asyncio.CancelledError:
            if handed.done() and not handed.cancelled():
                self._give(key)  # handed a turn just as it was cancelled: pass it on
            elif handed in turns.waiting:
                turns.waiting.remove(handed)
                self._forget(key, turns)
            raise

    def _give(self, key: str) -> None:
        turns = self._turns[key]
        while turns.waiting:
            handed = turns.waiting.popleft()
            if not handed.done():
                handed.set_result(None)  # the turn passes on: `taken` stays as it is
                return
        turns.taken -= 1
        self._forget(key, turns)

    def _forget(self, key: str, turns: _Turns) -> None:
        if turns.taken == 0 and not turns.waiting and self._turns.get(key) is turns:
            del self._turns[key]


class _Turn:
    """One `async with admission.turn(key)`: a plain object, not a generator-based context
    manager (two of them a delivery on a push stream, its lease and its ack, cost more than
    the bookkeeping inside)."""

    __slots__ = ("_admission", "_key", "_token")

    def __init__(self, admission: Admission, key: str) -> None:
        self._admission, self._key = admission, key
        self._token: contextvars.Token[Held] | None = None

    async def __aenter__(self) -> None:
        admission, key = self._admission, self._key
        if admission.most <= 0:
            return
        task, held = _held.get()
        current = asyncio.current_task()
        mine = held if task is current else frozenset()
        if (id(admission), key) in mine:
            return
        await admission._take(key)
        self._token = _held.set((current, mine | {(id(admission), key)}))

    async def __aexit__(self, *exc: object) -> None:
        if self._token is not None:
            _held.reset(self._token)
            self._admission._give(self._key)
