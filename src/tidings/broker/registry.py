"""Subscribers and their subscriptions: registered and subscribed (within the keys and
quotas, then indexed), looked up, and undone. The store holds them; the index follows."""

from __future__ import annotations

from collections.abc import Callable

from tidings.broker.access import Access
from tidings.broker.auth import Authenticator
from tidings.broker.following import Following
from tidings.broker.functions import FunctionMatching
from tidings.broker.index import SubscriptionIndex
from tidings.broker.quotas import Held, Quotas
from tidings.errors import ErrorCode, TidingsError
from tidings.ids import hash_token, new_id, new_token
from tidings.metrics import Metrics
from tidings.model import FunctionSpec, Predicate, Subscriber, Subscription, SubscriptionKind
from tidings.store.asyncstore import AsyncStore


class Registry:
    def __init__(
        self,
        store: AsyncStore,
        access: Access,
        quotas: Quotas,
        auth: Authenticator,
        index: SubscriptionIndex,
        following: Following,
        functions: FunctionMatching,
        metrics: Metrics,
        clock: Callable[[], float],
    ) -> None:
        self.store, self.access, self.quotas, self.auth = store, access, quotas, auth
        self.index, self.following, self.functions = index, following, functions
        self.metrics, self.clock = metrics, clock

    # ---------------------------------------------------------------- subscribers

    async def register(
        self,
        ephemeral: bool = False,
        client: str = "",
        key: str | None = None,
        simulation: str | None = None,
    ) -> tuple[Subscriber, str]:
        """A new subscriber and its token; `client`, the caller's address, is rate-limited;
        `key`, the bearer token it gave, is checked when registering needs one; a
        `simulation`'s subscriber is marked as its."""
        self.access.check_register(key)
        self.quotas.check_register(client)
        token = new_token()
        subscriber = Subscriber(new_id(), hash_token(token), self.clock())
        await self.store.add_subscriber(subscriber, ephemeral, simulation)
        self.auth.registered(subscriber)
        self.metrics.inc("subscribers_registered_total")
        return subscriber, token

    async def subscriber(self, subscriber_id: str) -> Subscriber:
        found = await self.store.get_subscriber(subscriber_id)
        if found is None:
            raise TidingsError(ErrorCode.SUBSCRIBER_NOT_FOUND, id=subscriber_id)
        return found

    async def unregister(self, subscriber_id: str) -> None:
        owned = await self.store.list_subscriptions(subscriber_id)
        if not await self.store.remove_subscriber(subscriber_id):
            raise TidingsError(ErrorCode.SUBSCRIBER_NOT_FOUND, id=subscriber_id)
        self.following.unindex_many([sub.id for sub in owned])
        self.auth.forget(subscriber_id)

    # ---------------------------------------------------------------- subscriptions

    async def subscribe(
        self,
        subscriber_id: str,
        kind: SubscriptionKind,
        topics: tuple[str, ...] = (),
        predicates: tuple[Predicate, ...] = (),
        function: FunctionSpec | None = None,
    ) -> Subscription:
        sub = Subscription(
            new_id(), subscriber_id, kind, topics, predicates, function, self.clock()
        )
        held = Held(self.index.needle_chars, self.index.subscription_bytes)
        await self.quotas.check_subscribe(sub, held)
        if function is not None:
            self.functions.validate(function)
        await self.store.add_subscription(sub)
        self.following.index_one(sub)
        return sub

    async def subscriptions(
        self, subscriber_id: str, after: str = "", limit: int = 100
    ) -> list[Subscription]:
        """A page of the subscriber's subscriptions, in id order after `after`."""
        return await self.store.subscriptions_page(subscriber_id, after, limit)

    async def subscription(self, subscriber_id: str, subscription_id: str) -> Subscription:
        sub = await self.store.get_subscription(subscription_id)
        if sub is None or sub.subscriber_id != subscriber_id:
            raise TidingsError(ErrorCode.SUBSCRIPTION_NOT_FOUND, id=subscription_id)
        return sub

    async def unsubscribe(self, subscriber_id: str, subscription_id: str) -> None:
        await self.subscription(subscriber_id, subscription_id)
        await self.store.remove_subscription(subscription_id)
        self.following.unindex(subscription_id)

    async def resume(self, subscriber_id: str, subscription_id: str) -> Subscription:
        await self.subscription(subscriber_id, subscription_id)
        await self.functions.set_status(subscription_id, "active", None)
        return await self.subscription(subscriber_id, subscription_id)
