"""The Matcher: add / remove / match / match_batch over topic and content subscriptions.

It composes two indexes behind one interface: a `TopicIndex` (exact names by hash, patterns
by a trie, recent answers cached) and a content index (predicates indexed per attribute), and
maps each subscription id to its subscriber. Function subscriptions are not matched here:
they run in the sandbox (see `tidings.sandbox`).
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from operator import itemgetter
from typing import Protocol

import numpy as np

from tidings.matching.content import ContentIndex
from tidings.matching.semantics import conjunction_holds
from tidings.matching.topics import DEFAULT_CACHE_SIZE, TopicIndex
from tidings.model import Predicate, Scalar


@dataclass(frozen=True, slots=True)
class Event:
    """What matching sees of a publication."""

    topics: tuple[str, ...] = ()
    attributes: Mapping[str, Scalar] | None = None


# subscriber id -> ids of that subscriber's subscriptions that matched, sorted.
Matches = dict[str, list[str]]
_NO_ATTRIBUTES: Mapping[str, Scalar] = {}


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
    return ContentIndex()


class Matcher:
    """Topic and content matching. Subscriptions are keyed by id; each belongs to a subscriber."""

    def __init__(
        self,
        *,
        topic_cache_size: int = DEFAULT_CACHE_SIZE,
        content: ContentMatcher | None = None,
    ) -> None:
        self._owner: dict[str, str] = {}  # subscription id -> subscriber id
        self._owner_by_slot: list[str] = []  # topic index slot -> subscriber id
        self._topics = TopicIndex(cache_size=topic_cache_size)
        self._content = content if content is not None else default_content_index()

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
        return self._answer(self._topic_slots(event.topics), content)

    def match_batch(self, events: Sequence[Event]) -> list[Matches]:
        """Match many events at once; the content index sees the whole batch in one call."""
        if self._content:
            batch = [e.attributes or _NO_ATTRIBUTES for e in events]
            contents = self._content.match_batch(batch)
        else:
            contents = [[] for _ in events]
        return [
            self._answer(self._topic_slots(e.topics), c)
            for e, c in zip(events, contents, strict=True)
        ]

    def _topic_slots(self, topics: Sequence[str]) -> list[int]:
        if not topics or not self._topics:
            return []
        if len(topics) == 1:
            return self._topics.match_slots(topics[0]).tolist()  # type: ignore[no-any-return]
        parts = [self._topics.match_slots(t) for t in topics]
        return np.unique(np.concatenate(parts)).tolist()  # type: ignore[no-any-return]

    def _answer(self, slots: list[int], content_ids: Iterable[str]) -> Matches:
        out: Matches = {}
        for owner, sid in zip(*self._owners_and_ids(slots), strict=True):
            found = out.get(owner)
            if found is None:
                out[owner] = [sid]
            else:
                found.append(sid)
        for sid in content_ids:
            out.setdefault(self._owner[sid], []).append(sid)
        for ids in out.values():
            if len(ids) > 1:
                ids.sort()
        return out

    def _owners_and_ids(self, slots: list[int]) -> tuple[Sequence[str], Sequence[str]]:
        # Memory-bound at scale: each matched id costs cache misses, and fetching all of them
        # in one C loop (itemgetter) lets those misses overlap; about 3x faster than one by one.
        if len(slots) < 2:
            if not slots:
                return (), ()
            return (self._owner_by_slot[slots[0]],), (self._topics.id_of(slots[0]),)
        fetch = itemgetter(*slots)
        return fetch(self._owner_by_slot), fetch(self._topics.ids)
