"""Function failures counted and failing functions suspended, by the broker's rule
(`tidings.sandbox.health.FailureRule`, the one copy).

The broker counts a function subscription's consecutive failed calls (a success resets the
count) and suspends it at `FunctionSettings.failures_to_suspend`, with the reason
"N consecutive failures; last: ERROR". The pipeline's calls run in Spark workers; their
outcomes come back to the driver with the batch's rows, and this applies the same rule to
them in publication order. The count lives as long as the job, as the broker's lives as long
as its process. A suspension changes the store's version, so the next batch's snapshot
leaves the subscription out; the batch that suspended it has already run its calls.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal, Protocol

from tidings.sandbox.health import FailureRule


class StatusStore(Protocol):
    def set_subscription_status(
        self, subscription_id: str, status: Literal["active", "suspended"], reason: str | None
    ) -> bool: ...


@dataclass(frozen=True, slots=True)
class FunctionCall:
    """One function call's outcome: `error` None when the function answered."""

    published_at: float
    publication_id: str
    subscription_id: str
    error: str | None


class FunctionHealth:
    def __init__(self, store: StatusStore, failures_to_suspend: int) -> None:
        self.store = store
        self.rule = FailureRule(failures_to_suspend)

    def record(self, calls: Iterable[FunctionCall]) -> list[str]:
        """Count the calls of one batch; returns the subscriptions suspended."""
        suspended: list[str] = []
        for call in sorted(calls, key=lambda c: (c.published_at, c.publication_id)):
            if call.subscription_id in suspended:
                continue  # the broker would not have called it again
            reason = self.rule.count(call.subscription_id, call.error)
            if reason is not None:
                self.store.set_subscription_status(call.subscription_id, "suspended", reason)
                suspended.append(call.subscription_id)
        return suspended
