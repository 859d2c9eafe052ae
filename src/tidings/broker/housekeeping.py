"""Housekeeping: the broker's background cadence. Retention (once a minute, with the dead
letter alarm), presence (who was seen; who is gone), and, with a store shared by several
brokers, other brokers' subscription changes. A pass that fails (the store restarting, say)
is logged and counted, and the next comes after a pause: one error must not stop the loop
for good."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from typing import Protocol

from tidings.broker.alarms import DeadLetterAlarm
from tidings.broker.telemetry import Telemetry
from tidings.config import Settings
from tidings.delivery.presence import Presence
from tidings.delivery.signals import Revocations
from tidings.errors import TidingsError
from tidings.store.asyncstore import AsyncStore

log = logging.getLogger("tidings.broker")
PAUSE_S = 1.0  # after a failed pass
EXPIRE_EVERY_S = 60.0
QUOTAS_EVERY_S = 2.0  # the queues that got deliveries meanwhile are measured this often


class Household(Protocol):
    """What housekeeping asks of the broker it keeps."""

    async def unregister(self, subscriber_id: str) -> None: ...
    async def refresh(self, shared: bool) -> None:
        """Settle the heap; with a `shared` store, reload what other brokers changed."""
        ...

    async def enforce_quotas(self, now: float) -> None:
        """Bring the queues that got deliveries within their bounds."""
        ...


class Housekeeping:
    def __init__(
        self,
        settings: Settings,
        store: AsyncStore,
        presence: Presence,
        revocations: Revocations,
        telemetry: Telemetry,
        clock: Callable[[], float],
    ) -> None:
        self.settings, self.store, self.presence = settings, store, presence
        self.revocations, self.telemetry, self.clock = revocations, telemetry, clock
        self.changed = asyncio.Event()  # another broker deleted a subscriber: look now
        self.alarm = DeadLetterAlarm()

    async def run(self, household: Household) -> None:
        shared = self.settings.resolved_store_url.startswith("postgres")
        due = {"presence": 0.0, "expire": 0.0, "refresh": 0.0, "quotas": 0.0}
        every = min(1.0, self.presence.every_s, self.settings.subscriptions.staleness_s)
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.changed.wait(), every)
            if self.changed.is_set():  # another broker deleted a subscriber: look now
                due["refresh"] = 0.0
            self.changed.clear()
            try:
                await self._pass(household, shared, due)
            except Exception:
                self.telemetry.metrics.inc("background_errors_total")
                log.exception("housekeeping failed; trying again shortly")
                await asyncio.sleep(PAUSE_S)

    async def _pass(self, household: Household, shared: bool, due: dict[str, float]) -> None:
        now = self.clock()
        if now - due["presence"] >= self.presence.every_s:
            await self.keep_presence(household, now)
            due["presence"] = now
        if now - due["expire"] >= EXPIRE_EVERY_S:
            await self.expire(now)
            due["expire"] = now
        if now - due["quotas"] >= QUOTAS_EVERY_S:
            await household.enforce_quotas(now)
            due["quotas"] = now
        if now - due["refresh"] >= self.settings.subscriptions.staleness_s:
            await household.refresh(shared)
            due["refresh"] = now

    async def once(self, household: Household) -> dict[str, int]:
        """Every chore once, for a broker with no background (stateless): what each did."""
        now = self.clock()
        gone = await self.keep_presence(household, now)
        moved = await self.expire(now)
        await household.enforce_quotas(now)
        return {"subscribers_expired": gone, "messages_expired": moved}

    async def expire(self, now: float) -> int:
        """Retention: messages past it are dead-lettered, bodies nothing refers to swept,
        publishers' dedup ids past their window dropped (not only when a publish with one
        comes: a burst of ids would otherwise stay on disk for as long as none comes), and a
        warning when dead letters grew by a burst since the last look."""
        moved = await self.store.expire(now, self.settings.queues.retention_s)
        self.telemetry.metrics.inc("expired_total", moved)
        await self.store.sweep_bodies()
        await self.store.prune_dedup_ids(now)
        await self.store.prune_subscription_changes(self.settings.subscriptions.change_log_versions)
        self.alarm.look((await self.store.queue_totals(now))[0].dead)
        return moved

    async def keep_presence(self, household: Household, now: float) -> int:
        """Report who was seen; delete the subscribers that are gone (delivery.presence);
        how many went."""
        streaming = self.revocations.streaming()
        seen = self.presence.report(streaming, now)
        if seen:
            await self.store.touch(seen)
        candidates = await self.store.idle_subscribers(*self.presence.bounds(now))
        gone = 0
        for subscriber_id in self.presence.expired(candidates, streaming):
            try:
                await household.unregister(subscriber_id)
            except TidingsError:  # another broker was quicker
                continue
            gone += 1
            self.telemetry.metrics.inc("subscribers_expired")
            log.info("subscriber %s expired (ephemeral, or idle too long)", subscriber_id)
        return gone
