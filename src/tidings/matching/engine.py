"""The Matcher: add / remove / match / match_batch over topic and content subscriptions.

It composes two indexes behind one interface: a `TopicIndex` (exact names by hash, patterns
by a trie, recent answers cached) and a content index (predicates indexed per attribute), and
maps each subscription id to its subscriber. Function subscriptions are not matched here:
they run in the sandbox (see `tidings.sandbox`).
"""

from __future__ import annotations

import sys
from collections import OrderedDict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol, TypeAlias

import numpy as np

from tidings.matching.semantics import conjunction_holds
from tidings.matching.topics import DEFAULT_CACHE_SIZE, Slots, TopicIndex
from tidings.model import Predicate, Scalar


@dataclass(frozen=True, slots=True)
class Event:
    """What matching sees of a publication."""

    topics: tuple[str, ...] = ()
    attributes: Mapping[str, Scalar] | None = None


# subscriber id -> ids of that subscriber's subscriptions that matched, sorted.
Matches = dict[str, list[str]]
# A topic's answer grouped by subscriber: ((subscriber id, sorted subscription ids), ...).
Grouped: TypeAlias = tuple[tuple[str, tuple[str, ...]], ...]
_NO_ATTRIBUTES: Mapping[str, Scalar] = {}
# Grouped answers hold Python strings and tuples (about 120 bytes per matched id): keep fewer.
DEFAULT_GROUPED_CACHE_SIZE = 4096


class ContentMatcher(Protocol):
    """What the engine needs of a content index."""

    def add(self, subscription_id: str, predicates: Sequence[Predicate]) -> None: ...
    def remove(self, subscription_id: str) -> bool: ...
    def match(self, attributes: Mapping[str, Scalar]) -> list[str]: ...
    def match_batch(self, events: Sequence[Mapping[str, Scalar]]) -> list[list[str]]: ...
    def __len__(self) -> int: ...


class ScanContentIndex:
    """Tests every subscription per event with the reference semantics: the slow baseline."""

    def __init__(self) -> None:
        self._predicates: dict[str, tuple[Predicate, ...]] = {}

    def __len__(self) -> int:
        return len(self._predicates)

    def add(self, subscription_id: str, predicates: Sequence[Predicate]) -> None:
        self._predicates[subscription_id] = tuple(predicates)

    def remove(self, subscription_id: str) -> bool:
        return self._predicates.pop(subscription_id, None) is not None

    def match(self, attributes: Mapping[str, Scalar]) -> list[str]:
        return [s for s, ps in self._predicates.items() if conjunction_holds(ps, attributes)]

    def match_batch(self, events: Sequence[Mapping[str, Scalar]]) -> list[list[str]]:
        return [self.match(attributes) for attributes in events]


def default_content_index() -> ContentMatcher:
    return ScanContentIndex()


class Matcher:
    """Topic and content matching. Subscriptions are keyed by id; each belongs to a subscriber.

    Besides the topic index's own cache of slots per topic, the matcher keeps each recent
    topic's answer grouped by subscriber, valid for as long as the topic index hands back the
    very same (immutable) slots array: any add or remove that touches the topic replaces it.
    """

    def __init__(
        self,
        *,
        topic_cache_size: int = DEFAULT_CACHE_SIZE,
        grouped_cache_size: int = DEFAULT_GROUPED_CACHE_SIZE,
        content: ContentMatcher | None = None,
    ) -> None:
        self._owner: dict[str, str] = {}  # subscription id -> subscriber id
        self._owner_by_slot: list[str] = []  # topic index slot -> subscriber id
        self._topics = TopicIndex(cache_size=topic_cache_size)
        self._content = content if content is not None else default_content_index()
        self._grouped: OrderedDict[str, tuple[Slots, Grouped]] = OrderedDict()
        self._grouped_size = grouped_cache_size

    def __len__(self) -> int:
        return len(self._owner)

    def add_topic(self, subscription_id: str, subscriber_id: str, filters: Sequence[str]) -> None:
        """Index a topic subscription; an existing id (of either kind) is replaced."""
        self.remove(subscription_id)
        self._topics.add(subscription_id, filters)
        owner = self._owner[subscription_id] = sys.intern(subscriber_id)
        slot, by_slot = self._topics.slot_of(subscription_id), self._owner_by_slot
        if slot == len(by_slot):
            by_slot.append(owner)
        else:
            by_slot[slot] = owner

    def add_content(
        self, subscription_id: str, subscriber_id: str, predicates: Sequence[Predicate]
    ) -> None:
        """Index a content subscription; an existing id (of either kind) is replaced."""
        self.remove(subscription_id)
        self._content.add(subscription_id, predicates)
        self._owner[subscription_id] = sys.intern(subscriber_id)

    def remove(self, subscription_id: str) -> bool:
        """Forget a subscription; False if it was not there."""
        if self._owner.pop(subscription_id, None) is None:
            return False
        if not self._topics.remove(subscription_id):
            self._content.remove(subscription_id)
        return True

    def match(self, event: Event) -> Matches:
        content = self._content.match(event.attributes or _NO_ATTRIBUTES) if self._content else []
        return self._combine(self._topic_groups(event.topics), content)

    def match_batch(self, events: Sequence[Event]) -> list[Matches]:
        """Match many events at once; the content index sees the whole batch in one call."""
        if self._content:
            batch = [e.attributes or _NO_ATTRIBUTES for e in events]
            contents = self._content.match_batch(batch)
        else:
            contents = [[] for _ in events]
        return [
            self._combine(self._topic_groups(e.topics), c)
            for e, c in zip(events, contents, strict=True)
        ]

    def _topic_groups(self, topics: Sequence[str]) -> Grouped:
        if not topics or not self._topics:
            return ()
        if len(topics) > 1:
            parts = [self._topics.match_slots(t) for t in topics]
            return self._group(np.unique(np.concatenate(parts)))
        topic, cache = topics[0], self._grouped
        slots = self._topics.match_slots(topic)
        hit = cache.get(topic)
        if hit is not None and hit[0] is slots:
            return hit[1]
        grouped = self._group(slots)
        if self._grouped_size > 0:
            cache[topic] = (slots, grouped)
            cache.move_to_end(topic)
            if len(cache) > self._grouped_size:
                cache.popitem(last=False)
        return grouped

    def _group(self, slots: Slots) -> Grouped:
        by_slot, id_of = self._owner_by_slot, self._topics.ids
        out: dict[str, list[str]] = {}
        for slot in slots.tolist():
            found = out.get(by_slot[slot])
            if found is None:
                out[by_slot[slot]] = [id_of[slot]]
            else:
                found.append(id_of[slot])
        return tuple((who, tuple(sorted(ids))) for who, ids in out.items())

    def _combine(self, grouped: Grouped, content_ids: Iterable[str]) -> Matches:
        out = {who: list(ids) for who, ids in grouped}
        touched: set[str] = set()
        for sid in content_ids:
            who = self._owner[sid]
            out.setdefault(who, []).append(sid)
            touched.add(who)
        for who in touched:
            out[who].sort()
        return out
