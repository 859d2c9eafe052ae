"""Fair turns by subscriber: at most `slots` evaluations run at once (the CPU budget), and
a free slot goes to the waiting subscriber that has held slots least, counted in time
(start-time fair queuing: each owner's tag advances by the time its turns held a slot, in
`QUANTUM_S` units; one waiting after an idle spell starts at the current clock, with no
credit banked), and ordered by when its next turn would end: its tag plus the time the
turn is expected to take (`turn(owner, expected_s)`: the caller's estimate, e.g. a worker's
start when its owner has none). Turns of equal cost go round-robin, served longest ago
first, whatever the length of each one's queue. A turn that starts a worker (about a second
on a loaded machine: the library loads) costs its owner that second, so a crowd of
subscribers each starting workers waits behind each other while a neighbour whose worker is
warm and whose calls take milliseconds is served next, even when they all came at once.
A subscriber holds `per_owner` turns at once at most (code: one, it has one worker per lane
and a second turn would only wait for the first; URL calls: `url_concurrency_per_subscriber`).

A turn ending while more of its owner's evaluations wait passes to the next of them at
once, up to `burst` turns in a row (and while `may_keep` says so: not for a subscriber under
suspicion); then the owner goes to the back. A worker bound for a
turn then serves that owner's backlog, not one call: with more subscribers than workers,
one start per call had turned 630 cheap evaluations into 380 s of starts.

The owners waiting for a turn are kept in a heap by their tags, so a grant costs
O(log owners): a scan of every waiting owner made each grant cost milliseconds once
thousands of (free) subscribers waited (`benchmarks/fairshare.py`)."""

from __future__ import annotations

import asyncio
import heapq
import math
import time
from collections import deque
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

REMEMBERED = 4096  # owners whose last turn is remembered, past those waiting or running
QUANTUM_S = 0.01  # a turn's cost in these units, at least one: cheap turns cost alike
Entry = tuple[int, int, int, int, str]  # ends, tag, last served, arrival, owner


class FairShare:
    def __init__(
        self,
        slots: int,
        burst: int = 1,
        may_keep: Callable[[str], bool] = lambda _: True,
        per_owner: int = 1,
        clock: Callable[[], float] = time.monotonic,
        costly: int | None = None,
    ) -> None:
        self.free = max(1, slots)
        # turns expected to cost (a worker's start) running at once, at most: the others'
        # slots stay for owners whose turns are expected to be short
        self.costly = self.free if costly is None else max(1, min(costly, self.free))
        self._costly_running = 0
        self.clock = clock  # what a turn's slot time is read from
        self.per_owner = max(1, per_owner)  # turns one owner may hold at once
        self.burst, self.may_keep = max(1, burst), may_keep
        self._streak: dict[str, int] = {}  # running owner -> its turns in a row
        self._waiting: dict[str, deque[asyncio.Future[None]]] = {}  # owner -> its waiters
        self._last: dict[str, int] = {}  # owner -> when it last got a turn
        self._running: dict[str, int] = {}
        # owner -> when each running turn began, and whether it was expected to cost
        self._since: dict[str, deque[tuple[float, bool]]] = {}
        self._tick = 0
        self._tag: dict[str, int] = {}  # owner -> the slot time its turns have held (quanta)
        self._expected: dict[str, int] = {}  # owner -> its next turn's expected cost (quanta)
        self._virtual = 0  # virtual time: the tag of the last owner granted a turn
        # owners waiting and not running, by when their next turn would end, their tag, when
        # they were last served (-1: never), arrival: heaps, so a grant costs O(log owners);
        # the ones whose next turn is expected to cost apart, held back past `costly`
        self._cheap: list[Entry] = []
        self._dear: list[Entry] = []
        self._queued: set[str] = set()  # the owners with an entry in a heap
        self._arrivals = 0
        self._forget_at = REMEMBERED

    def waiting(self, owner: str) -> int:
        return len(self._waiting.get(owner, ()))

    @asynccontextmanager
    async def turn(self, owner: str, expected_s: float = 0.0) -> AsyncIterator[None]:
        await self._acquire(owner, math.ceil(expected_s / QUANTUM_S))
        try:
            yield
        finally:
            self._release(owner)

    async def _acquire(self, owner: str, expected: int) -> None:
        granted: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._expected[owner] = expected
        self._waiting.setdefault(owner, deque()).append(granted)
        self._enqueue(owner)
        self._dispatch()
        try:
            await granted  # at once when it was granted now
        except asyncio.CancelledError:
            if granted.done() and not granted.cancelled():
                self._release(owner)  # granted as it was cancelled: pass the turn on
            raise

    def _release(self, owner: str) -> None:
        self._charge(owner)
        if self._pass_on(owner):
            return
        self.free += 1
        self._running[owner] -= 1
        if not self._running[owner]:
            del self._running[owner], self._since[owner]
            self._streak.pop(owner, None)
        self._enqueue(owner)
        self._dispatch()
        if len(self._last) > self._forget_at:  # forget owners neither waiting nor running
            keep = self._waiting.keys() | self._running.keys()
            self._last = {o: t for o, t in self._last.items() if o in keep}
            self._tag = {o: t for o, t in self._tag.items() if o in keep}
            self._expected = {o: t for o, t in self._expected.items() if o in keep}
            self._forget_at = max(REMEMBERED, 2 * len(self._last))  # amortised: not each time

    def _charge(self, owner: str) -> None:
        """The ending turn's slot time onto its owner's tag (from the clock at least: time
        not asked for is not banked)."""
        began, dear = self._since[owner].popleft()
        self._costly_running -= dear
        cost = max(1, math.ceil((self.clock() - began) / QUANTUM_S))
        self._tag[owner] = max(self._tag.get(owner, 0), self._virtual) + cost

    def _begin(self, owner: str, dear: bool = False) -> None:
        self._tick += 1
        self._last[owner] = self._tick
        self._since.setdefault(owner, deque()).append((self.clock(), dear))
        self._costly_running += dear

    def _enqueue(self, owner: str) -> None:
        """Put an owner with waiters and a turn to spare among the ready ones, once."""
        spare = self._running.get(owner, 0) < self.per_owner
        if owner in self._waiting and spare and owner not in self._queued:
            self._arrivals += 1
            tag = max(self._tag.get(owner, 0), self._virtual)
            expected = self._expected.get(owner, 0)
            entry = (tag + expected, tag, self._last.get(owner, -1), self._arrivals, owner)
            heapq.heappush(self._dear if expected else self._cheap, entry)
            self._queued.add(owner)

    def _pass_on(self, owner: str) -> bool:
        """The turn straight to the owner's next waiter, within its burst."""
        queue = self._waiting.get(owner)
        if not queue or not self.may_keep(owner):
            return False
        while queue and self._streak.get(owner, 0) < self.burst:
            granted = queue.popleft()
            if not queue:
                del self._waiting[owner]
            if granted.done():  # cancelled while it waited
                continue
            self._streak[owner] += 1
            self._begin(owner)
            granted.set_result(None)
            return True
        return False

    def _dispatch(self) -> None:
        """Free turns to the waiting owners not running, the least slot time held first."""
        while self.free > 0 and (ready := self._next()) is not None:
            _, tag, _, _, owner = heapq.heappop(ready)
            self._queued.discard(owner)
            queue = self._waiting.get(owner)
            if not queue or self._running.get(owner, 0) >= self.per_owner:
                continue
            granted = queue.popleft()
            if not queue:
                del self._waiting[owner]
            if granted.done():  # cancelled while it waited: its owner's next, if any
                self._enqueue(owner)
                continue
            self.free -= 1
            self._virtual = max(self._virtual, tag)
            self._begin(owner, dear=ready is self._dear)
            self._running[owner] = self._running.get(owner, 0) + 1
            self._streak[owner] = 1
            granted.set_result(None)
            self._enqueue(owner)  # more waiting and a turn to spare: behind the others

    def _next(self) -> list[Entry] | None:
        """The heap whose head goes next: the earlier end of the two, the costly ones only
        while fewer than `costly` such turns run."""
        dear = self._dear if self._dear and self._costly_running < self.costly else None
        if not self._cheap:
            return dear
        if dear is None or self._cheap[0] <= dear[0]:
            return self._cheap
        return dear
