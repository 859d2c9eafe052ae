"""The failure rule, one copy: a function subscription is suspended after
`failures_to_suspend` consecutive failed calls (a success resets the count), with the reason
"N consecutive failures; last: ERROR"."""

from __future__ import annotations


def count_call(
    failures: dict[str, int], subscription_id: str, error: str | None, limit: int
) -> str | None:
    """Count one call's outcome in `failures`; the suspension reason when it trips the rule."""
    if error is None:
        failures.pop(subscription_id, None)
        return None
    count = failures[subscription_id] = failures.get(subscription_id, 0) + 1
    if count < limit:
        return None
    failures.pop(subscription_id, None)
    return f"{count} consecutive failures; last: {error}"
