"""Which lane a subscriber's calls take, and which queued calls no longer run.

Well-behaved subscribers share worker requests (one per worker per publication: that is
what makes 10,000 evaluations/s). A subscriber whose last evaluation failed or ran slow is
*suspect*: its calls leave the shared requests and go, in a request of their own, to the
quarantine workers, one evaluation of that subscriber at a time; while it keeps failing
there, at most `quarantine_queue` wait (more are shed as failures), and after each
evaluation that hit a limit a pause before its next one (the CPU budget, doubling with each
failure in a row, at most `MAX_PAUSE_S`), so a runaway's share of the machine shrinks while
it keeps failing; a function that merely raises costs nothing and is not paused. Its
quarantine workers run at a lower priority too. So a runaway delays the calls behind it
in a shared request once, at its first offence, and never again.

A suspended or removed subscription's evaluations still queued are cancelled: each
evaluation takes a ticket when it starts, and a call whose subscription was cancelled after
its ticket is dropped when a worker becomes free for it, with no outcome. A cancellation is
remembered only while an evaluation that started before it still runs: subscriptions come
and go at a caller's will, and their ids must not pile up here.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from dataclasses import dataclass, field

from tidings.config import FunctionSettings
from tidings.sandbox import FunctionOutcome


@dataclass(slots=True)
class Gate:
    """One suspect subscriber's place in the quarantine lane."""

    running: asyncio.Semaphore = field(default_factory=lambda: asyncio.Semaphore(1))
    waiting: int = 0
    failures: int = 0  # failed evaluations in a row


MAX_PAUSE_S = 2.0
PRUNE_AT = 1024  # cancellations held before the ones no evaluation needs are forgotten
# failures that cost the machine (a limit hit, a worker killed): only these earn a pause;
# an exception raised at once costs nothing and only counts towards suspension
COSTLY = ("cpu time limit", "memory limit", "killed:", "recursion too deep")


def costly(error: str | None) -> bool:
    return error is not None and error.startswith(COSTLY)


class Lanes:
    def __init__(self, settings: FunctionSettings) -> None:
        self.settings = settings
        self._suspects: set[str] = set()
        self._gates: dict[str, Gate] = {}
        self._tickets = 0
        self._running: dict[int, None] = {}  # tickets of the evaluations running, oldest first
        self._cancelled: dict[str, int] = {}  # subscription id -> last ticket cancelled
        self._prune_at = PRUNE_AT

    def suspect(self, owner: str) -> bool:
        return owner in self._suspects

    def flag(self, owner: str) -> None:
        """A call of this subscriber just hit a limit: suspect from now on, so its calls
        still waiting leave the shared turns before its evaluation is over."""
        self._suspects.add(owner)

    def observe(self, owner: str, outcomes: Iterable[FunctionOutcome], slow: bool) -> None:
        """A subscriber's evaluation is over: suspect while it fails or runs slow."""
        if slow or any(o.error is not None for o in outcomes):
            self._suspects.add(owner)
        else:
            self._suspects.discard(owner)
            if owner in self._gates and self._gates[owner].waiting == 0:
                del self._gates[owner]

    def gate(self, owner: str) -> Gate:
        return self._gates.setdefault(owner, Gate())

    def full(self, owner: str) -> bool:
        """Shed this evaluation? Only while the subscriber keeps failing in quarantine: one
        that failed once, or runs slow, waits its turn (a batch's evaluations start at once)."""
        gate = self.gate(owner)
        return gate.failures > 0 and gate.waiting >= self.settings.quarantine_queue

    def pause(self, owner: str, errors: Iterable[str | None]) -> float:
        """Seconds the subscriber's quarantine gate stays shut after this evaluation, whose
        calls gave `errors`: none unless one hit a limit (`costly`)."""
        gate = self.gate(owner)
        found = [e for e in errors if e is not None]
        gate.failures = gate.failures + 1 if found else 0
        if not any(costly(e) for e in found):
            return 0.0
        return min(MAX_PAUSE_S, self.settings.cpu_ms / 1000 * 2.0 ** (gate.failures - 1))

    def ticket(self) -> int:
        """An evaluation starts: its ticket, given back with `done`."""
        self._tickets += 1
        self._running[self._tickets] = None
        return self._tickets

    def done(self, ticket: int) -> None:
        oldest = next(iter(self._running), None)
        self._running.pop(ticket, None)
        if len(self._cancelled) >= PRUNE_AT and ticket == oldest:  # some may be freed now
            self._prune()

    def cancel(self, subscription_id: str) -> None:
        """Evaluations of this subscription that started until now run no more calls."""
        self._cancelled[subscription_id] = self._tickets
        if len(self._cancelled) >= self._prune_at:
            self._prune()

    def _prune(self) -> None:
        """Forget the cancellations no running evaluation started before."""
        oldest = next(iter(self._running), self._tickets + 1)
        self._cancelled = {s: t for s, t in self._cancelled.items() if t >= oldest}
        self._prune_at = max(PRUNE_AT, 2 * len(self._cancelled))

    def remembered(self) -> int:
        """Cancellations held (bounded by the evaluations still running)."""
        return len(self._cancelled)

    def cancelled(self, subscription_id: str, ticket: int) -> bool:
        return ticket <= self._cancelled.get(subscription_id, 0)
