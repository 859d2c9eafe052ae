"""Subscriber-supplied matching functions: restricted compile, worker processes, limits.

The broker talks to a `FunctionRunner` only; subscriber code never runs in its process.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from typing import Protocol

from tidings.model import FunctionSpec, Publication, Subscription


@dataclass(frozen=True, slots=True)
class FunctionOutcome:
    subscription_id: str
    matched: bool
    error: str | None = None  # set when the call failed (timeout, limit, exception, HTTP)


class FunctionRunner(Protocol):
    def validate(self, spec: FunctionSpec) -> None:
        """Check a spec at subscribe time; raise TidingsError (FUNCTION_INVALID/FORBIDDEN/
        UNKNOWN) naming the line and reason."""
        ...

    async def evaluate(
        self, publication: Publication, subscriptions: Sequence[Subscription]
    ) -> list[FunctionOutcome]:
        """Run every given function subscription on the publication; never raises for a
        subscriber's fault (that is an outcome with `error`)."""
        ...

    def stream(
        self, publication: Publication, subscriptions: Sequence[Subscription]
    ) -> AsyncIterator[list[FunctionOutcome]]:
        """As `evaluate`, one list per subscriber as soon as its own calls are done: a slow
        subscriber never holds back another's outcomes."""
        ...

    def cancel(self, subscription_id: str) -> None:
        """Drop this subscription's calls still queued (it was suspended or removed)."""
        ...

    async def aclose(self) -> None: ...
