"""The failure rule, one copy for the broker and the pipeline: a function subscription is
suspended after `limit` consecutive failed calls (a success resets the count), with the
reason "N consecutive failures; last: ERROR"."""

from __future__ import annotations


class FailureRule:
    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._failures: dict[str, int] = {}  # subscription id -> consecutive failures

    def count(self, subscription_id: str, error: str | None) -> str | None:
        """Count one call's outcome; the suspension reason when it trips the rule (the
        count then starts again)."""
        if error is None:
            self._failures.pop(subscription_id, None)
            return None
        count = self._failures[subscription_id] = self._failures.get(subscription_id, 0) + 1
        if count < self.limit:
            return None
        self._failures.pop(subscription_id, None)
        return f"{count} consecutive failures; last: {error}"

    def forget(self, subscription_id: str) -> None:
        """Start its count again (resumed, or its status set anew)."""
        self._failures.pop(subscription_id, None)
