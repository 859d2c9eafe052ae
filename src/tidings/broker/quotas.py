"""What one subscriber may hold, checked before it is stored."""

from __future__ import annotations

import ipaddress
from collections.abc import Callable

from tidings.broker.alarms import DiskAlarm
from tidings.broker.rates import TokenBuckets
from tidings.config import Limits
from tidings.delivery.signals import Revocations
from tidings.errors import ErrorCode, TidingsError
from tidings.store.asyncstore import AsyncStore


class Quotas:
    def __init__(
        self,
        limits: Limits,
        store: AsyncStore,
        disk: DiskAlarm,
        revocations: Revocations,
        clock: Callable[[], float],
    ) -> None:
        self.limits, self.store, self.disk, self.revocations = limits, store, disk, revocations
        per_s = limits.registrations_per_minute / 60
        self.registrations = TokenBuckets(per_s, limits.registrations_per_minute, clock)

    def check_register(self, client: str) -> None:
        """RATE_LIMITED past `registrations_per_minute` from one client address (a loopback
        address only with `rate_limit_loopback`)."""
        if _loopback(client) and not self.limits.rate_limit_loopback:
            return
        wait = self.registrations.take(client)
        if wait:
            detail = f"at most {self.limits.registrations_per_minute} registrations a minute"
            raise TidingsError(ErrorCode.RATE_LIMITED, detail=detail, retry_s=wait)

    def check_stream(self, subscriber_id: str) -> None:
        """LIMIT_EXCEEDED past the open streams allowed (this one already counted)."""
        mine, every = self.revocations.open_streams(subscriber_id), self.revocations.open_streams()
        if mine > self.limits.max_streams_per_subscriber:
            detail = f"at most {self.limits.max_streams_per_subscriber} streams per subscriber"
            raise TidingsError(ErrorCode.LIMIT_EXCEEDED, field="stream", detail=detail)
        if every > self.limits.max_streams:
            detail = f"at most {self.limits.max_streams} streams on this broker"
            raise TidingsError(ErrorCode.LIMIT_EXCEEDED, field="stream", detail=detail)

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


def _loopback(address: str) -> bool:
    try:
        return ipaddress.ip_address(address).is_loopback
    except ValueError:  # no address (a test client, a Unix socket): treated as local
        return not address
