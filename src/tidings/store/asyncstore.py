"""One async face over a `Store`: what the event loop's code awaits instead of wrapping every
call in `asyncio.to_thread` itself.

Every backend is synchronous (a database driver, a file); each call here runs on a worker
thread so the event loop never waits on disk or network. Queue operations do not come this
way: they go through `tidings.delivery.committer.Committer`, which batches them into one
transaction. Whatever is not wrapped here is reached, synchronously, through `sync`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence
from typing import Literal, ParamSpec, TypeVar

from tidings.model import Subscriber, Subscription
from tidings.store.base import (
    Change,
    DeadLetter,
    Endpoint,
    EndpointState,
    Origin,
    PendingEvaluation,
    QueueDepth,
    QueuedPage,
    QueueStats,
    Store,
    SubscriberRecord,
    SubscriptionChanges,
)

P = ParamSpec("P")
T = TypeVar("T")


async def _run(call: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
    return await asyncio.to_thread(call, *args, **kwargs)


class AsyncStore:
    def __init__(self, store: Store) -> None:
        self.sync = store

    # ---- several brokers on one store
    async def watch(self, on_change: Callable[[Change], None]) -> Callable[[], None]:
        return await _run(self.sync.watch, on_change)

    async def snapshot(self) -> tuple[int, list[Subscription]]:
        return await _run(self.sync.snapshot)

    async def subscriptions_version(self) -> int:
        return await _run(self.sync.subscriptions_version)

    async def subscription_changes(self, since: int) -> SubscriptionChanges | None:
        return await _run(self.sync.subscription_changes, since)

    async def prune_subscription_changes(self, keep: int) -> int:
        return await _run(self.sync.prune_subscription_changes, keep)

    # ---- subscribers
    async def add_subscriber(
        self, subscriber: Subscriber, ephemeral: bool, simulation: str | None = None
    ) -> None:
        await _run(self.sync.add_subscriber, subscriber, ephemeral, simulation)

    async def get_subscriber(self, subscriber_id: str) -> Subscriber | None:
        return await _run(self.sync.get_subscriber, subscriber_id)

    async def token_owner(self, token_hash: str) -> str | None:
        return await _run(self.sync.token_owner, token_hash)

    async def remove_subscriber(self, subscriber_id: str) -> bool:
        return await _run(self.sync.remove_subscriber, subscriber_id)

    async def count_subscribers(self) -> int:
        return await _run(self.sync.count_subscribers)

    async def touch(self, seen: Mapping[str, float]) -> None:
        await _run(self.sync.touch, seen)

    async def subscribers_page(
        self, after: str, limit: int, origin: Origin = "all"
    ) -> list[SubscriberRecord]:
        return await _run(self.sync.subscribers_page, after, limit, origin)

    async def idle_subscribers(self, idle_before: float, ephemeral_before: float) -> list[str]:
        return await _run(self.sync.idle_subscribers, idle_before, ephemeral_before)

    # ---- subscriptions
    async def add_subscription(self, subscription: Subscription) -> None:
        await _run(self.sync.add_subscription, subscription)

    async def get_subscription(self, subscription_id: str) -> Subscription | None:
        return await _run(self.sync.get_subscription, subscription_id)

    async def list_subscriptions(self, subscriber_id: str) -> list[Subscription]:
        return await _run(self.sync.list_subscriptions, subscriber_id)

    async def subscriptions_page(
        self, subscriber_id: str, after: str, limit: int
    ) -> list[Subscription]:
        return await _run(self.sync.subscriptions_page, subscriber_id, after, limit)

    async def count_subscriptions(self, subscriber_id: str) -> int:
        return await _run(self.sync.count_subscriptions, subscriber_id)

    async def subscription_usage(self, subscriber_id: str) -> tuple[int, int]:
        return await _run(self.sync.subscription_usage, subscriber_id)

    async def remove_subscription(self, subscription_id: str) -> bool:
        return await _run(self.sync.remove_subscription, subscription_id)

    async def set_subscription_status(
        self, subscription_id: str, status: Literal["active", "suspended"], reason: str | None
    ) -> bool:
        return await _run(self.sync.set_subscription_status, subscription_id, status, reason)

    # ---- queues, read or moved outside the committer
    async def depth(self, subscriber_id: str, now: float) -> QueueDepth:
        return await _run(self.sync.depth, subscriber_id, now)

    async def queue_totals(self, now: float) -> tuple[QueueDepth, float | None]:
        return await _run(self.sync.queue_totals, now)

    async def deepest_queues(self, now: float, limit: int) -> list[QueueStats]:
        return await _run(self.sync.deepest_queues, now, limit)

    async def dead_letters(self, subscriber_id: str, limit: int) -> list[DeadLetter]:
        return await _run(self.sync.dead_letters, subscriber_id, limit)

    async def redrive(self, subscriber_id: str, ids: Sequence[int] | None, now: float) -> int:
        return await _run(self.sync.redrive, subscriber_id, ids, now)

    async def browse(self, subscriber_id: str, after: int, limit: int, now: float) -> QueuedPage:
        return await _run(self.sync.browse, subscriber_id, after, limit, now)

    async def purge(self, subscriber_id: str, now: float) -> int:
        return await _run(self.sync.purge, subscriber_id, now)

    async def expire(self, now: float, retention_s: float) -> int:
        return await _run(self.sync.expire, now, retention_s)

    async def queue_size(self, subscriber_id: str) -> tuple[int, int]:
        return await _run(self.sync.queue_size, subscriber_id)

    async def trim_queue(
        self, subscriber_id: str, max_messages: int, max_bytes: int, now: float
    ) -> int:
        return await _run(self.sync.trim_queue, subscriber_id, max_messages, max_bytes, now)

    async def sweep_bodies(self) -> int:
        return await _run(self.sync.sweep_bodies)

    # ---- pending function evaluations (recorded and removed through the committer)
    async def claim_pending(
        self, claimant: str, now: float, until: float, limit: int
    ) -> list[PendingEvaluation]:
        return await _run(self.sync.claim_pending, claimant, now, until, limit)

    async def renew_pending(
        self, claimant: str, publication_ids: Sequence[str], until: float
    ) -> int:
        return await _run(self.sync.renew_pending, claimant, publication_ids, until)

    async def publication_progress(self, publication_id: str) -> tuple[bool, int]:
        return await _run(self.sync.publication_progress, publication_id)

    # ---- webhook endpoints
    async def get_endpoint(self, subscriber_id: str) -> Endpoint | None:
        return await _run(self.sync.get_endpoint, subscriber_id)

    async def set_endpoint(self, subscriber_id: str, endpoint: Endpoint | None) -> bool:
        return await _run(self.sync.set_endpoint, subscriber_id, endpoint)

    async def set_endpoint_state(
        self,
        subscriber_id: str,
        state: EndpointState,
        reason: str | None,
        failures: int,
        now: float,
    ) -> bool:
        return await _run(self.sync.set_endpoint_state, subscriber_id, state, reason, failures, now)

    async def endpoints(self) -> list[Endpoint]:
        return await _run(self.sync.endpoints)

    # ---- publishers' dedup ids
    async def prune_dedup_ids(self, now: float) -> int:
        return await _run(self.sync.prune_dedup_ids, now)
