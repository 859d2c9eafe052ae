"""Function failures counted and failing functions suspended, by the broker's rule.

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


class StatusStore(Protocol):
    def set_subscription_status(
        self, subscription_id: str, status: Literal["active", "suspended"], reason: str | None
    ) -> bool: ...


@dataclass(frozen=True, slots=True)
class Call:
    """One function call's outcome: `error` None when the function answered."""

    published_at: float
    publication_id: str
    subscription_id: str
    error: str | None


class FunctionHealth:
    def __init__(self, store: StatusStore, failures_to_suspend: int) -> None:
        self.store = store
        self.failures_to_suspend = failures_to_suspend
        self._failures: dict[str, int] = {}  # subscription id -> consecutive failures

    def record(self, calls: Iterable[Call]) -> list[str]:
        """Count the calls of one batch; returns the subscriptions suspended."""
        suspended: list[str] = []
        for call in sorted(calls, key=lambda c: (c.published_at, c.publication_id)):
            sid = call.subscription_id
            if sid in suspended:
                continue  # the broker would not have called it again
            if call.error is None:
                self._failures.pop(sid, None)
                continue
            count = self._failures[sid] = self._failures.get(sid, 0) + 1
            if count >= self.failures_to_suspend:
                reason = f"{count} consecutive failures; last: {call.error}"
                self.store.set_subscription_status(sid, "suspended", reason)
                self._failures.pop(sid, None)
                suspended.append(sid)
        return suspended
