"""The Matcher: add / remove / match / match_batch over topic and content subscriptions.

It composes two indexes behind one interface: a `TopicIndex` (exact names by hash, patterns
by a trie, recent answers cached) and a content index (predicates indexed per attribute), and
maps each subscription id to its subscriber. Function subscriptions are not matched here:
they run in the sandbox (see `tidings.sandbox`).

Publications repeat topics, and grouping a topic's matches by subscriber costs far more than
finding them, so the grouped answer for one topic is kept in a bounded LRU cache, with the
topic index's invalidation rule (a change to an exact filter drops that topic, a change to a
pattern clears the cache). Answers are therefore shared: callers must not mutate them. The
cache is bounded by topics and by the matches it holds in total (`answer_cache_matches`): every
cached match is a Python list the garbage collector walks.

A Matcher is used from one thread at a time: answers are named and grouped after the content
index has answered, so a write from another thread in between could move a slot under them.
"""

from __future__ import annotations

import sys
import weakref
from collections import OrderedDict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import reduce
from operator import itemgetter
from typing import Protocol, runtime_checkable

import numpy as np

from tidings.matching.bitset import IntervalRows
from tidings.matching.content import ContentIndex
from tidings.matching.exclusion import Exclusion
from tidings.matching.owners import Matches, SlotOwners, Slots, grouped
from tidings.matching.semantics import conjunction_holds
from tidings.matching.topics import DEFAULT_CACHE_SIZE, TopicIndex, bucket_key, is_pattern_filter
from tidings.model import Predicate, Scalar


@dataclass(frozen=True, slots=True)
class Event:
    """What matching sees of a publication."""

    topics: tuple[str, ...] = ()
    attributes: Mapping[str, Scalar] | None = None


_NO_ATTRIBUTES: Mapping[str, Scalar] = {}
DEFAULT_ANSWER_CACHE_MATCHES = 1 << 21


class ContentMatcher(Protocol):
    """What the engine needs of a content index."""

    def add_many(self, items: Sequence[tuple[str, Sequence[Predicate]]]) -> None: ...
    def remove(self, subscription_id: str) -> bool: ...
    def match_batch(self, events: Sequence[Mapping[str, Scalar]]) -> list[list[str]]: ...
    def wait(self) -> None: ...
    def __len__(self) -> int: ...


@runtime_checkable
class SlottedContentMatcher(ContentMatcher, Protocol):
    """A content index that can answer with integer slots, named only when asked."""

    def slot_of(self, subscription_id: str) -> int | None: ...
    def slots_of(self, subscription_ids: Iterable[str]) -> list[int | None]: ...
    def add_arrays(self, ids: Sequence[str], rows: IntervalRows) -> None: ...
    def remove_many(self, subscription_ids: Sequence[str]) -> int: ...
    def ids_of(self, slots: Slots) -> list[str]: ...
    def match_slots_batch(
        self, events: Sequence[Mapping[str, Scalar]]
    ) -> list[tuple[Slots, list[str]]]: ...


class ScanContentIndex:
    """Tests every subscription per event with the reference semantics: the slow baseline."""

    def __init__(self) -> None:
        self._predicates: dict[str, tuple[Predicate, ...]] = {}

    def __len__(self) -> int:
        return len(self._predicates)

    def add_many(self, items: Sequence[tuple[str, Sequence[Predicate]]]) -> None:
        self._predicates.update((sid, tuple(predicates)) for sid, predicates in items)

    def remove(self, subscription_id: str) -> bool:
        return self._predicates.pop(subscription_id, None) is not None

    def match(self, attributes: Mapping[str, Scalar]) -> list[str]:
        return [s for s, ps in self._predicates.items() if conjunction_holds(ps, attributes)]

    def match_batch(self, events: Sequence[Mapping[str, Scalar]]) -> list[list[str]]:
        return [self.match(attributes) for attributes in events]

    def wait(self) -> None:
        """Nothing runs in the background here."""


def default_content_index() -> ContentMatcher:
    return ContentIndex()


class Matcher:
    """Topic and content matching. Subscriptions are keyed by id; each belongs to a subscriber.

    An answer maps subscriber ids to sorted subscription ids; it may be shared with later
    calls (cached per topic), so it is read-only.
    """

    def __init__(
        self,
        *,
        topic_cache_size: int = DEFAULT_CACHE_SIZE,
        content: ContentMatcher | None = None,
        answer_cache_matches: int = DEFAULT_ANSWER_CACHE_MATCHES,
    ) -> None:
        self._owner: dict[str, str] = {}  # subscription id -> subscriber id
        self._owner_by_slot: list[str] = []  # topic index slot -> subscriber id
        # topic index slot -> [subscription id]: the list an answer holds when the subscriber
        # has one match, shared by every answer (so answers are read-only)
        self._alone_by_slot: list[list[str]] = []
        self._topics = TopicIndex(cache_size=topic_cache_size)
        # A topic's answer is the union of a few buckets: its exact filter's and the matching
        # patterns'. Each bucket's subscriptions are grouped by subscriber when they change,
        # not per publication: bucket key (`bucket_key`) -> subscriber id -> subscription ids.
        # The lists are shared with answers, so they are replaced, never changed in place;
        # the inner dicts are never handed out.
        self._exact_groups: dict[str, dict[str, list[str]]] = {}
        self._pattern_groups: dict[str, dict[str, list[str]]] = {}
        self._content = content if content is not None else default_content_index()
        # Content answers in slots (when the index gives them) go to subscribers through an
        # array of owner codes, not a dict lookup per matching id.
        self._slotted = self._content if isinstance(self._content, SlottedContentMatcher) else None
        self._slot_owners = SlotOwners()
        self._exclusions: weakref.WeakSet[Exclusion] = weakref.WeakSet()  # told of freed slots
        # topic -> (grouped answer, its number of matches)
        self._answers: OrderedDict[str, tuple[Matches, int]] = OrderedDict()
        self._answers_size, self._answers_budget = topic_cache_size, answer_cache_matches
        self._cached_matches = 0

    def __len__(self) -> int:
        return len(self._owner)

    def add_topic(self, subscription_id: str, subscriber_id: str, filters: Sequence[str]) -> None:
        """Index a topic subscription; an existing id (of either kind) is replaced."""
        self.remove(subscription_id)
        self._topics.add(subscription_id, filters)
        self._forget(filters)
        owner = self._owner[subscription_id] = sys.intern(subscriber_id)
        slot, by_slot = self._topics.slot_of(subscription_id), self._owner_by_slot
        alone = [subscription_id]
        if slot == len(by_slot):
            by_slot.append(owner)
            self._alone_by_slot.append(alone)
        else:
            by_slot[slot], self._alone_by_slot[slot] = owner, alone
        for topic_filter in self._topics.filters_of(subscription_id):
            groups, key = self._groups_of(topic_filter)
            group = groups.setdefault(key, {})
            found = group.get(owner)
            if found is None:
                group[owner] = alone
            elif subscription_id not in found:  # `a/#/b` and `a/#`: one bucket
                group[owner] = sorted([*found, subscription_id])

    def _groups_of(self, topic_filter: str) -> tuple[dict[str, dict[str, list[str]]], str]:
        if is_pattern_filter(topic_filter):
            return self._pattern_groups, bucket_key(topic_filter)
        return self._exact_groups, topic_filter

    def add_content(
        self, subscription_id: str, subscriber_id: str, predicates: Sequence[Predicate]
    ) -> None:
        """Index a content subscription; an existing id (of either kind) is replaced."""
        self.add_contents([(subscription_id, subscriber_id, predicates)])

    def add_contents(self, items: Iterable[tuple[str, str, Sequence[Predicate]]]) -> None:
        """Index many content subscriptions (subscription id, subscriber id, predicates) in
        one call of the content index (its bulk path); an id given twice keeps the last."""
        unique = {sid: (sid, owner, predicates) for sid, owner, predicates in items}
        for sid in unique:
            self.remove(sid)
        self._content.add_many([(sid, predicates) for sid, _, predicates in unique.values()])
        for sid, owner, _ in unique.values():
            owner = self._owner[sid] = sys.intern(owner)
            slot = self._content_slot(sid)
            if slot is not None:
                self._slot_owners.own(slot, owner)

    def _content_slot(self, subscription_id: str) -> int | None:
        return None if self._slotted is None else self._slotted.slot_of(subscription_id)

    def _content_slots(self, subscription_ids: Sequence[str]) -> list[int | None]:
        if self._slotted is None:
            return [None] * len(subscription_ids)
        return self._slotted.slots_of(subscription_ids)

    def add_content_arrays(
        self, ids: Sequence[str], subscriber_ids: Sequence[str], rows: IntervalRows
    ) -> None:
        """Index numeric interval subscriptions given as columns, without a `Predicate` object
        each (see `ContentIndex.add_arrays`); existing ids are replaced. Needs a content index
        that answers in slots. Bad input is refused before anything changes."""
        if self._slotted is None:
            raise TypeError("this content index takes no arrays")
        counts = {len(ids), len(subscriber_ids), len(rows.attrs), len(rows.ops), len(rows.vals)}
        if len(counts) > 1:
            raise ValueError(f"ids, subscriber ids and rows differ in number: {sorted(counts)}")
        distinct = set(ids)
        if len(distinct) != len(ids):
            raise ValueError("an id repeats: each row must be another subscription")
        if "" in distinct:
            raise ValueError("an empty id: the interval index reads it as a removed one")
        if not self._owner.keys().isdisjoint(distinct):  # (new ids, the usual case: no loop)
            for sid in ids:
                self.remove(sid)
        self._slotted.add_arrays(ids, rows)
        interned = {owner: sys.intern(owner) for owner in dict.fromkeys(subscriber_ids)}
        owners = list(map(interned.__getitem__, subscriber_ids))
        self._owner.update(zip(ids, owners, strict=True))
        self._slot_owners.own_many(self._slotted.slots_of(ids), owners)  # type: ignore[arg-type]

    def wait(self) -> None:
        """Until the content index's background merges and rebuilds have landed (a large
        bulk load is rebuilt in the background; answers are right meanwhile, but slower)."""
        self._content.wait()

    def remove(self, subscription_id: str) -> bool:
        """Forget a subscription; False if it was not there."""
        owner = self._owner.pop(subscription_id, None)
        if owner is None:
            return False
        filters = self._topics.filters_of(subscription_id)
        if self._topics.remove(subscription_id):
            self._ungroup(subscription_id, owner, filters)
            self._forget(filters)
        else:
            slot = self._content_slot(subscription_id)
            if slot is not None:
                self._slot_owners.release(slot)
                for exclusion in self._exclusions:
                    exclusion.released(subscription_id, slot)
            self._content.remove(subscription_id)
        return True

    def remove_many(self, subscription_ids: Iterable[str]) -> int:
        """`remove` of each; how many were there. Content subscriptions with a slot go at
        once, their owners, exclusions and index in array operations (a shrinking slice's
        2,000 ids a loop step took 16 ms one by one)."""
        ids = list(dict.fromkeys(subscription_ids))
        topics = [sid for sid in ids if sid in self._topics]
        removed = self._remove_topics(topics)
        ids = [sid for sid in ids if sid not in self._topics]
        if self._slotted is None:
            return removed + sum(map(self.remove, ids))
        slotted = [
            (sid, slot)
            for sid, slot in zip(ids, self._slotted.slots_of(ids), strict=True)
            if slot is not None and sid in self._owner
        ]
        held = {sid for sid, _ in slotted}
        removed += sum(self.remove(sid) for sid in ids if sid not in held)
        if not slotted:
            return removed
        content = [sid for sid, _ in slotted]
        slots = np.array([slot for _, slot in slotted], np.intp)
        for sid in content:
            del self._owner[sid]
        self._slot_owners.release_many(slots)
        for exclusion in self._exclusions:
            exclusion.released_many(content, slots)
        self._slotted.remove_many(content)
        return removed + len(content)

    def _remove_topics(self, subscription_ids: list[str]) -> int:
        """Topic subscriptions at once: each bucket they were in rewritten once."""
        if not subscription_ids:
            return 0
        filters = {sid: self._topics.filters_of(sid) for sid in subscription_ids}
        removed = self._topics.remove_many(subscription_ids)
        for sid, held in filters.items():
            owner = self._owner.pop(sid, None)
            if owner is not None:
                self._ungroup(sid, owner, held)
        self._forget(f for held in filters.values() for f in held)
        return removed

    def _ungroup(self, subscription_id: str, owner: str, filters: Iterable[str]) -> None:
        for topic_filter in filters:
            groups, key = self._groups_of(topic_filter)
            group = groups.get(key)
            if group is None or owner not in group:
                continue  # already gone: two filters of one bucket
            rest = [i for i in group[owner] if i != subscription_id]
            if rest:
                group[owner] = rest
            elif len(group) > 1:
                del group[owner]
            else:
                del groups[key]

    def _forget(self, filters: Iterable[str]) -> None:
        """Drop the cached answers a change to these filters may alter."""
        for topic_filter in filters:
            if is_pattern_filter(topic_filter):
                self._answers.clear()
                self._cached_matches = 0
                return
            dropped = self._answers.pop(topic_filter, None)
            if dropped is not None:
                self._cached_matches -= dropped[1]

    def match(self, event: Event) -> Matches:
        topical = self._topic_answer(event.topics)
        if not self._content:
            return topical
        return _union(topical, self._content_answers((event.attributes or _NO_ATTRIBUTES,))[0])

    def match_batch(
        self, events: Sequence[Event], without: Exclusion | None = None
    ) -> list[Matches]:
        """Match many events at once; the content index sees the whole batch in one call.
        `without`: an exclusion of this matcher's (`exclusion`), whose ids are left out."""
        contents = self._content_answers([e.attributes or _NO_ATTRIBUTES for e in events], without)
        if without is None:
            return [
                _union(self._topic_answer(e.topics), c)
                for e, c in zip(events, contents, strict=True)
            ]
        return [
            _union(without.filtered(self._topic_answer(e.topics), by_any_id=True), c)
            for e, c in zip(events, contents, strict=True)
        ]

    def exclusion(self, ids: Iterable[str] = ()) -> Exclusion:
        """A set of this matcher's subscriptions that `match_batch(without=)` leaves out,
        its content ones by slot (see `tidings.matching.exclusion`)."""
        found = Exclusion(self._content_slots)
        self._exclusions.add(found)
        found.update(ids)
        return found

    def _content_answers(
        self, batch: Sequence[Mapping[str, Scalar]], without: Exclusion | None = None
    ) -> list[Matches]:
        """Per event, the content matches by subscriber (fresh dicts)."""
        if not self._content:
            return [{} for _ in batch]
        slotted = self._slotted
        if slotted is None:
            answers = [self._owned(ids) for ids in self._content.match_batch(batch)]
            if without is None:
                return answers
            return [without.filtered(a, by_any_id=True) for a in answers]
        group, ids_of = self._slot_owners.group, slotted.ids_of
        if without is None:
            return [
                _union(group(slots, ids_of), self._owned(others))
                for slots, others in slotted.match_slots_batch(batch)
            ]
        mask, filtered = without.mask, without.filtered
        return [
            _union(
                filtered(group(slots, ids_of, mask)),
                filtered(self._owned(others), by_any_id=True),
            )
            for slots, others in slotted.match_slots_batch(batch)
        ]

    def _topic_answer(self, topics: Sequence[str]) -> Matches:
        if not topics or not self._topics:
            return {}
        if len(topics) > 1:
            parts = [self._topics.match_slots(t) for t in topics]
            return self._group(np.unique(np.concatenate(parts)).tolist())
        topic, cache = topics[0], self._answers
        hit = cache.get(topic)
        if hit is not None:
            cache.move_to_end(topic)
            return hit[0]
        generation = self._topics.generation
        answer, size = self._single_topic_answer(topic)
        if generation == self._topics.generation:
            self._remember(topic, answer, size)
        return answer

    def _single_topic_answer(self, topic: str) -> tuple[Matches, int]:
        """The union of the pre-grouped buckets matching the topic, by C-level dict copies and
        updates; a subscriber in two buckets (rare) is merged by `_merged`. The size returned
        (for the cache's budget) counts subscribers, not subscriptions: touching every list
        to count it would cost as much as the rest."""
        pattern_groups = self._pattern_groups
        parts = [pattern_groups[k] for k in self._topics.pattern_keys(topic) if k in pattern_groups]
        exact = self._exact_groups.get(topic)
        if exact is not None:
            parts.append(exact)
        if not parts:
            return {}, 0
        answer = dict(parts[0])
        for group in parts[1:]:
            size = len(answer)
            answer.update(group)
            if len(answer) != size + len(group):  # a subscriber in both: merge properly
                return _merged(parts), len(answer)
        return answer, len(answer)

    def _remember(self, topic: str, answer: Matches, size: int) -> None:
        if self._answers_size <= 0 or 8 * size > self._answers_budget:
            return
        cache = self._answers
        cache[topic] = (answer, size)
        self._cached_matches += size
        while len(cache) > self._answers_size or self._cached_matches > self._answers_budget:
            self._cached_matches -= cache.popitem(last=False)[1][1]

    def _group(self, slots: list[int]) -> Matches:
        if len(slots) > 1:  # the common case first: one matching subscription per owner
            fetch = itemgetter(*slots)
            owners = fetch(self._owner_by_slot)
            out: Matches = dict(zip(owners, fetch(self._alone_by_slot), strict=True))
            if len(out) == len(owners):
                return out
        elif slots:
            return {self._owner_by_slot[slots[0]]: self._alone_by_slot[slots[0]]}
        return grouped(*self._owners_and_ids(slots))

    def _owned(self, ids: Sequence[str]) -> Matches:
        """Content ids by subscriber, owners fetched in one C-level pass."""
        if len(ids) < 2:
            return {self._owner[ids[0]]: list(ids)} if ids else {}
        return grouped(itemgetter(*ids)(self._owner), ids)

    def _owners_and_ids(self, slots: list[int]) -> tuple[Sequence[str], Sequence[str]]:
        # Memory-bound at scale: each matched id costs cache misses, and fetching all of them
        # in one C loop (itemgetter) lets those misses overlap; about 3x faster than one by one.
        if len(slots) < 2:
            if not slots:
                return (), ()
            return (self._owner_by_slot[slots[0]],), (self._topics.id_of(slots[0]),)
        fetch = itemgetter(*slots)
        return fetch(self._owner_by_slot), fetch(self._topics.ids)


def _union(first: Matches, second: Matches) -> Matches:
    """Both answers, neither changed (either may be shared); a subscriber in both gets the
    sorted union of its ids."""
    if not second:
        return first
    if not first:
        return second
    out = dict(first)
    for owner, ids in second.items():
        found = out.get(owner)
        out[owner] = ids if found is None else sorted({*found, *ids})
    return out


def _merged(groups: Sequence[Matches]) -> Matches:
    """The union of two or more non-empty answers (a new dict: `_union` copies the first)."""
    return reduce(_union, groups)
