"""The topic index: exact names by hash, patterns by a trie of segments, recent results cached.

A topic filter is either an exact name (`a/b/c`), found with one dict lookup, or a pattern
(`*` is exactly one segment, a trailing `#` zero or more trailing segments), found by walking
a trie of segments with the publication's topic. `semantics.topic_matches` is the oracle; the
index agrees with it on every string, valid or not (a `#` anywhere ends the filter, as there).

Publications repeat topics, so the answer per topic is kept in a bounded LRU cache. Every
add or remove bumps a generation counter; an exact filter drops its one cached topic, a pattern
clears the cache, and an answer computed under an older generation is never stored.

Not safe for concurrent mutation: callers serialise add/remove (matching may run alongside).
"""

from __future__ import annotations

import sys
from collections import OrderedDict
from collections.abc import Iterable, Sequence

# A bucket of subscription ids: a list while small (compact), a set once large (O(1) removal).
Bucket = list[str] | set[str]
SMALL_BUCKET = 32
DEFAULT_CACHE_SIZE = 16_384
_EMPTY: tuple[str, ...] = ()


def _bucket_add(bucket: Bucket | None, sid: str) -> Bucket:
    if bucket is None:
        return [sid]
    if isinstance(bucket, set):
        bucket.add(sid)
        return bucket
    bucket.append(sid)
    return set(bucket) if len(bucket) > SMALL_BUCKET else bucket


def _bucket_remove(bucket: Bucket | None, sid: str) -> Bucket | None:
    """The bucket without `sid`, or None once empty."""
    if bucket is None:
        return None
    if isinstance(bucket, set):
        bucket.discard(sid)
    elif sid in bucket:
        bucket.remove(sid)
    return bucket or None


def is_pattern_filter(topic_filter: str) -> bool:
    """Has a `*` or `#` segment (a cheap superset test; the trie handles literal segments)."""
    return "*" in topic_filter or "#" in topic_filter


class _Node:
    """One trie node: literal children, the `*` child, and the ids whose filter ends here
    (`here`) or continues with `#` from here (`rest`)."""

    __slots__ = ("children", "here", "rest", "star")

    def __init__(self) -> None:
        self.children: dict[str, _Node] | None = None
        self.star: _Node | None = None
        self.here: Bucket | None = None
        self.rest: Bucket | None = None

    def is_empty(self) -> bool:
        return not (self.children or self.star or self.here or self.rest)

    def child(self, segment: str) -> _Node:
        if segment == "*":
            if self.star is None:
                self.star = _Node()
            return self.star
        if self.children is None:
            self.children = {}
        node = self.children.get(segment)
        if node is None:
            node = self.children[sys.intern(segment)] = _Node()
        return node

    def drop_child(self, segment: str) -> None:
        if segment == "*":
            self.star = None
        elif self.children is not None:
            del self.children[segment]
            if not self.children:
                self.children = None


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

    def add(self, topic_filter: str, sid: str) -> None:
        node = self._root
        segments, rest = _path(topic_filter)
        for segment in segments:
            node = node.child(segment)
        if rest:
            node.rest = _bucket_add(node.rest, sid)
        else:
            node.here = _bucket_add(node.here, sid)

    def remove(self, topic_filter: str, sid: str) -> None:
        segments, rest = _path(topic_filter)
        trail = [self._root]
        for segment in segments:
            nxt = trail[-1].star if segment == "*" else (trail[-1].children or {}).get(segment)
            if nxt is None:
                return
            trail.append(nxt)
        node = trail[-1]
        if rest:
            node.rest = _bucket_remove(node.rest, sid)
        else:
            node.here = _bucket_remove(node.here, sid)
        self._prune(trail, segments)

    def _prune(self, trail: list[_Node], segments: list[str]) -> None:
        for depth in range(len(segments), 0, -1):
            if not trail[depth].is_empty():
                return
            trail[depth - 1].drop_child(segments[depth - 1])

    def walk(self, topic: str, found: set[str]) -> None:
        """Add to `found` the ids of every pattern that matches `topic`."""
        nodes = [self._root]
        for segment in topic.split("/"):
            nxt: list[_Node] = []
            for node in nodes:
                if node.rest:
                    found.update(node.rest)
                if node.children is not None and (child := node.children.get(segment)):
                    nxt.append(child)
                if node.star is not None:
                    nxt.append(node.star)
            if not nxt:
                return
            nodes = nxt
        for node in nodes:
            if node.rest:  # `#` also matches zero segments: `a/#` matches `a`
                found.update(node.rest)
            if node.here:
                found.update(node.here)


class TopicIndex:
    """Subscription ids by topic filter: `match(topics)` gives the ids matching any topic."""

    def __init__(self, cache_size: int = DEFAULT_CACHE_SIZE) -> None:
        self._filters: dict[str, str | tuple[str, ...]] = {}  # sid -> its filter(s)
        self._exact: dict[str, Bucket] = {}
        self._patterns = PatternTrie()
        self._cache: OrderedDict[str, tuple[str, ...]] = OrderedDict()
        self._cache_size = cache_size
        self._generation = 0

    def __len__(self) -> int:
        return len(self._filters)

    def __contains__(self, subscription_id: object) -> bool:
        return subscription_id in self._filters

    @property
    def generation(self) -> int:
        """Bumped by every add and remove."""
        return self._generation

    def add(self, subscription_id: str, filters: Iterable[str]) -> None:
        """Index a subscription's filters; adding an existing id replaces it."""
        self.remove(subscription_id)
        unique = tuple(dict.fromkeys(sys.intern(f) for f in filters))
        for topic_filter in unique:
            self._insert(topic_filter, subscription_id)
        self._filters[subscription_id] = unique[0] if len(unique) == 1 else unique
        self._generation += 1

    def remove(self, subscription_id: str) -> bool:
        """Forget a subscription; False if it was not there."""
        stored = self._filters.pop(subscription_id, None)
        if stored is None:
            return False
        for topic_filter in (stored,) if isinstance(stored, str) else stored:
            self._delete(topic_filter, subscription_id)
        self._generation += 1
        return True

    def _insert(self, topic_filter: str, sid: str) -> None:
        if is_pattern_filter(topic_filter):
            self._patterns.add(topic_filter, sid)
            self._cache.clear()
        else:
            self._exact[topic_filter] = _bucket_add(self._exact.get(topic_filter), sid)
            self._cache.pop(topic_filter, None)

    def _delete(self, topic_filter: str, sid: str) -> None:
        if is_pattern_filter(topic_filter):
            self._patterns.remove(topic_filter, sid)
            self._cache.clear()
            return
        bucket = _bucket_remove(self._exact.get(topic_filter), sid)
        if bucket is None:
            self._exact.pop(topic_filter, None)
        self._cache.pop(topic_filter, None)

    def match(self, topics: Sequence[str]) -> set[str]:
        """Ids of the subscriptions with a filter matching at least one of `topics`."""
        if len(topics) == 1:
            return set(self.match_topic(topics[0]))
        out: set[str] = set()
        for topic in topics:
            out.update(self.match_topic(topic))
        return out

    def match_topic(self, topic: str) -> tuple[str, ...]:
        """Ids matching one topic, without duplicates (served from the cache when recent)."""
        cache = self._cache
        hit = cache.get(topic)
        if hit is not None:
            try:  # noqa: SIM105 (contextlib.suppress costs more than the lookup, on the hot path)
                cache.move_to_end(topic)
            except KeyError:  # dropped by a concurrent mutation; the answer still stands
                pass
            return hit
        generation = self._generation
        result = self._compute(topic)
        if self._cache_size > 0 and generation == self._generation:
            cache[topic] = result
            if len(cache) > self._cache_size:
                cache.popitem(last=False)
        return result

    def _compute(self, topic: str) -> tuple[str, ...]:
        exact = self._exact.get(topic)
        if not self._patterns:
            return tuple(exact) if exact else _EMPTY
        found: set[str] = set(exact) if exact else set()
        self._patterns.walk(topic, found)
        return tuple(found)

    def clear_cache(self) -> None:
        self._cache.clear()

    def cache_info(self) -> tuple[int, int]:
        """(entries, capacity) of the result cache."""
        return len(self._cache), self._cache_size
