"""The content index: numeric interval subscriptions in packed bitsets, the rest by counting.

A subscription made only of `<`, `<=`, `>`, `>=`, `=` on numbers (the common case, and the
whole of the standard workload) goes to `bitset.IntervalIndex`. Any other goes to the counting
index below. Each subscription is a conjunction of `n` predicates. For an event, every satisfied
predicate adds one to its subscription's count, and the subscriptions whose count reaches
their `n` match. Satisfied predicates are found per attribute of the event, never by testing
every subscription:
- `=` and `in`: a hash of (type, value) -> subscription slots;
- `<`, `<=`, `>`, `>=`: per type (numbers, strings) and operator, the thresholds sorted, so
  one binary search gives the slice of satisfied slots;
- `exists: false`: counted for each indexed key the event lacks;
- `contains`: the needles of each key in an Aho-Corasick automaton (`needles.NeedleIndex`),
  so one pass over a string value finds every satisfied needle, however many there are;
- `!=`: every `!=` slot of the event value's type, less those of the predicates whose value
  equals it (a hash by (type, value), as `=`'s, counted negatively);
- `prefix`, `suffix`: per key a dict needle -> slots, looked up with the value's prefix
  (suffix) of each length some needle has (`affixes.AffixIndex`);
- `exists: true`: the key's slots, all at once.
Slots come as arrays (a slot once per predicate) and are counted in bulk, so a publication
costs a Python step per indexed key, distinct needle length and satisfied value or needle,
never one per predicate. Predicates that can never hold (an order on booleans, a string
operator on a non-string, a value of no type) are left out of the index: their subscriptions
never reach their count.
Semantics are exactly `semantics.conjunction_holds` (the property tests compare them).
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from tidings.matching.affixes import AffixIndex, SlotBag, bag_add, bag_remove
from tidings.matching.bitset import IntervalIndex, IntervalRows, accepts
from tidings.matching.cells import Slots
from tidings.matching.needles import NeedleIndex
from tidings.matching.semantics import type_class
from tidings.model import ORDERED_OPS, Op, Predicate, Scalar

NUMBER, STRING = 1, 2
_HASHED = (Op.EQ, Op.IN)


@dataclass
class _Sorted:
    """Thresholds of one (key, type, operator), sorted, with their slots. The (threshold,
    slot) pairs are counted in a dict, so a removal costs O(1), not a scan of the list (a
    subscriber's 40,000 subscriptions removed newest first took 14 s on the event loop);
    they are sorted again at the next match after a change."""

    pairs: dict[tuple[Scalar, int], int] = field(default_factory=dict)
    values: list[Scalar] = field(default_factory=list)
    slots: np.ndarray = field(default_factory=lambda: np.empty(0, np.int64))
    dirty: bool = False

    def add(self, value: Scalar, slot: int) -> None:
        self.pairs[(value, slot)] = self.pairs.get((value, slot), 0) + 1
        self.dirty = True

    def remove(self, value: Scalar, slot: int) -> None:
        left = self.pairs[(value, slot)] - 1
        if left:
            self.pairs[(value, slot)] = left
        else:
            del self.pairs[(value, slot)]
        self.dirty = True

    def ready(self) -> None:
        if self.dirty:
            ordered = sorted(
                (pair for pair, times in self.pairs.items() for _ in range(times)),
                key=lambda p: p[0],
            )
            self.values = [v for v, _ in ordered]
            self.slots = np.fromiter((s for _, s in ordered), np.int64, len(ordered))
            self.dirty = False

    def satisfied(self, op: Op, x: Scalar) -> np.ndarray:
        """Slots of the predicates `attribute op threshold` that `x` satisfies."""
        self.ready()
        if op is Op.LT:  # x < t
            return self.slots[bisect_right(self.values, x) :]
        if op is Op.LE:
            return self.slots[bisect_left(self.values, x) :]
        if op is Op.GT:  # x > t
            return self.slots[: bisect_left(self.values, x)]
        return self.slots[: bisect_right(self.values, x)]


@dataclass
class _KeyIndex:
    """Everything indexed on one attribute name."""

    hashed: dict[tuple[int, Scalar], SlotBag] = field(default_factory=dict)  # `=`, `in`
    ordered: dict[tuple[int, Op], _Sorted] = field(default_factory=dict)
    needles: NeedleIndex = field(default_factory=NeedleIndex)  # `contains` string needles
    prefixes: AffixIndex = field(default_factory=AffixIndex)
    suffixes: AffixIndex = field(default_factory=lambda: AffixIndex(suffix=True))
    unequal: dict[int, SlotBag] = field(default_factory=dict)  # `!=` slots by value type
    equal: dict[tuple[int, Scalar], SlotBag] = field(default_factory=dict)  # ... by value
    present: SlotBag = field(default_factory=SlotBag)  # slots with `exists: true` here
    absent: SlotBag = field(default_factory=SlotBag)  # slots with `exists: false` here


class CountingIndex:
    def __init__(self) -> None:
        self._keys: dict[str, _KeyIndex] = {}
        self._slot_of: dict[str, int] = {}
        self._ids: list[str | None] = []
        self._predicates: list[tuple[Predicate, ...]] = []
        self._required = np.empty(0, np.int64)
        self._free: list[int] = []
        self._always: set[int] = set()  # subscriptions with no predicate at all

    def __len__(self) -> int:
        return len(self._slot_of)

    def add(self, subscription_id: str, predicates: Sequence[Predicate]) -> None:
        self.remove(subscription_id)
        slot = self._new_slot(subscription_id, tuple(predicates))
        for p in predicates:
            self._index(slot, p)
        if not predicates:
            self._always.add(slot)

    def _new_slot(self, subscription_id: str, predicates: tuple[Predicate, ...]) -> int:
        if self._free:
            slot = self._free.pop()
            self._ids[slot], self._predicates[slot] = subscription_id, predicates
        else:
            slot = len(self._ids)
            self._ids.append(subscription_id)
            self._predicates.append(predicates)
            if slot >= len(self._required):  # doubling: a resize per add was quadratic
                self._required = np.resize(self._required, max(16, 2 * slot + 2))
        self._required[slot] = len(predicates)
        self._slot_of[subscription_id] = slot
        return slot

    def _index(self, slot: int, p: Predicate) -> None:
        key = self._keys.setdefault(p.key, _KeyIndex())
        if p.op in _HASHED:
            values = p.value if isinstance(p.value, tuple) else (p.value,)
            for v in dict.fromkeys((type_class(v), v) for v in values):
                bag_add(key.hashed, v, slot)
        elif p.op in ORDERED_OPS:
            kind = type_class(p.value)
            if kind in (NUMBER, STRING):  # booleans have no order: never satisfied
                bucket = key.ordered.setdefault((kind, p.op), _Sorted())
                bucket.add(p.value, slot)  # type: ignore[arg-type]
        elif p.op is Op.EXISTS:
            if p.value is False:
                key.absent.add(slot)
            elif p.value is True:
                key.present.add(slot)
        elif p.op is Op.NE:
            if (typed := _typed(p.value)) is not None:  # else never satisfied
                bag_add(key.unequal, typed[0], slot)
                bag_add(key.equal, typed, slot)
        elif isinstance(p.value, str):  # else never satisfied: left out, as boolean orders
            self._affixes(key, p.op).add(p.value, slot)

    @staticmethod
    def _affixes(key: _KeyIndex, op: Op) -> AffixIndex | NeedleIndex:
        if op is Op.CONTAINS:
            return key.needles
        return key.prefixes if op is Op.PREFIX else key.suffixes

    def remove(self, subscription_id: str) -> bool:
        slot = self._slot_of.pop(subscription_id, None)
        if slot is None:
            return False
        for p in self._predicates[slot]:
            self._unindex(slot, p)
        self._always.discard(slot)
        self._ids[slot], self._predicates[slot] = None, ()
        self._required[slot] = -1
        self._free.append(slot)
        return True

    def _unindex(self, slot: int, p: Predicate) -> None:
        key = self._keys[p.key]
        if p.op in _HASHED:
            values = p.value if isinstance(p.value, tuple) else (p.value,)
            for v in dict.fromkeys((type_class(v), v) for v in values):
                bag_remove(key.hashed, v, slot)
        elif p.op in ORDERED_OPS and type_class(p.value) in (NUMBER, STRING):
            bucket_sorted = key.ordered[(type_class(p.value), p.op)]
            bucket_sorted.remove(p.value, slot)  # type: ignore[arg-type]
        elif p.op is Op.EXISTS:
            if p.value is False:
                key.absent.remove(slot)
            elif p.value is True:
                key.present.remove(slot)
        elif p.op is Op.NE:
            if (typed := _typed(p.value)) is not None:  # else never satisfied
                bag_remove(key.unequal, typed[0], slot)
                bag_remove(key.equal, typed, slot)
        elif isinstance(p.value, str):
            self._affixes(key, p.op).remove(p.value, slot)

    def match(self, attributes: Mapping[str, Scalar]) -> list[str]:
        hits, unhits = self._satisfied(attributes)
        matched = set(self._always)
        if hits.size:
            counts = np.bincount(hits, minlength=len(self._ids))
            if unhits.size:  # `!=` predicates whose value is the event's: counted, then not
                counts -= np.bincount(unhits, minlength=len(counts))
            required = self._required[: len(counts)]
            matched.update(np.flatnonzero(counts == required).tolist())
        return [self._ids[s] for s in sorted(matched)]  # type: ignore[misc]

    def _satisfied(self, attributes: Mapping[str, Scalar]) -> tuple[np.ndarray, np.ndarray]:
        """The slot of each satisfied predicate (a slot once per predicate), and of each `!=`
        predicate counted among them that does not hold after all."""
        parts: list[np.ndarray | list[int]] = []
        unparts: list[np.ndarray] = []
        for name, key in self._keys.items():
            if name not in attributes:
                if len(key.absent):
                    parts.append(key.absent.array())
                continue
            x = attributes[name]
            kind = type_class(x)
            if (bag := key.hashed.get((kind, x))) is not None:
                parts.append(bag.array())
            for (k, op), bucket in key.ordered.items():
                if k == kind:
                    parts.append(bucket.satisfied(op, x))
            if len(key.present):
                parts.append(key.present.array())
            if kind in key.unequal:
                parts.append(key.unequal[kind].array())
                if (kind, x) in key.equal:
                    unparts.append(key.equal[(kind, x)].array())
            if isinstance(x, str):
                parts.extend(self._strings(key, x))
        return _joined(parts), _joined(unparts)

    @staticmethod
    def _strings(key: _KeyIndex, x: str) -> list[np.ndarray | list[int]]:
        found: list[np.ndarray | list[int]] = []
        if len(key.prefixes):
            found += key.prefixes.satisfied(x)
        if len(key.suffixes):
            found += key.suffixes.satisfied(x)
        if len(key.needles):
            found.append(key.needles.satisfied(x))
        return found

    def match_batch(self, events: Sequence[Mapping[str, Scalar]]) -> list[list[str]]:
        return [self.match(e) for e in events]


def _typed(value: Scalar | tuple[Scalar, ...]) -> tuple[int, Scalar] | None:
    """A value's hash key, as `=`'s (None for a value of no type, which no value equals)."""
    kind = type_class(value)
    return None if kind == -1 or isinstance(value, tuple) else (kind, value)


def _joined(parts: Sequence[np.ndarray | list[int]]) -> np.ndarray:
    chunks = [np.asarray(p, np.int64) for p in parts if len(p)]
    return np.concatenate(chunks) if chunks else np.empty(0, np.int64)


class ContentIndex:
    """Routes each subscription to the interval index or the counting index; answers from both."""

    def __init__(
        self,
        threads: int = 1,
        bitmap_budget_mib: int = 640,
        rebuild_from: int = 64,
        delta_limit: int = 1024,
    ) -> None:
        self.intervals = IntervalIndex(bitmap_budget_mib, threads, rebuild_from, delta_limit)
        self.counting = CountingIndex()

    def __len__(self) -> int:
        return len(self.intervals) + len(self.counting)

    def add(self, subscription_id: str, predicates: Sequence[Predicate]) -> None:
        self.add_many([(subscription_id, predicates)])

    def add_many(self, items: Sequence[tuple[str, Sequence[Predicate]]]) -> None:
        """Add (or replace) many subscriptions at once: the bulk path for a large build."""
        numeric = []
        for sid, preds in items:
            if accepts(preds) and sid:  # the interval index reads "" as a removed id
                self.counting.remove(sid)
                numeric.append((sid, preds))
            else:
                self.intervals.remove(sid)
                self.counting.add(sid, preds)
        if numeric:
            self.intervals.add_many(numeric)

    def add_arrays(self, ids: Sequence[str], rows: IntervalRows) -> None:
        """Bulk load of numeric interval subscriptions as columns (`IntervalIndex.add_arrays`:
        row i of `rows` is ids[i]); ids held by the counting index move."""
        if len(self.counting):
            for sid in ids:
                self.counting.remove(sid)
        self.intervals.add_arrays(ids, rows)

    def remove(self, subscription_id: str) -> bool:
        return self.intervals.remove(subscription_id) or self.counting.remove(subscription_id)

    def remove_many(self, subscription_ids: Iterable[str]) -> int:
        """`remove` of each: the interval index's at once; how many were there."""
        subscription_ids = list(subscription_ids)  # (read twice)
        removed = self.intervals.remove_many(subscription_ids)
        if len(self.counting):
            removed += sum(map(self.counting.remove, subscription_ids))
        return removed

    def wait(self) -> None:
        """Until background merges and rebuilds have landed (answers are right meanwhile,
        but a large delta is checked subscription by subscription)."""
        self.intervals.wait()

    def slot_of(self, subscription_id: str) -> int | None:
        """The interval index's slot of a subscription, or None (not there, or counted)."""
        return self.intervals.slot_of(subscription_id)

    def slots_of(self, subscription_ids: Iterable[str]) -> list[int | None]:
        return self.intervals.slots_of(subscription_ids)

    def ids_of(self, slots: Slots) -> list[str]:
        return self.intervals.ids_of(slots)

    def match(self, attributes: Mapping[str, Scalar]) -> list[str]:
        return self.intervals.match(attributes) + self.counting.match(attributes)

    def match_slots_batch(
        self, events: Sequence[Mapping[str, Scalar]]
    ) -> list[tuple[Slots, list[str]]]:
        """Per event: the interval index's matching slots (integers, named by `ids_of` before
        the next write) and the counting index's matching ids."""
        slots = self.intervals.match_slots_batch(events)
        if not len(self.counting):
            return [(s, []) for s in slots]
        return [(s, self.counting.match(e)) for s, e in zip(slots, events, strict=True)]

    def match_batch(self, events: Sequence[Mapping[str, Scalar]]) -> list[list[str]]:
        numeric = self.intervals.match_batch(events)
        if not len(self.counting):
            return numeric
        return [a + self.counting.match(e) for a, e in zip(numeric, events, strict=True)]
