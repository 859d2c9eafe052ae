"""Which subscribers are still there: when each was last seen (a call with its token, or a
stream open on this broker), written to the store in batches; and who has gone.

Two rules, applied by `expired`:
- an ephemeral subscriber (`tidings subscribe` without `--id`, like RabbitMQ's exclusive
  queues) is deleted once `ephemeral_grace_s` passed with no stream open and no call, so a
  stream that reconnects within the grace keeps it;
- with `idle_expiry_s` set (off by default; Pub/Sub's subscription expiry), any subscriber
  not seen for that long is deleted.
A subscriber with a stream open on this broker is never expired by it; one streaming through
another broker is kept by that broker's reports.
"""

from __future__ import annotations

from collections.abc import Collection

from tidings.config import SubscriberSettings


class Presence:
    def __init__(self, settings: SubscriberSettings) -> None:
        self.settings = settings
        self._seen: dict[str, float] = {}

    @property
    def every_s(self) -> float:
        """How often to report and expire: often enough that a stream's reports keep its
        subscriber well inside the grace."""
        return max(0.1, min(5.0, self.settings.ephemeral_grace_s / 3))

    def saw(self, subscriber_id: str, at: float) -> None:
        self._seen[subscriber_id] = at

    def report(self, streaming: Collection[str], now: float) -> dict[str, float]:
        """What to write: everyone seen since the last report, and every open stream."""
        seen, self._seen = self._seen, {}
        seen.update(dict.fromkeys(streaming, now))
        return seen

    def bounds(self, now: float) -> tuple[float, float]:
        """(idle_before, ephemeral_before) for the store's `idle_subscribers`."""
        idle = self.settings.idle_expiry_s
        return (now - idle if idle > 0 else 0.0), now - self.settings.ephemeral_grace_s

    @staticmethod
    def expired(candidates: list[str], streaming: Collection[str]) -> list[str]:
        return [sid for sid in candidates if sid not in streaming]
