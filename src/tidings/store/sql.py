"""The Store over SQL, shared by SQLite and PostgreSQL: the rooms, put together.

Each part of the `Store` protocol lives in a room of its own, all running over one
`Database` (the engine's dialect and transactions):
- `schema.py`: the tables, their version, migrations;
- `records.py`: subscribers (and when each was last seen) and subscriptions;
- `queues.py` (with `enqueue.py` and `bodies.py`): the queue operations and `apply`, dead
  letters, redrive, expiry, bodies stored once and swept;
- `browse.py`: a queue's waiting messages read without leasing them, and purged;
- `stats.py`: queue depths and totals; `endpoints.py`: webhook endpoints;
- `dedup.py`: publishers' dedup ids, claimed in the step that enqueues (`PublishOnce`).
- `pending.py`: function evaluations a publication still owes; `progress.py`: whether it
  still owes them, and its deliveries so far.
`SQLStore` only hands each call to its room; the engines (`sqlite.py`, `postgres.py`) add
connections and, for PostgreSQL, the change feed between brokers.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, Literal

from tidings.model import Subscriber, Subscription
from tidings.store.base import (
    Ack,
    AckResult,
    Change,
    DeadLetter,
    Endpoint,
    EndpointState,
    Enqueue,
    Lease,
    Message,
    Nack,
    NewMessage,
    Origin,
    PendingEvaluation,
    QueueDepth,
    QueuedPage,
    QueueOp,
    QueueStats,
    Reject,
    SubscriberRecord,
    SubscriptionChanges,
)
from tidings.store.bodies import sweep_bodies
from tidings.store.browse import Browsing
from tidings.store.database import Database
from tidings.store.dedup import DedupIds
from tidings.store.endpoints import Endpoints
from tidings.store.pending import Pending
from tidings.store.progress import publication_progress
from tidings.store.queues import Queues
from tidings.store.records import Subscribers, Subscriptions
from tidings.store.schema import Schema
from tidings.store.stats import QueueCounts


class SQLStore:
    """The Store over a `Database`; every call is one transaction."""

    def __init__(self, db: Database) -> None:
        self.db = db
        self._schema = Schema(db)
        self._subscribers = Subscribers(db)
        self._subscriptions = Subscriptions(db)
        self._queues = Queues(db)
        self._browsing = Browsing(db)
        self._counts = QueueCounts(db)
        self._endpoints = Endpoints(db)
        self._pending = Pending(db)

    def create_schema(self, now: float | None = None) -> None:
        """Bring the tables to the current version (the engines do it when opening)."""
        self._schema.create(now)

    def close(self) -> None:
        """Release connections; the engines override it."""

    def watch(self, on_change: Callable[[Change], None]) -> Callable[[], None]:
        """No other process shares this store's caches: nothing to watch."""
        return lambda: None

    # ---- subscribers

    def add_subscriber(
        self, subscriber: Subscriber, ephemeral: bool = False, simulation: str | None = None
    ) -> None:
        self._subscribers.add(subscriber, ephemeral, simulation)

    def get_subscriber(self, subscriber_id: str) -> Subscriber | None:
        return self._subscribers.get(subscriber_id)

    def token_owner(self, token_hash: str) -> str | None:
        return self._subscribers.owner(token_hash)

    def remove_subscriber(self, subscriber_id: str) -> bool:
        return self._subscribers.remove(subscriber_id)

    def count_subscribers(self) -> int:
        return self._subscribers.count()

    def touch(self, seen: Mapping[str, float]) -> None:
        self._subscribers.touch(seen)

    def subscribers_page(
        self, after: str, limit: int, origin: Origin = "all"
    ) -> list[SubscriberRecord]:
        return self._subscribers.page(after, limit, origin)

    def idle_subscribers(self, idle_before: float, ephemeral_before: float) -> list[str]:
        return self._subscribers.idle(idle_before, ephemeral_before)

    # ---- subscriptions

    def add_subscription(self, subscription: Subscription) -> None:
        self._subscriptions.add(subscription)

    def get_subscription(self, subscription_id: str) -> Subscription | None:
        return self._subscriptions.get(subscription_id)

    def list_subscriptions(self, subscriber_id: str) -> list[Subscription]:
        return self._subscriptions.of(subscriber_id)

    def subscriptions_page(self, subscriber_id: str, after: str, limit: int) -> list[Subscription]:
        return self._subscriptions.page(subscriber_id, after, limit)

    def count_subscriptions(self, subscriber_id: str) -> int:
        return self._subscriptions.count(subscriber_id)

    def subscription_usage(self, subscriber_id: str) -> tuple[int, int]:
        return self._subscriptions.usage(subscriber_id)

    def remove_subscription(self, subscription_id: str) -> bool:
        return self._subscriptions.remove(subscription_id)

    def set_subscription_status(
        self, subscription_id: str, status: Literal["active", "suspended"], reason: str | None
    ) -> bool:
        return self._subscriptions.set_status(subscription_id, status, reason)

    def all_subscriptions(self) -> list[Subscription]:
        return self._subscriptions.snapshot()[1]

    def snapshot(self) -> tuple[int, list[Subscription]]:
        return self._subscriptions.snapshot()

    def iter_subscriptions(self, page: int = 10_000) -> Iterator[Subscription]:
        return self._subscriptions.iterate(page)

    def subscriptions_version(self) -> int:
        return self._subscriptions.version()

    def subscription_changes(self, since: int) -> SubscriptionChanges | None:
        return self._subscriptions.changes_since(since)

    def prune_subscription_changes(self, keep: int) -> int:
        return self._subscriptions.prune_changes(keep)

    # ---- queues

    def apply(self, ops: Sequence[QueueOp]) -> list[Any]:
        return self._queues.apply(ops)

    def _one(self, op: QueueOp) -> Any:
        """One queue operation in a transaction of its own (what `enqueue`, `lease`, `ack`,
        `nack` and `reject` are); another layout of the queues answers it instead."""
        return self._queues.one(op)

    def enqueue(self, messages: Sequence[NewMessage], fresh: bool = False) -> int:
        return int(self._one(Enqueue(messages, fresh))) if messages else 0

    def lease(
        self,
        subscriber_id: str,
        max_messages: int,
        visibility_s: float,
        max_attempts: int,
        now: float,
    ) -> list[Message]:
        leased: list[Message] = self._one(
            Lease(subscriber_id, max_messages, visibility_s, max_attempts, now)
        )
        return leased

    def apply_now(self, ops: Sequence[QueueOp]) -> list[Any] | None:
        return None  # rows: a worker thread's (the log layout on SQLite runs them at once)

    def may_lease(self, subscriber_id: str, now: float) -> bool:
        return True  # rows: only a statement tells

    def ack(self, subscriber_id: str, receipts: Sequence[str]) -> AckResult:
        result: AckResult = self._one(Ack(subscriber_id, receipts))
        return result

    def nack(
        self, subscriber_id: str, receipts: Sequence[str], now: float, delay_s: float = 0.0
    ) -> AckResult:
        result: AckResult = self._one(Nack(subscriber_id, receipts, now, delay_s))
        return result

    def reject(self, subscriber_id: str, receipt: str, reason: str, now: float) -> bool:
        """Dead-letter one leased message, by its current receipt, with `reason` (a message
        that cannot be served); False when the receipt is no longer current."""
        return bool(self._one(Reject(subscriber_id, receipt, reason, now)))

    def dead_letters(self, subscriber_id: str, limit: int = 100) -> list[DeadLetter]:
        return self._queues.dead_letters(subscriber_id, limit)

    def redrive(self, subscriber_id: str, ids: Sequence[int] | None, now: float) -> int:
        return self._queues.redrive(subscriber_id, ids, now)

    def browse(self, subscriber_id: str, after: int, limit: int, now: float) -> QueuedPage:
        return self._browsing.page(subscriber_id, after, limit, now)

    def purge(self, subscriber_id: str, now: float) -> int:
        return self._browsing.purge(subscriber_id, now)

    def expire(self, now: float, retention_s: float) -> int:
        return self._queues.expire(now, retention_s)

    def queue_size(self, subscriber_id: str) -> tuple[int, int]:
        return self._queues.size(subscriber_id)

    def trim_queue(self, subscriber_id: str, max_messages: int, max_bytes: int, now: float) -> int:
        return self._queues.trim(subscriber_id, max_messages, max_bytes, now)

    def sweep_bodies(self) -> int:
        return sweep_bodies(self.db)

    # ---- pending function evaluations

    def claim_pending(
        self, claimant: str, now: float, until: float, limit: int
    ) -> list[PendingEvaluation]:
        return self._pending.claim(claimant, now, until, limit)

    def renew_pending(self, claimant: str, publication_ids: Sequence[str], until: float) -> int:
        return self._pending.renew(claimant, publication_ids, until)

    def publication_progress(self, publication_id: str) -> tuple[bool, int]:
        return publication_progress(self.db, publication_id)

    # ---- counts

    def depth(self, subscriber_id: str, now: float) -> QueueDepth:
        return self._counts.depth(subscriber_id, now)

    def queue_totals(self, now: float) -> tuple[QueueDepth, float | None]:
        return self._counts.totals(now)

    def deepest_queues(self, now: float, limit: int) -> list[QueueStats]:
        return self._counts.deepest(now, limit)

    # ---- push endpoints (webhooks)

    def set_endpoint(self, subscriber_id: str, endpoint: Endpoint | None) -> bool:
        return self._endpoints.set(subscriber_id, endpoint)

    def get_endpoint(self, subscriber_id: str) -> Endpoint | None:
        return self._endpoints.get(subscriber_id)

    def endpoints(self) -> list[Endpoint]:
        return self._endpoints.all()

    def set_endpoint_state(
        self,
        subscriber_id: str,
        state: EndpointState,
        reason: str | None,
        failures: int,
        now: float,
    ) -> bool:
        return self._endpoints.set_state(subscriber_id, state, reason, failures, now)

    # ---- publishers' dedup ids (claimed by PublishOnce, in `apply`)
    def prune_dedup_ids(self, now: float) -> int:
        return DedupIds(self.db).prune(now)
