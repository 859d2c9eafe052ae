"""Following the store's subscriptions: the index read whole at start, then kept in line
with what changed (`Store.subscription_changes`, the change log) at each of housekeeping's
turns, so a change costs each broker work in proportion to the change, not to the index;
read whole again only when the log no longer reaches back. Every change, made here or
through another broker, goes to the index and to the routing (`index`, `unindex`); a
removal is told to `removed` as well (function matching drops the subscription's queued
calls)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from tidings.broker.index import SubscriptionIndex
from tidings.broker.routing import Routing
from tidings.metrics import Metrics
from tidings.model import Subscription
from tidings.store.asyncstore import AsyncStore


class Following:
    def __init__(
        self,
        store: AsyncStore,
        index: SubscriptionIndex,
        routing: Routing,
        metrics: Metrics,
        removed: Callable[[str], None] = lambda _: None,
    ) -> None:
        self.store, self.index, self.routing, self.metrics = store, index, routing, metrics
        self.removed = removed
        self.version = -1  # of the subscriptions the index holds
        self.read_at = float("-inf")  # when the store's subscriptions were last looked at

    def index_one(self, sub: Subscription) -> None:
        self.index.add(sub)
        self.routing.added(sub)

    def unindex(self, subscription_id: str) -> None:
        self.routing.removed(subscription_id, self.index.remove(subscription_id))
        self.removed(subscription_id)

    def unindex_many(self, subscription_ids: Sequence[str]) -> None:
        """`unindex` of each, the index's buckets rewritten once (a subscriber unregistered)."""
        kinds = self.index.remove_many(subscription_ids)
        for sid in subscription_ids:
            self.routing.removed(sid, kinds.get(sid))
            self.removed(sid)

    async def reload(self, now: float | None = None) -> None:
        """Rebuild the derived state from the store's subscriptions."""
        if now is not None:
            self.read_at = now
        version, subscriptions = await self.store.snapshot()
        held = self.index.function_ids()
        await self.index.load(subscriptions)
        for gone in held - self.index.function_ids():
            self.removed(gone)
        self.routing.loaded(subscriptions)
        self.version = version
        self.metrics.inc("subscription_reloads_total")

    async def freshen(self, now: float, bound_s: float) -> bool:
        """A stateless broker's turn, at each request: the index as it was held (a hit)
        while younger than `bound_s`, else brought up to date from the change log (a miss);
        whether it was a miss."""
        if now - self.read_at < bound_s:
            self.metrics.inc("subscription_cache_hits_total")
            return False
        self.read_at = now
        self.metrics.inc("subscription_cache_misses_total")
        await self.refresh(shared=True)
        return True

    async def refresh(self, shared: bool) -> None:
        """Housekeeping's turn: settle the heap; with a shared store, apply what changed
        since the version held, or read everything anew behind the change log."""
        self.index.settle()
        if not shared or await self.store.subscriptions_version() == self.version:
            return
        changes = await self.store.subscription_changes(self.version)
        if changes is None:
            await self.reload()
            return
        for changed in changes.changed:
            if isinstance(changed, str):  # gone
                self.unindex(changed)
            else:
                self.index_one(changed)
        self.version = changes.version
        self.metrics.inc("subscription_changes_applied_total", len(changes.changed))
