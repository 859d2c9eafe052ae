"""The broker's life cycle: start and close, the store's watch, and the background tasks
every collaborator spawns through it (cancelled together at close). Serverless, nothing
runs in the background: a request `freshen`s first and `finish`es what it started."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any

from tidings.broker.auth import Authenticator
from tidings.broker.following import Following
from tidings.broker.functions import FunctionMatching
from tidings.broker.housekeeping import Household, Housekeeping
from tidings.broker.publishing import Deliveries
from tidings.broker.routing import Routing
from tidings.broker.telemetry import Telemetry
from tidings.config import Settings
from tidings.matching import kernels
from tidings.sandbox import FunctionRunner
from tidings.store.asyncstore import AsyncStore
from tidings.store.base import Change


class Lifecycle:
    def __init__(
        self,
        settings: Settings,
        store: AsyncStore,
        routing: Routing,
        deliveries: Deliveries,
        following: Following,
        functions: FunctionMatching,
        housekeeping: Housekeeping,
        auth: Authenticator,
        telemetry: Telemetry,
        runner: FunctionRunner | None,
        clock: Callable[[], float],
    ) -> None:
        self.settings, self.store, self.routing = settings, store, routing
        self.deliveries, self.following, self.functions = deliveries, following, functions
        self.housekeeping, self.auth, self.telemetry = housekeeping, auth, telemetry
        self.runner, self.clock = runner, clock
        self.tasks: set[asyncio.Task[Any]] = set()
        self._unwatch: Callable[[], None] = lambda: None

    async def start(self, household: Household) -> None:
        if self.settings.serverless.enabled:
            await self._start_stateless()
            return
        loop = asyncio.get_running_loop()
        # watching starts before the snapshot, so no change falls between the two

        def told(change: Change) -> None:  # on the store's thread
            loop.call_soon_threadsafe(self._on_change, change)

        self._unwatch = await self.store.watch(told)
        await self.routing.start(self.deliveries.enqueued)
        await self.following.reload()
        self.spawn(asyncio.to_thread(kernels.warm_up))  # compiled once, then from disk
        self.spawn(self.housekeeping.run(household))
        self.spawn(self.functions.keep_pending(self.spawn))  # what a dead broker left
        self.spawn(self._rotate_log())

    async def _start_stateless(self) -> None:
        """Serverless: an instance is frozen between requests, so nothing runs in the
        background. Each request `freshen`s first and `finish`es the work it started; the
        chores are `housekeep`'s, which the scheduled handler calls."""
        await self.routing.start(self.deliveries.enqueued)
        await self.following.reload(now=self.clock())

    async def freshen(self) -> None:
        """Stateless, before a request: the subscriptions no staler than the bound (the
        change log's changes since, in proportion to them), and cached tokens re-read with
        them, as no other broker's deletions are told to an instance that sleeps."""
        bound = self.settings.subscriptions.staleness_s
        if await self.following.freshen(self.clock(), bound):
            self.auth.forget_all()

    async def finish(self, within_s: float) -> None:
        """Stateless, after a request: what it started (function evaluations) done before
        the instance may be frozen; what is left past `within_s` stays owed in the store, for
        the next `housekeep` to finish."""
        if self.tasks:
            await asyncio.wait(list(self.tasks), timeout=within_s)

    async def housekeep(self, household: Household, within_s: float) -> dict[str, int]:
        """Every chore once (stateless brokers' housekeeping: the scheduled handler, or
        `tidings serverless housekeeping`): what it did, by chore."""
        done = await self.housekeeping.once(household)
        done["evaluations_resumed"] = await self.functions.claim_once(self.spawn)
        await self.finish(within_s)
        return done

    async def _rotate_log(self) -> None:
        """The pipeline reads only finished log files: rotate them at their configured age
        (`log_rotate_s`, as low as 0.05 s for Spark matching), checked at least every second."""
        while True:
            await asyncio.sleep(max(0.05, min(1.0, self.settings.log_rotate_s)))
            self.telemetry.tick()

    def _on_change(self, change: Change) -> None:
        """Another broker on the shared store changed something this one caches, or its
        partitions took deliveries in (their subscribers' streams may lease now)."""
        if change.kind == "queued":
            self.deliveries.signals.notify(change.subscriber_ids)
            self.deliveries.quotas.arrived(change.subscriber_ids)
            return
        self.auth.changed(change, self.spawn)
        self.housekeeping.changed.set()

    async def close(self) -> None:
        await asyncio.to_thread(self._unwatch)
        await self.functions.release()  # a restart need not wait for this one's claims
        for task in list(self.tasks):
            task.cancel()
        for task in list(self.tasks):
            try:
                await task
            except asyncio.CancelledError:
                pass
            except Exception:  # already counted and logged by `_finished`
                continue
        if self.runner is not None:
            await self.runner.aclose()
        await self.routing.close()
        self.telemetry.close()

    def spawn(self, coro: Coroutine[Any, Any, Any]) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self.tasks.add(task)
        task.add_done_callback(self._finished)

    def _finished(self, task: asyncio.Task[Any]) -> None:
        self.tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            self.telemetry.background_failed("background task", task.exception())
