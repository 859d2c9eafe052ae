"""What one subscriber may hold, checked before it is stored."""

from __future__ import annotations

from tidings.broker.alarms import DiskAlarm
from tidings.config import Limits
from tidings.errors import ErrorCode, TidingsError
from tidings.store.asyncstore import AsyncStore


class Quotas:
    def __init__(self, limits: Limits, store: AsyncStore, disk: DiskAlarm) -> None:
        self.limits, self.store, self.disk = limits, store, disk

    def check_publish(self) -> None:
        """INSUFFICIENT_STORAGE while the disk alarm is on."""
        self.disk.check()

    async def check_subscribe(self, subscriber_id: str) -> None:
        """LIMIT_EXCEEDED when the subscriber holds its most subscriptions already."""
        limit = self.limits.max_subscriptions_per_subscriber
        if await self.store.count_subscriptions(subscriber_id) >= limit:
            raise TidingsError(
                ErrorCode.LIMIT_EXCEEDED,
                field="subscriptions",
                detail=f"at most {limit} subscriptions per subscriber",
            )
