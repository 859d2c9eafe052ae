"""The stateless operations of the serverless broker, over external state.

register / unregister / subscribe / unsubscribe / publish / pull / ack: each reads and writes
the store; the only process-local state is derived and rebuildable (the subscription index,
built from the store's subscriptions at start, and wake-up signals). `Broker` composes the
collaborators that hold each policy and has none of its own (`tidings.broker`'s map).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from contextlib import AbstractAsyncContextManager
from functools import cached_property
from typing import TYPE_CHECKING

from tidings.addresses import Own
from tidings.broker.access import Access
from tidings.broker.alarms import DiskAlarm
from tidings.broker.auth import Authenticator
from tidings.broker.combining import PublishCombiner
from tidings.broker.dedup import PublisherDedup
from tidings.broker.following import Following
from tidings.broker.functions import FunctionMatching
from tidings.broker.housekeeping import Housekeeping
from tidings.broker.index import SubscriptionIndex
from tidings.broker.lifecycle import Lifecycle
from tidings.broker.overview import Overview
from tidings.broker.progress import PURPOSE, ProgressTokens
from tidings.broker.publishing import Deliveries, PublicationInput, Published, Publishing
from tidings.broker.quotas import Quotas
from tidings.broker.registry import Registry
from tidings.broker.routing import routing_for
from tidings.broker.telemetry import Telemetry
from tidings.config import Settings
from tidings.delivery.admission import Admission
from tidings.delivery.committer import Committer
from tidings.delivery.hosts import HostBudgets
from tidings.delivery.presence import Presence
from tidings.delivery.pusher import Outlet
from tidings.delivery.queues import SubscriberQueues
from tidings.delivery.sealing import sealer
from tidings.delivery.signals import Revocations, Signals
from tidings.eventlog import EventLog
from tidings.metrics import Metrics
from tidings.model import (
    JSON,
    FunctionSpec,
    Predicate,
    Subscriber,
    Subscription,
    SubscriptionKind,
)
from tidings.sandbox import FunctionRunner
from tidings.sandbox.health import FailureRule
from tidings.store.asyncstore import AsyncStore
from tidings.store.base import (
    AckResult,
    DeadLetter,
    Message,
    QueueDepth,
    QueuedPage,
    Store,
)

if TYPE_CHECKING:
    from tidings.elastic.hosting.seam import ElasticMatching

log = logging.getLogger("tidings.broker")


class Broker:
    def __init__(
        self,
        settings: Settings,
        store: Store,
        *,
        runner: FunctionRunner | None = None,
        eventlog: EventLog | None = None,
        clock: Callable[[], float] = time.time,
        admin_token_hash: str = "",
        elastic: ElasticMatching | None = None,
    ) -> None:
        self.settings, self.clock, self.elastic = settings, clock, elastic
        self.store = AsyncStore(store)
        self.metrics = Metrics()
        self.signals = Signals()
        self.revocations = Revocations()
        self.presence = Presence(settings.subscribers)
        self.index = SubscriptionIndex()
        self.telemetry = Telemetry(self.metrics, eventlog, self.index.kind_of)
        self.auth = Authenticator(
            self.store, self.presence, self.revocations, clock, admin_token_hash
        )
        # every queue operation: one commit path
        self._committer = Committer(store.apply, apply_now=store.apply_now)
        most = settings.queues.max_concurrent_ops_per_subscriber
        admission = Admission(most, lambda: self.metrics.inc("queue_ops_waited"))
        self.queues = SubscriberQueues(
            self._committer,
            settings.queues,
            self.signals,
            self.telemetry,
            clock,
            admission,
            store.may_lease,
        )
        self.access = Access(settings.access)
        disk = DiskAlarm(settings.data_dir, settings.limits.min_free_disk_bytes)
        self.quotas = Quotas(
            settings.limits, self.store, disk, self.revocations, clock, self.metrics
        )
        self.dedup = PublisherDedup(
            settings.limits.dedup_window_s, self._committer, self.store, clock
        )
        self.deliveries = Deliveries(
            self.dedup, self._committer, self.telemetry, self.signals, self.quotas
        )
        self.routing = routing_for(
            settings, self.index, self.telemetry, self.deliveries.deliver, elastic
        )
        rule = FailureRule(settings.functions.failures_to_suspend)
        self.functions = FunctionMatching(
            runner,
            self.index,
            self.store,
            self._committer,
            self.signals,
            self.telemetry,
            rule,
            clock,
            settings.queues.visibility_timeout_s,  # a claim on pending evaluations: a lease
        )
        self.publishing = Publishing(
            self.access,
            self.quotas,
            self.dedup,
            self.routing,
            self.functions,
            self.telemetry,
            clock,
        )
        self.combiner = PublishCombiner(self.publish_batch, self.access.check_publish)
        self._hosts = HostBudgets(settings.webhooks.host_bytes_per_s)  # every webhook's, shared
        self.overview = Overview(self.store, self.index, self.metrics, clock)
        self.following = Following(
            self.store, self.index, self.routing, self.metrics, self.functions.forget
        )
        self.housekeeping = Housekeeping(
            settings, self.store, self.presence, self.revocations, self.telemetry, clock
        )
        self.registry = Registry(
            self.store,
            self.access,
            self.quotas,
            self.auth,
            self.index,
            self.following,
            self.functions,
            self.metrics,
            clock,
        )
        self.lifecycle = Lifecycle(
            settings,
            self.store,
            self.routing,
            self.deliveries,
            self.following,
            self.functions,
            self.housekeeping,
            self.auth,
            self.telemetry,
            runner,
            clock,
        )

    # ---------------------------------------------------------------- life cycle

    async def start(self) -> None:
        await self.lifecycle.start(self)

    async def freshen(self) -> None:
        await self.lifecycle.freshen()

    async def finish(self, within_s: float) -> None:
        await self.lifecycle.finish(within_s)

    async def housekeep(self, within_s: float) -> dict[str, int]:
        return await self.lifecycle.housekeep(self, within_s)

    async def close(self) -> None:
        await self.combiner.close()  # (before the parts its batches publish through close)
        await self.lifecycle.close()

    async def refresh(self, shared: bool) -> None:
        """Housekeeping's turn (`Following.refresh`)."""
        await self.following.refresh(shared)

    async def enforce_quotas(self, now: float) -> None:
        """Housekeeping's turn (`Quotas.enforce`)."""
        await self.quotas.enforce(now)

    def outlet(self) -> Outlet:
        """What the push channels (webhooks) need, without the broker."""
        return Outlet(
            self.queues,
            self.store,
            self.revocations,
            self.metrics,
            self.clock,
            self.settings.webhooks,
            self.settings.queues.visibility_timeout_s,
            self.settings.queues.retention_s,
            self._hosts,
            Own(self.settings.host, self.settings.port),
            sealer(self.settings),
        )

    # ---------------------------------------------------------------- subscribers

    async def register(
        self,
        ephemeral: bool = False,
        client: str = "",
        key: str | None = None,
        simulation: str | None = None,
    ) -> tuple[Subscriber, str]:
        return await self.registry.register(ephemeral, client, key, simulation)

    async def authenticate(self, subscriber_id: str, token: str | None) -> None:
        await self.auth.authenticate(subscriber_id, token)

    def authenticate_admin(self, token: str | None) -> None:
        self.auth.authenticate_admin(token)

    async def subscriber(self, subscriber_id: str) -> Subscriber:
        return await self.registry.subscriber(subscriber_id)

    async def unregister(self, subscriber_id: str) -> None:
        await self.registry.unregister(subscriber_id)

    # ---------------------------------------------------------------- subscriptions

    async def subscribe(
        self,
        subscriber_id: str,
        kind: SubscriptionKind,
        topics: tuple[str, ...] = (),
        predicates: tuple[Predicate, ...] = (),
        function: FunctionSpec | None = None,
    ) -> Subscription:
        return await self.registry.subscribe(subscriber_id, kind, topics, predicates, function)

    async def subscriptions(
        self, subscriber_id: str, after: str = "", limit: int = 100
    ) -> list[Subscription]:
        return await self.registry.subscriptions(subscriber_id, after, limit)

    async def subscription(self, subscriber_id: str, subscription_id: str) -> Subscription:
        return await self.registry.subscription(subscriber_id, subscription_id)

    async def unsubscribe(self, subscriber_id: str, subscription_id: str) -> None:
        await self.registry.unsubscribe(subscriber_id, subscription_id)

    async def resume(self, subscriber_id: str, subscription_id: str) -> Subscription:
        return await self.registry.resume(subscriber_id, subscription_id)

    def suspended(self) -> list[Subscription]:
        return self.functions.suspended()

    def subscription_counts(self) -> dict[str, int]:
        """Subscriptions held by this broker, by kind."""
        return self.index.counts()

    # ---------------------------------------------------------------- publishing

    async def publish(self, item: PublicationInput, key: str | None = None) -> Published:
        """Published with the single publishes that come in the same turn of the event loop
        with the same key, as one batch (`tidings.broker.combining`)."""
        return await self.combiner.publish(item, key)

    async def publish_batch(
        self, items: Sequence[PublicationInput], key: str | None = None
    ) -> list[Published]:
        """Each answer with its progress token: the publisher's alone to read its progress."""
        return await self.publishing.batch(
            items, key, self.lifecycle.spawn, self.progress_tokens.token
        )

    @cached_property
    def progress_tokens(self) -> ProgressTokens:
        """Keyed by the secrets key (read or made at the first publish, not at start)."""
        return ProgressTokens(sealer(self.settings).derived(PURPOSE))

    async def publish_per_topic(
        self,
        data: JSON,
        topics: tuple[str, ...],
        dedup_id: str | None = None,
        key: str | None = None,
    ) -> Published:
        return await self.publishing.per_topic(data, topics, dedup_id, key, self.lifecycle.spawn)

    async def progress(
        self, publication_id: str, token: str | None, bearer: str | None = None
    ) -> tuple[bool, int]:
        """Whether function evaluations of a publication are still owed, and its deliveries
        so far; for its publisher (the `token` its publish answer gave) or the admin. Any other
        caller hears what an unknown id answers (no store read either way: no timing tells a
        known id from an unknown one)."""
        if not (self.progress_tokens.valid(publication_id, token) or self.auth.is_admin(bearer)):
            return False, 0
        return await self.store.publication_progress(publication_id)

    # ---------------------------------------------------------------- receiving

    async def pull(
        self,
        subscriber_id: str,
        max_messages: int,
        wait_s: float,
        visibility_s: float | None = None,
        max_bytes: int | None = None,
    ) -> list[Message]:
        """`max_bytes`: the leased bodies' bytes, at most (the first message always)."""
        return await self.queues.pull(subscriber_id, max_messages, wait_s, visibility_s, max_bytes)

    async def ack(self, subscriber_id: str, receipts: Sequence[str]) -> AckResult:
        return await self.queues.ack(subscriber_id, receipts)

    async def nack(
        self, subscriber_id: str, receipts: Sequence[str], delay_s: float = 0.0
    ) -> AckResult:
        return await self.queues.nack(subscriber_id, receipts, delay_s)

    async def release(self, subscriber_id: str, receipts: Sequence[str]) -> AckResult:
        return await self.queues.release(subscriber_id, receipts)

    async def reject(self, subscriber_id: str, message: Message, reason: str) -> None:
        await self.queues.reject(subscriber_id, message, reason)

    async def depth(self, subscriber_id: str) -> QueueDepth:
        return await self.store.depth(subscriber_id, self.clock())

    def turn(self, subscriber_id: str) -> AbstractAsyncContextManager[None]:
        """One of the subscriber's turns at queue work (`queues.max_concurrent_ops_per_subscriber`
        at once; docs/operations.md)."""
        return self.queues.admission.turn(subscriber_id)

    async def dead_letters(self, subscriber_id: str, limit: int) -> list[DeadLetter]:
        async with self.queues.admission.turn(subscriber_id):
            return await self.store.dead_letters(subscriber_id, limit)

    async def browse(self, subscriber_id: str, after: int, limit: int) -> QueuedPage:
        """The queue's waiting messages, read without leasing them."""
        async with self.queues.admission.turn(subscriber_id):
            return await self.store.browse(subscriber_id, after, limit, self.clock())

    async def purge(self, subscriber_id: str) -> int:
        """Delete the queue's waiting messages; leased ones stay with their holders."""
        async with self.queues.admission.turn(subscriber_id):
            return await self.store.purge(subscriber_id, self.clock())

    async def redrive(self, subscriber_id: str, ids: Sequence[int] | None) -> int:
        async with self.queues.admission.turn(subscriber_id):
            moved = await self.store.redrive(subscriber_id, ids, self.clock())
        self.signals.notify([subscriber_id])
        return moved
