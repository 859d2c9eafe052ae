"""The broker's process-local state, derived from the store's subscriptions and rebuildable
from them at any time: every subscription's kind, the topic and content `Matcher`, and the
function index (`tidings.sandbox.index`)."""

from __future__ import annotations

import asyncio
import collections
from collections.abc import Sequence

from tidings.heap import Settler
from tidings.matching.engine import Event, Matcher
from tidings.model import Publication, Subscription, SubscriptionKind, needle_chars
from tidings.sandbox.index import FunctionIndex
from tidings.store.base import Fanout, encode_body, subscription_bytes


class SubscriptionIndex:
    def __init__(self) -> None:
        self.matcher = Matcher()
        self.functions = FunctionIndex()
        self._kinds: dict[str, SubscriptionKind] = {}
        self._needles: dict[str, int] = {}  # content subscription id -> its `contains` chars
        self.needle_chars = 0  # in all: what the automata hold (`limits.max_contains_chars`)
        self._sizes: dict[str, int] = {}  # subscription id -> its stored body's bytes
        self.subscription_bytes = 0  # in all (`limits.max_subscription_bytes`)
        self._heap = Settler()

    def __len__(self) -> int:
        return len(self._kinds)

    async def load(self, subscriptions: Sequence[Subscription]) -> None:
        """Replace everything with these subscriptions."""
        self.matcher, self.functions, self._kinds = Matcher(), FunctionIndex(), {}
        self._needles, self.needle_chars = {}, 0
        self._sizes = {s.id: subscription_bytes(s) for s in subscriptions}
        self.subscription_bytes = sum(self._sizes.values())
        content = [s for s in subscriptions if s.kind == "content"]
        for sub in content:
            self._count_needles(sub)
        for sub in subscriptions:
            if sub.kind != "content":
                self.add(sub)
        # in one call: the content index's bulk path (one merge, not one per 1,024 inserts)
        self.matcher.add_contents((s.id, s.subscriber_id, s.predicates) for s in content)
        self._kinds.update((s.id, "content") for s in content)
        await asyncio.to_thread(self.matcher.wait)  # answer from the built index, not a delta
        self._heap.rebuilt()  # the old indexes are garbage now: the next settle collects them
        self.settle()

    def settle(self) -> None:
        """Keep the collector off a large index (`tidings.heap`)."""
        self._heap.check(len(self._kinds))

    def add(self, sub: Subscription) -> None:
        """Index a subscription, or index it again (its status changed)."""
        self.remove(sub.id)
        self._kinds[sub.id] = sub.kind
        size = self._sizes[sub.id] = subscription_bytes(sub)
        self.subscription_bytes += size
        if sub.kind == "topic":
            self.matcher.add_topic(sub.id, sub.subscriber_id, sub.topics)
        elif sub.kind == "content":
            self.matcher.add_content(sub.id, sub.subscriber_id, sub.predicates)
            self._count_needles(sub)
        else:
            self.functions.add(sub)

    def remove(self, subscription_id: str) -> SubscriptionKind | None:
        """Forget a subscription; its kind, None if it was not indexed."""
        kind = self._kinds.pop(subscription_id, None)
        self.needle_chars -= self._needles.pop(subscription_id, 0)
        self.subscription_bytes -= self._sizes.pop(subscription_id, 0)
        if kind in ("topic", "content"):
            self.matcher.remove(subscription_id)
        else:
            self.functions.remove(subscription_id)
        return kind

    def remove_many(self, subscription_ids: Sequence[str]) -> dict[str, SubscriptionKind]:
        """Forget these subscriptions at once (a subscriber unregistered): the matcher's
        buckets rewritten once each, not scanned once per subscription; the kinds of those
        that were indexed."""
        kinds: dict[str, SubscriptionKind] = {}
        matched: list[str] = []
        for sid in subscription_ids:
            kind = self._kinds.pop(sid, None)
            if kind is None:
                continue
            kinds[sid] = kind
            self.needle_chars -= self._needles.pop(sid, 0)
            self.subscription_bytes -= self._sizes.pop(sid, 0)
            if kind in ("topic", "content"):
                matched.append(sid)
            else:
                self.functions.remove(sid)
        self.matcher.remove_many(matched)
        return kinds

    def _count_needles(self, sub: Subscription) -> None:
        chars = sum(map(needle_chars, sub.predicates))
        if chars:
            self._needles[sub.id] = chars
            self.needle_chars += chars

    def function_ids(self) -> set[str]:
        """The function subscriptions held, active or suspended."""
        return {sid for sid, kind in self._kinds.items() if kind == "function"}

    def kind_of(self, subscription_id: str) -> SubscriptionKind | None:
        return self._kinds.get(subscription_id)

    def counts(self) -> dict[str, int]:
        """Subscriptions by kind."""
        return dict(collections.Counter(self._kinds.values()))

    def match_batch(self, pubs: Sequence[Publication]) -> list[dict[str, list[str]]]:
        """Topic and content matches of each publication: subscriber -> subscription ids."""
        if not len(self.matcher):
            return [{} for _ in pubs]
        return self.matcher.match_batch([Event(p.topics, p.attributes) for p in pubs])

    def per_topic(self, pub: Publication) -> list[Fanout]:
        """The thesis's topic publishing: a fan-out per matching topic, with its own key and
        body (`matched_topic`), reaching only topic subscriptions."""
        fanouts = []
        for topic in pub.topics:
            owners = {}
            for owner, sids in self.matcher.match(Event((topic,), None)).items():
                topical = [s for s in sids if self._kinds.get(s) == "topic"]
                if topical:
                    owners[owner] = topical
            if owners:
                body = encode_body({**pub.to_wire(), "matched_topic": topic})  # once per topic
                key = f"{pub.id}#{topic}"
                fanouts.append(Fanout(pub.id, key, body, pub.published_at, owners))
        return fanouts
