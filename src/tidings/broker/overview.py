"""The operator's view of a broker: pages of subscribers with their queues' depths, the
gauges a metrics scrape shows, and whether the store answers (readiness)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from tidings.broker.index import SubscriptionIndex
from tidings.errors import ErrorCode, TidingsError
from tidings.metrics import Metrics, QueueGauge, Snapshot
from tidings.store.asyncstore import AsyncStore
from tidings.store.base import Origin, QueueDepth, SubscriberRecord

log = logging.getLogger("tidings.broker")


class Overview:
    def __init__(
        self,
        store: AsyncStore,
        index: SubscriptionIndex,
        metrics: Metrics,
        clock: Callable[[], float],
    ) -> None:
        self.store, self.index, self.metrics, self.clock = store, index, metrics, clock

    async def subscribers_page(
        self, after: str, limit: int, origin: Origin = "all"
    ) -> list[tuple[SubscriberRecord, QueueDepth]]:
        """For the admin: a page of subscribers (all, the real ones or the simulated ones),
        each with its queue's depth."""
        page = await self.store.subscribers_page(after, limit, origin)
        now = self.clock()
        depths = [await self.store.depth(r.id, now) for r in page]
        return list(zip(page, depths, strict=True))

    def owns_partition(self, asked: str) -> bool:
        """Whether this broker owns partition `asked` of the queues (a store without
        partitions: none)."""
        owned = getattr(self.store.sync, "owned", None)
        return owned is not None and asked.isdigit() and int(asked) in owned()

    async def check_store(self, timeout_s: float) -> None:
        """UNAVAILABLE unless the store answers a read within `timeout_s`."""
        try:
            async with asyncio.timeout(timeout_s):
                await self.store.subscriptions_version()
        except Exception as exc:  # any failure to answer means: not ready
            log.warning("the store did not answer the readiness check: %r", exc)
            raise TidingsError(
                ErrorCode.UNAVAILABLE, detail=f"the store does not answer: {exc!r}"[:300]
            ) from None

    async def gauges(self, per_subscriber: bool = False) -> Snapshot:
        """The gauges for a metrics scrape: the subscriptions held here, and the queues
        (the deepest ones by subscriber id only when asked: the admin's scrape)."""
        now = self.clock()
        cap = self.metrics.per_subscriber_cap
        totals, oldest = await self.store.queue_totals(now)
        deepest = await self.store.deepest_queues(now, cap) if per_subscriber else []
        return Snapshot(
            subscribers=await self.store.count_subscribers(),
            subscriptions=self.index.counts(),
            ready=totals.ready,
            leased=totals.leased,
            dead=totals.dead,
            oldest_age_s=0.0 if oldest is None else max(0.0, now - oldest),
            queues=[
                QueueGauge(q.subscriber_id, q.ready, q.leased, max(0.0, now - q.oldest_enqueued_at))
                for q in deepest
            ],
        )
