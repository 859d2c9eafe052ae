"""The topic index: exact names by hash, patterns by a trie of segments, recent answers cached.

A topic filter is either an exact name (`a/b/c`), found with one dict lookup, or a pattern
(`*` is exactly one segment, a trailing `#` zero or more trailing segments), found by walking
a trie of segments with the publication's topic. `semantics.topic_matches` is the oracle; the
index agrees with it on every string, valid or not (a `#` anywhere ends the filter, as there).

Publications repeat topics, so the answer per topic is kept in an LRU cache bounded by topics
(`cache_size`) and by the slots its answers hold in all (`cache_slots`): one answer of 100,000
slots is 400 KB, and 65,536 such topics would pin 26 GB. An answer past an eighth of the slot
budget is not cached (as the engine's `answer_cache_matches`). Every add or remove bumps a
generation counter; an exact filter drops its one cached topic, a pattern clears the cache,
and an answer computed under an older generation is never stored.

Not safe for concurrent mutation: callers serialise add/remove (matching may run alongside).
"""

from __future__ import annotations

import sys
from array import array
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from operator import itemgetter
from typing import TypeAlias, TypeVar

import numpy as np
import numpy.typing as npt

# Subscriptions are dense integer slots; a bucket is a compact array of slots, and an answer a
# read-only int32 numpy array of slots (no per-id Python object is touched to serve it).
Slots = npt.NDArray[np.int32]
Bucket: TypeAlias = "array[int]"  # array("i")
DEFAULT_CACHE_SIZE = 65_536
# slots (4 bytes each) or pattern keys (a shared string each) held by one cache, in all
DEFAULT_CACHE_SLOTS = 1 << 22
T = TypeVar("T", Slots, tuple[str, ...])


def _frozen(values: array[int]) -> Slots:
    out: Slots = np.frombuffer(values, dtype=np.int32)
    out.flags.writeable = False
    return out


_EMPTY = _frozen(array("i"))


def _recent(cache: OrderedDict[str, T], topic: str) -> T | None:
    """A cached answer, marked as recently used."""
    hit = cache.get(topic)
    if hit is not None:
        try:  # noqa: SIM105 (contextlib.suppress costs more than the lookup, on the hot path)
            cache.move_to_end(topic)
        except KeyError:  # dropped by a concurrent mutation; the answer still stands
            pass
    return hit


class _Bounded(OrderedDict[str, T]):
    """An LRU cache of answers, bounded by entries and by the slots they hold in all."""

    def __init__(self, entries: int, slots: int) -> None:
        super().__init__()
        self.entries, self.slots, self.held = entries, slots, 0

    def keep(self, topic: str, answer: T) -> None:
        if self.entries <= 0 or 8 * len(answer) > self.slots:
            return
        if topic in self:
            self.held -= len(self.pop(topic))
        self[topic] = answer
        self.held += len(answer)
        while len(self) > self.entries or (self.held > self.slots and self):
            self.held -= len(self.popitem(last=False)[1])
        if not self:  # a concurrent clear() may have reset the count under us
            self.held = 0

    def drop(self, topic: str) -> None:
        dropped = self.pop(topic, None)
        if dropped is not None:
            self.held -= len(dropped)

    def clear(self) -> None:
        super().clear()
        self.held = 0


def _bucket_add(bucket: Bucket | None, slot: int) -> Bucket:
    if bucket is None:
        return array("i", (slot,))
    bucket.append(slot)
    return bucket


def _bucket_remove(bucket: Bucket | None, slot: int) -> Bucket | None:
    """The bucket without `slot` (order is not kept), or None once empty."""
    if bucket is None or slot not in bucket:
        return bucket
    bucket[bucket.index(slot)] = bucket[-1]
    bucket.pop()
    return bucket or None


def _bucket_without(bucket: Bucket | None, slots: set[int]) -> Bucket | None:
    """The bucket without any of `slots`, in one pass, or None once empty: removing many
    one by one scans the bucket for each."""
    if bucket is None:
        return None
    kept = array("i", (s for s in bucket if s not in slots))
    return kept or None


def is_pattern_filter(topic_filter: str) -> bool:
    """Has a `*` or `#` segment (a cheap superset test; the trie handles literal segments)."""
    return "*" in topic_filter or "#" in topic_filter


class _Node:
    """One trie node: literal children, the `*` child, and the ids whose filter ends here
    (`here`) or continues with `#` from here (`rest`)."""

    __slots__ = ("children", "here", "key", "rest", "rest_name", "star")

    def __init__(self, key: str | None = None) -> None:
        self.key = key  # the segments leading here, joined: names the node's buckets
        self.children: dict[str, _Node] | None = None
        self.star: _Node | None = None
        self.here: Bucket | None = None
        self.rest: Bucket | None = None
        self.rest_name: str | None = None  # `rest_key()`, made once: cached answers share it

    def is_empty(self) -> bool:
        return not (self.children or self.star or self.here or self.rest)

    def child(self, segment: str) -> _Node:
        if segment == "*":
            if self.star is None:
                self.star = _Node(self._below(segment))
            return self.star
        if self.children is None:
            self.children = {}
        node = self.children.get(segment)
        if node is None:
            node = self.children[sys.intern(segment)] = _Node(self._below(segment))
        return node

    def _below(self, segment: str) -> str:
        return segment if self.key is None else f"{self.key}/{segment}"

    def here_key(self) -> str:
        return self.key or ""

    def rest_key(self) -> str:
        if self.rest_name is None:
            self.rest_name = "#" if self.key is None else f"{self.key}/#"
        return self.rest_name

    def drop_child(self, segment: str) -> None:
        if segment == "*":
            self.star = None
        elif self.children is not None:
            del self.children[segment]
            if not self.children:
                self.children = None


def bucket_key(topic_filter: str) -> str:
    """The name of the bucket a filter's subscriptions share: the filter, cut after its first
    `#` segment (`a/#/b` and `a/#` are one filter)."""
    segments, rest = _path(topic_filter)
    if not rest:
        return topic_filter
    return "/".join([*segments, "#"])


def _path(topic_filter: str) -> tuple[list[str], bool]:
    """The segments leading to the filter's node, and whether it ends in `#`."""
    segments = topic_filter.split("/")
    if "#" in segments:
        return segments[: segments.index("#")], True
    return segments, False


class PatternTrie:
    """Topic patterns as a trie of segments; `walk` collects the ids matching one topic."""

    def __init__(self) -> None:
        self._root = _Node()

    def __bool__(self) -> bool:
        return not self._root.is_empty()

    def add(self, topic_filter: str, slot: int) -> None:
        node = self._root
        segments, rest = _path(topic_filter)
        for segment in segments:
            node = node.child(segment)
        if rest:
            node.rest = _bucket_add(node.rest, slot)
        else:
            node.here = _bucket_add(node.here, slot)

    def remove(self, topic_filter: str, slot: int) -> None:
        self.remove_all(topic_filter, {slot})

    def remove_all(self, topic_filter: str, slots: set[int]) -> None:
        """`remove` of each slot, the bucket rewritten once."""
        node, trail, segments, rest = self._find(topic_filter)
        if node is None:
            return
        if rest:
            node.rest = _bucket_without(node.rest, slots)
        else:
            node.here = _bucket_without(node.here, slots)
        self._prune(trail, segments)

    def _find(self, topic_filter: str) -> tuple[_Node | None, list[_Node], list[str], bool]:
        """The filter's node (None: not in the trie), the trail to it, its segments, and
        whether it ends in `#`."""
        segments, rest = _path(topic_filter)
        trail = [self._root]
        for segment in segments:
            nxt = trail[-1].star if segment == "*" else (trail[-1].children or {}).get(segment)
            if nxt is None:
                return None, trail, segments, rest
            trail.append(nxt)
        return trail[-1], trail, segments, rest

    def _prune(self, trail: list[_Node], segments: list[str]) -> None:
        for depth in range(len(segments), 0, -1):
            if not trail[depth].is_empty():
                return
            trail[depth - 1].drop_child(segments[depth - 1])

    def _reached(self, topic: str) -> tuple[list[_Node], list[_Node]]:
        """The nodes whose `#` bucket matches `topic` (passed on the way, or at its end: `a/#`
        also matches `a`), and the nodes it ends at (whose end bucket matches)."""
        nodes, passed = [self._root], []
        for segment in topic.split("/"):
            nxt: list[_Node] = []
            for node in nodes:
                if node.rest:
                    passed.append(node)
                if node.children is not None and (child := node.children.get(segment)):
                    nxt.append(child)
                if node.star is not None:
                    nxt.append(node.star)
            if not nxt:
                return passed, []
            nodes = nxt
        return passed + [node for node in nodes if node.rest], nodes

    def walk_keys(self, topic: str, found: list[str]) -> None:
        """As `walk`, appending the keys (`bucket_key`) of the matching buckets instead."""
        rest, ends = self._reached(topic)
        found.extend(node.rest_key() for node in rest)
        found.extend(node.here_key() for node in ends if node.here)

    def walk(self, topic: str, found: array[int]) -> None:
        """Append to `found` the slots of every pattern that matches `topic`."""
        rest, ends = self._reached(topic)
        for node in rest:
            found.extend(node.rest)  # type: ignore[arg-type]
        for node in ends:
            if node.here:
                found.extend(node.here)


class TopicIndex:
    """Subscription ids by topic filter: `match(topics)` gives the ids matching any topic.

    Internally each subscription has a dense integer slot; `match_slots` answers with slots
    (cheap to cache and to pass on), `id_of` turns a slot back into its id.
    """

    def __init__(
        self, cache_size: int = DEFAULT_CACHE_SIZE, cache_slots: int = DEFAULT_CACHE_SLOTS
    ) -> None:
        self._slot: dict[str, int] = {}  # subscription id -> slot
        self._ids: list[str | None] = []  # slot -> subscription id
        self._filters: list[str | tuple[str, ...] | None] = []  # slot -> its filter(s)
        self._free: list[int] = []
        self._multi = 0  # subscriptions with several filters: their slot may repeat in an answer
        self._exact: dict[str, Bucket] = {}
        self._patterns = PatternTrie()
        self._cache: _Bounded[Slots] = _Bounded(cache_size, cache_slots)
        # keys are the trie nodes' own strings: an entry holds references, not copies
        self._pattern_cache: _Bounded[tuple[str, ...]] = _Bounded(cache_size, cache_slots)
        self._generation = 0
        self._pattern_generation = 0  # bumped by pattern changes only

    def __len__(self) -> int:
        return len(self._slot)

    def __contains__(self, subscription_id: object) -> bool:
        return subscription_id in self._slot

    @property
    def generation(self) -> int:
        """Bumped by every add and remove."""
        return self._generation

    def slot_of(self, subscription_id: str) -> int:
        """The slot of an indexed subscription (reused after its removal)."""
        return self._slot[subscription_id]

    @property
    def ids(self) -> Sequence[str | None]:
        """Subscription id by slot (None for a free slot); read-only by convention."""
        return self._ids

    def filters_of(self, subscription_id: str) -> tuple[str, ...]:
        """The filters of an indexed subscription (empty when not indexed)."""
        slot = self._slot.get(subscription_id)
        stored = None if slot is None else self._filters[slot]
        return (stored,) if isinstance(stored, str) else stored or ()

    def id_of(self, slot: int) -> str:
        sid = self._ids[slot]
        assert sid is not None, "a free slot is never in an answer"
        return sid

    def ids_of(self, slots: Slots) -> Sequence[str]:
        """The ids of `slots`, fetched in one C-level pass (the misses overlap: 2-3x faster)."""
        if len(slots) < 2:
            return [self.id_of(int(slot)) for slot in slots]
        return itemgetter(*slots.tolist())(self._ids)  # type: ignore[no-any-return]

    def add(self, subscription_id: str, filters: Iterable[str]) -> None:
        """Index a subscription's filters; adding an existing id replaces it."""
        self.remove(subscription_id)
        unique = tuple(dict.fromkeys(sys.intern(f) for f in filters))
        slot = self._take_slot(subscription_id)
        for topic_filter in unique:
            self._insert(topic_filter, slot)
        self._filters[slot] = unique[0] if len(unique) == 1 else unique
        self._multi += len(unique) > 1
        self._generation += 1

    def remove(self, subscription_id: str) -> bool:
        """Forget a subscription; False if it was not there."""
        slot = self._slot.pop(subscription_id, None)
        if slot is None:
            return False
        stored = self._filters[slot]
        filters = (stored,) if isinstance(stored, str) else stored or ()
        for topic_filter in filters:
            self._delete(topic_filter, slot)
        self._multi -= len(filters) > 1
        self._ids[slot] = self._filters[slot] = None
        self._free.append(slot)
        self._generation += 1
        return True

    def remove_many(self, subscription_ids: Iterable[str]) -> int:
        """`remove` of each, each bucket they were in rewritten once: one by one, each
        removal scans its bucket (a subscriber's 1,000 unregistered from buckets of 40,000
        held the event loop for about a second); how many were there."""
        gone: dict[str, set[int]] = {}
        removed = 0
        for subscription_id in subscription_ids:
            slot = self._slot.pop(subscription_id, None)
            if slot is None:
                continue
            stored = self._filters[slot]
            filters = (stored,) if isinstance(stored, str) else stored or ()
            for topic_filter in filters:
                gone.setdefault(topic_filter, set()).add(slot)
            self._multi -= len(filters) > 1
            self._ids[slot] = self._filters[slot] = None
            self._free.append(slot)
            removed += 1
        for topic_filter, slots in gone.items():
            if is_pattern_filter(topic_filter):
                self._patterns.remove_all(topic_filter, slots)
                continue
            bucket = _bucket_without(self._exact.get(topic_filter), slots)
            if bucket is None:
                self._exact.pop(topic_filter, None)
            else:
                self._exact[topic_filter] = bucket
            self._cache.drop(topic_filter)
        if any(map(is_pattern_filter, gone)):
            self._patterns_changed()
        self._generation += removed > 0
        return removed

    def _take_slot(self, subscription_id: str) -> int:
        if self._free:
            slot = self._free.pop()
            self._ids[slot] = subscription_id
        else:
            slot = len(self._ids)
            self._ids.append(subscription_id)
            self._filters.append(None)
        self._slot[subscription_id] = slot
        return slot

    def _insert(self, topic_filter: str, slot: int) -> None:
        if is_pattern_filter(topic_filter):
            self._patterns.add(topic_filter, slot)
            self._patterns_changed()
        else:
            self._exact[topic_filter] = _bucket_add(self._exact.get(topic_filter), slot)
            self._cache.drop(topic_filter)

    def _delete(self, topic_filter: str, slot: int) -> None:
        if is_pattern_filter(topic_filter):
            self._patterns.remove(topic_filter, slot)
            self._patterns_changed()
            return
        bucket = _bucket_remove(self._exact.get(topic_filter), slot)
        if bucket is None:
            self._exact.pop(topic_filter, None)
        self._cache.drop(topic_filter)

    def match(self, topics: Sequence[str]) -> set[str]:
        """Ids of the subscriptions with a filter matching at least one of `topics`."""
        out: set[str] = set()
        for topic in topics:
            out.update(self.ids_of(self.match_slots(topic)))
        return out

    def match_slots(self, topic: str) -> Slots:
        """Slots matching one topic, each once, read-only (served from the cache when recent)."""
        hit = _recent(self._cache, topic)
        if hit is not None:
            return hit
        generation = self._generation
        result = self._compute(topic)
        if generation == self._generation:
            self._cache.keep(topic, result)
        return result

    def pattern_keys(self, topic: str) -> tuple[str, ...]:
        """The keys (`bucket_key`) of the pattern buckets matching one topic. Cached apart
        from `match_slots`: exact filters coming and going leave these answers standing."""
        hit = _recent(self._pattern_cache, topic)
        if hit is not None:
            return hit
        generation = self._pattern_generation
        found: list[str] = []
        if self._patterns:
            self._patterns.walk_keys(topic, found)
        result = tuple(found)
        if generation == self._pattern_generation:
            self._pattern_cache.keep(topic, result)
        return result

    def _patterns_changed(self) -> None:
        self._cache.clear()
        self._pattern_cache.clear()
        self._pattern_generation += 1

    def _compute(self, topic: str) -> Slots:
        exact = self._exact.get(topic)
        if not self._patterns:
            return _frozen(array("i", exact)) if exact else _EMPTY
        found = array("i", exact) if exact else array("i")
        self._patterns.walk(topic, found)
        if self._multi and len(found) > 1:
            unique = set(found)
            if len(unique) < len(found):
                found = array("i", unique)
        return _frozen(found) if found else _EMPTY

    def clear_cache(self) -> None:
        self._cache.clear()
        self._pattern_cache.clear()

    def cache_info(self) -> tuple[int, int]:
        """(entries, capacity) of the result cache."""
        return len(self._cache), self._cache.entries

    def cached_slots(self) -> tuple[int, int]:
        """(slots held, budget) of the result cache; the pattern cache holds at most as many
        keys."""
        return self._cache.held, self._cache.slots

    def resize_cache(self, cache_size: int, cache_slots: int | None = None) -> None:
        """Change the caches' capacity (0 turns them off); drops the cached answers."""
        for cache in (self._cache, self._pattern_cache):
            cache.entries = cache_size
            cache.slots = cache.slots if cache_slots is None else cache_slots
        self.clear_cache()
