"""Webhooks: a push channel beside the WebSocket, as Pub/Sub push or SNS HTTP subscriptions.

A subscriber sets an endpoint URL; this broker runs one `Pusher` (tidings.delivery.pusher)
per endpoint, POSTing its queue in signed batches (a paused one is probed, and resumes by
itself once it answers). `Webhooks` keeps the pushers in
line with the endpoints: the API's calls (set, delete, resume) act at once, and the store is
read again every `SYNC_S` for what other brokers sharing it changed (an endpoint set, paused
or deleted there). Every broker on a shared store pushes every active endpoint: the queue's
leases keep them from sending the same message twice at once.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import random
from dataclasses import replace

from tidings.delivery.pusher import Outlet, Pusher
from tidings.delivery.signature import new_secret
from tidings.errors import ErrorCode, TidingsError
from tidings.store.base import Endpoint

log = logging.getLogger("tidings.webhooks")
SYNC_S = 5.0
SYNC_READS = 5  # reads of the endpoints per round, each spoilt by a change made meanwhile


def no_webhook(subscriber_id: str) -> TidingsError:
    return TidingsError(ErrorCode.NOT_FOUND, detail=f"subscriber {subscriber_id} has no webhook")


class Webhooks:
    def __init__(self, outlet: Outlet) -> None:
        self.outlet = outlet
        self.store = outlet.store
        self.settings = outlet.settings
        self.rng = random.Random()
        self._running: dict[str, tuple[Pusher, asyncio.Task[None]]] = {}
        self._changes = 0  # endpoint changes made here: a store read across one is stale
        self._syncing: asyncio.Task[None] | None = None
        # pushers run only once started: a stateless broker's API calls store the endpoint,
        # and its scheduled handler pushes (`push_for`)
        self._pushing = False

    # ---------------------------------------------------------------- life cycle

    async def start(self) -> None:
        self._pushing = True
        await self.sync()
        self._syncing = asyncio.get_running_loop().create_task(self._keep_in_sync())

    async def close(self) -> None:
        """Stop every pusher (each releases what it holds) and the periodic sync."""
        tasks = [task for _, task in self._running.values()]
        if self._syncing is not None:
            tasks.append(self._syncing)
        self._pushing = False
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self._running.clear()

    async def push_for(self, within_s: float) -> None:
        """A stateless broker's turn (the scheduled handler): every active endpoint pushed
        until no pushed queue holds a message ready or leased, or `within_s` has passed;
        then every pusher stopped, releasing what it holds."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + within_s
        self._pushing = True
        await self.sync()
        try:
            while loop.time() < deadline and await self._owing():
                await asyncio.sleep(min(0.25, max(0.0, deadline - loop.time())))
        finally:
            await self.close()

    async def _owing(self) -> bool:
        now = self.outlet.clock()
        for subscriber_id in list(self._running):
            depth = await self.store.depth(subscriber_id, now)
            if depth.ready or depth.leased:
                return True
        return False

    # ---------------------------------------------------------------- the API's calls

    async def endpoint(self, subscriber_id: str) -> Endpoint | None:
        stored = await self.store.get_endpoint(subscriber_id)
        return None if stored is None else self._opened(stored)

    async def configure(
        self, subscriber_id: str, url: str, retention_s: float | None = None
    ) -> Endpoint:
        """Set (or replace) the endpoint's URL and retention (None: the queues'), active;
        its secret is kept, or made."""
        current = await self.endpoint(subscriber_id)
        secret = current.secret if current is not None else new_secret()
        endpoint = Endpoint(
            subscriber_id, url, secret, updated_at=self.outlet.clock(), retention_s=retention_s
        )
        self._changed()
        if not await self.store.set_endpoint(subscriber_id, self._sealed(endpoint)):
            raise TidingsError(ErrorCode.SUBSCRIBER_NOT_FOUND, id=subscriber_id)
        self._apply(subscriber_id, endpoint)
        return endpoint

    async def remove(self, subscriber_id: str) -> None:
        self._changed()
        if not await self.store.set_endpoint(subscriber_id, None):
            raise no_webhook(subscriber_id)
        self._apply(subscriber_id, None)

    async def resume(self, subscriber_id: str) -> Endpoint:
        """Active again, its failures forgotten, at once: its backlog is pushed from now on
        (a paused endpoint also resumes by itself once a probe succeeds)."""
        self._changed()
        now = self.outlet.clock()
        if not await self.store.set_endpoint_state(subscriber_id, "active", None, 0, now):
            raise no_webhook(subscriber_id)
        endpoint = await self.endpoint(subscriber_id)
        if endpoint is None:
            raise no_webhook(subscriber_id)
        await self.outlet.queue.hasten(subscriber_id)  # none waits out its backoff
        self._apply(subscriber_id, endpoint)
        return endpoint

    # ---------------------------------------------------------------- secrets at rest

    def _sealed(self, endpoint: Endpoint) -> Endpoint:
        sealer = self.outlet.sealer
        return (
            endpoint if sealer is None else replace(endpoint, secret=sealer.seal(endpoint.secret))
        )

    def _opened(self, stored: Endpoint) -> Endpoint:
        sealer = self.outlet.sealer
        return stored if sealer is None else replace(stored, secret=sealer.open(stored.secret))

    # ---------------------------------------------------------------- pushers

    def _changed(self) -> None:
        self._changes += 1

    async def sync(self) -> None:
        """Bring the pushers in line with the stored endpoints."""
        for _ in range(SYNC_READS):
            seen = self._changes
            endpoints = await self.store.endpoints()
            if seen == self._changes:  # else one changed here meanwhile: read again
                break
        else:
            return  # changing faster than it can be read: the next round
        wanted = {}
        for stored in endpoints:
            try:
                wanted[stored.subscriber_id] = self._opened(stored)
            except TidingsError as e:  # sealed with another broker's key: not pushed here
                self.outlet.metrics.inc("background_errors_total")
                log.error("webhook of %s: %s", stored.subscriber_id, e.message)
        for subscriber_id in set(self._running) | set(wanted):
            self._apply(subscriber_id, wanted.get(subscriber_id))

    async def _keep_in_sync(self) -> None:
        while True:
            await asyncio.sleep(SYNC_S)
            try:
                await self.sync()
            except Exception:  # the store restarting, say: the next round tries again
                self.outlet.metrics.inc("background_errors_total")
                log.exception("reading the webhook endpoints failed; trying again shortly")

    def _apply(self, subscriber_id: str, endpoint: Endpoint | None) -> None:
        """A pusher for `endpoint`, none without one; one pushing to another URL, with
        another secret or retention, or probing an endpoint resumed since (here, or on
        another broker) is replaced."""
        running = self._running.get(subscriber_id)
        if running is not None and (endpoint is None or _moved(running[0], endpoint)):
            running[1].cancel()  # it releases what it holds
            del self._running[subscriber_id]
            running = None
        if endpoint is not None and running is None and self._pushing:
            pusher = Pusher(self.outlet, endpoint, self.rng, self._changed)
            task = asyncio.get_running_loop().create_task(pusher.run())
            self._running[subscriber_id] = (pusher, task)
            task.add_done_callback(functools.partial(self._ended, subscriber_id))

    def _ended(self, subscriber_id: str, task: asyncio.Task[None]) -> None:
        running = self._running.get(subscriber_id)
        if running is not None and running[1] is task:
            del self._running[subscriber_id]
        if not task.cancelled() and task.exception() is not None:  # the next sync restarts it
            self.outlet.metrics.inc("background_errors_total")
            log.error("webhook pusher of %s failed", subscriber_id, exc_info=task.exception())


def _moved(pusher: Pusher, endpoint: Endpoint) -> bool:
    was = pusher.endpoint
    resumed = pusher.paused and endpoint.state == "active" and endpoint.failures == 0
    return resumed or (was.url, was.secret, was.retention_s) != (
        endpoint.url,
        endpoint.secret,
        endpoint.retention_s,
    )
