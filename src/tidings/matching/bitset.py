"""The interval index: numeric comparison subscriptions as packed bitsets ("negative marking").

A subscription here is a conjunction of `<`, `<=`, `>`, `>=`, `=` on numbers. Per attribute the
value domain is cut into cells (equi-depth over the predicates' bounds, recomputed when the
index has doubled); per cell a packed bitmap (uint64 words, one bit per slot) of the
subscriptions that the cell rules out entirely, plus one "missing" row of every subscription
with a predicate on the attribute (an event without it, or with a non-number, rules them out).
An event ORs one row per attribute into the tombstone bitmap; the clear bits are candidates,
few, and are checked exactly and vectorised against a padded predicate matrix, so a predicate
straddling its cell's boundary is decided by its real value.

Inserts go to a delta, checked directly with the candidates and merged into the rows in one
vectorised pass when full; the whole index is rebuilt (cells recomputed) when it has doubled.
Deletes set a tombstone bit; a freed slot is reused only after a rebuild has cleared its bits.
Numbers compare as float64: integers beyond 2**53 are not routed here (see `accepts`).
"""

from __future__ import annotations

import math
from bisect import bisect_right
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import numpy.typing as npt

from tidings.model import Op, Predicate, Scalar

Words = npt.NDArray[np.uint64]
NOP, LT, LE, GT, GE, EQ = range(6)
OP_CODES = {Op.LT: LT, Op.LE: LE, Op.GT: GT, Op.GE: GE, Op.EQ: EQ}
EXACT = 2**53
ALL = np.uint64(0xFFFFFFFFFFFFFFFF)


def _number(value: object) -> bool:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    return not isinstance(value, int) or -EXACT <= value <= EXACT


def accepts(predicates: Sequence[Predicate]) -> bool:
    """Can this conjunction live in the interval index?"""
    return bool(predicates) and all(p.op in OP_CODES and _number(p.value) for p in predicates)


def intervals(
    ops: npt.NDArray[np.integer], vals: npt.NDArray[np.floating]
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """Each predicate as the closed float interval [lo, hi] it accepts.

    `x > v` is `x >= nextafter(v, +inf)` exactly, for float64 x: no float lies between.
    """
    v = vals.astype(np.float64)
    up, down = np.nextafter(v, np.inf), np.nextafter(v, -np.inf)
    lo = np.select([ops == GT, (ops == GE) | (ops == EQ)], [up, v], -np.inf)
    hi = np.select([ops == LT, (ops == LE) | (ops == EQ)], [down, v], np.inf)
    return lo, hi


def _interval(op: Op, v: float) -> tuple[float, float]:
    """One predicate's [lo, hi], as `intervals` computes it for arrays."""
    if op is Op.EQ:
        return v, v
    if op in (Op.GT, Op.GE):
        return (math.nextafter(v, math.inf) if op is Op.GT else v), math.inf
    return -math.inf, (math.nextafter(v, -math.inf) if op is Op.LT else v)


class IntervalIndex:
    def __init__(
        self,
        bitmap_budget_mib: int = 640,
        threads: int = 1,
        rebuild_from: int = 64,
        delta_limit: int = 1024,
    ) -> None:
        self._rebuild_from, self._delta_limit = rebuild_from, delta_limit
        self._delta: dict[int, None] = {}  # slots added since the last merge, checked directly
        self._budget = bitmap_budget_mib * 2**20
        self._threads = threads
        self._attr_of: dict[str, int] = {}
        self._names: list[str] = []
        self._slot_of: dict[str, int] = {}
        self._ids: list[str | None] = []
        self._id_array = np.full(64, None, object)  # the same, for one C-level fetch per answer
        self._free: list[int] = []
        self._width = 1  # predicates per row of the matrices
        self._capacity = 64
        # per slot, per predicate: attribute (-1: padding), closed interval [lo, hi]
        self._attrs = np.full((self._capacity, 1), -1, np.int32)
        self._lo = np.full((self._capacity, 1), -np.inf)
        self._hi = np.full((self._capacity, 1), np.inf)
        self._dead = np.full(1, ALL, np.uint64)
        self._rows = np.zeros((0, 2, 1), np.uint64)  # (attribute, cell + missing row, word)
        self._cuts: list[list[float]] = []  # per attribute: interior cell boundaries
        self._cells = 1
        self._built_at = 0

    def __len__(self) -> int:
        return len(self._slot_of)

    # -- writing -------------------------------------------------------------------------

    def add(self, subscription_id: str, predicates: Sequence[Predicate]) -> None:
        self.add_many([(subscription_id, predicates)])

    def add_many(self, items: Sequence[tuple[str, Sequence[Predicate]]]) -> None:
        """Add (or replace) many subscriptions; bits are set per subscription, or all rebuilt."""
        for sid, _ in items:
            self.remove(sid)
        self._delta.update((self._claim(sid, preds), None) for sid, preds in items)
        self._settle()

    def _settle(self) -> None:
        """Rebuild when the index has doubled; merge the delta when it is full."""
        retired = len(self._ids) - len(self._free) - len(self)
        if len(self) >= max(self._rebuild_from, 2 * self._built_at) or retired > max(
            self._rebuild_from, len(self)
        ):
            self.rebuild()
        elif len(self._delta) >= self._delta_limit:
            self.merge()

    def add_arrays(
        self,
        ids: Sequence[str],
        keys: Sequence[str],
        attrs: npt.NDArray[np.integer],
        ops: npt.NDArray[np.integer],
        vals: npt.NDArray[np.floating],
    ) -> None:
        """Bulk load: row i of `attrs` (indices into `keys`), `ops` (codes), `vals` is ids[i]."""
        for sid in ids:
            self.remove(sid)
        start, n = len(self._ids), len(ids)
        self._ids.extend(ids)
        self._grow(start + n)
        self._id_array[start : start + n] = ids
        self._slot_of.update(zip(ids, range(start, start + n), strict=True))
        self._grow(start + n)
        self._widen(attrs.shape[1])
        to_attr = np.array([self._attribute(k) for k in keys], np.int32)
        lo, hi = intervals(ops, vals)
        self._store(slice(start, start + n), to_attr[attrs], lo, hi)
        self._delta.update(dict.fromkeys(range(start, start + n)))
        if 8 * n >= len(self):
            self.rebuild()
        self._settle()

    def _claim(self, subscription_id: str, predicates: Sequence[Predicate]) -> int:
        slot = self._free.pop() if self._free else len(self._ids)
        if slot == len(self._ids):
            self._ids.append(None)
            self._grow(slot + 1)
        self._ids[slot] = self._id_array[slot] = subscription_id
        self._slot_of[subscription_id] = slot
        self._widen(len(predicates))
        n = len(predicates)
        self._attrs[slot, :n] = [self._attribute(p.key) for p in predicates]
        self._attrs[slot, n:] = -1
        bounds = [_interval(p.op, float(p.value)) for p in predicates]  # type: ignore[arg-type]
        self._lo[slot, :n], self._hi[slot, :n] = [b[0] for b in bounds], [b[1] for b in bounds]
        self._lo[slot, n:], self._hi[slot, n:] = -math.inf, math.inf
        return slot

    def _store(
        self,
        rows: int | slice,
        attrs: npt.NDArray[np.int32],
        lo: npt.NDArray[np.float64],
        hi: npt.NDArray[np.float64],
    ) -> None:
        width = attrs.shape[-1]
        self._attrs[rows], self._lo[rows], self._hi[rows] = -1, -np.inf, np.inf
        self._attrs[rows, :width], self._lo[rows, :width], self._hi[rows, :width] = attrs, lo, hi

    def remove(self, subscription_id: str) -> bool:
        slot = self._slot_of.pop(subscription_id, None)
        if slot is None:
            return False
        self._ids[slot] = self._id_array[slot] = None
        self._dead[slot >> 6] |= np.uint64(1 << (slot & 63))
        self._delta.pop(slot, None)
        return True

    def merge(self) -> None:
        """Set the delta's bits in the rows, all at once (slots share words: ufunc.at)."""
        slots = np.fromiter(self._delta, np.intp, len(self._delta))
        self._delta.clear()
        if not slots.size:
            return
        lo, hi = self._spans(slots)
        words, bits = slots >> 6, np.left_shift(np.uint64(1), (slots & 63).astype(np.uint64))
        first, span = int(words.min()), int(words.max() - words.min() + 1)
        dense = span * 64 <= 8 * len(slots) + 4096  # new slots are mostly consecutive
        for a in range(len(self._names)):
            self._ensure_rows(a)
            ruled = self._ruled(lo[a], hi[a], np.asarray(self._cuts[a]))
            if dense:
                block = np.zeros((self._cells + 1, span * 64), bool)
                block[:, slots - first * 64] = ruled.T
                packed = np.packbits(block, axis=1, bitorder="little").view(np.uint64)
                self._rows[a][:, first : first + span] |= packed
            else:
                s, c = np.nonzero(ruled)
                np.bitwise_or.at(self._rows[a], (c, words[s]), bits[s])
        np.bitwise_and.at(self._dead, words, ~bits)

    def _ruled(
        self, lo: npt.NDArray[np.float64], hi: npt.NDArray[np.float64], cut: npt.NDArray[np.float64]
    ) -> npt.NDArray[np.bool_]:
        """(slot, row): the cells that rule each slot out, and the missing row."""
        has = ~np.isnan(lo)
        first, last = np.searchsorted(cut, lo, "right"), np.searchsorted(cut, hi, "right")
        c = np.arange(self._cells + 1)
        ruled = has[:, None] & ((c < first[:, None]) | (c > last[:, None]))
        ruled[:, self._cells] = has
        return ruled

    def _attribute(self, key: str) -> int:
        a = self._attr_of.get(key)
        if a is None:
            a = self._attr_of[key] = len(self._names)
            self._names.append(key)
        return a

    def _ensure_rows(self, a: int) -> None:
        if a >= len(self._rows):
            more = np.zeros((a + 1 - len(self._rows), self._cells + 1, len(self._dead)), np.uint64)
            self._rows = np.concatenate([self._rows, more])
            self._cuts.extend([] for _ in range(len(self._rows) - len(self._cuts)))

    def _widen(self, width: int) -> None:
        if width > self._width:
            self._pad_matrices(((0, 0), (0, width - self._width)))
            self._width = width

    def _grow(self, slots: int) -> None:
        if slots <= self._capacity:
            return
        cap = max(2 * self._capacity, 1 << (slots - 1).bit_length())
        self._pad_matrices(((0, cap - self._capacity), (0, 0)))
        self._id_array = np.concatenate(
            [self._id_array, np.full(cap - self._capacity, None, object)]
        )
        self._capacity = cap
        words = (cap + 63) // 64
        extra = words - len(self._dead)
        self._dead = np.concatenate([self._dead, np.full(extra, ALL, np.uint64)])
        self._rows = np.pad(self._rows, ((0, 0), (0, 0), (0, extra)))

    def _pad_matrices(self, pad: tuple[tuple[int, int], tuple[int, int]]) -> None:
        self._attrs = np.pad(self._attrs, pad, constant_values=-1)
        self._lo = np.pad(self._lo, pad, constant_values=-np.inf)
        self._hi = np.pad(self._hi, pad, constant_values=np.inf)

    # -- rebuilding ----------------------------------------------------------------------

    def rebuild(self) -> None:
        """Recompute the cells from the current bounds and every row, vectorised."""
        n, words = len(self._ids), len(self._dead)
        attrs_n = len(self._names)
        per_row = max(1, attrs_n) * words * 8
        self._cells = int(min(256, max(8, self._budget // per_row - 1)))
        alive = np.array([i is not None for i in self._ids], bool)
        lo, hi = self._spans(np.arange(n))
        lo[:, ~alive] = hi[:, ~alive] = np.nan
        self._rows = np.zeros((0, 0, 0), np.uint64)  # let the old rows go before the new ones exist
        self._rows = np.empty((attrs_n, self._cells + 1, words), np.uint64)
        with ThreadPoolExecutor(max(1, self._threads)) as pool:
            build = self._build_attribute
            self._cuts = list(
                pool.map(lambda a: build(lo[a], hi[a], self._rows[a]), range(attrs_n))
            )
        self._dead = np.full(words, ALL, np.uint64)
        live = np.zeros(words * 64, bool)
        live[np.fromiter(self._slot_of.values(), np.intp, len(self._slot_of))] = True
        self._dead &= ~np.packbits(live, bitorder="little").view(np.uint64)
        self._built_at = len(self)
        self._delta.clear()
        self._free = np.flatnonzero(~alive).tolist()[::-1]  # clean now: no bits set

    def _spans(
        self, slots: npt.NDArray[np.intp]
    ) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
        """(attribute, i) -> the interval slots[i] accepts there; NaN: no predicate there."""
        attrs = self._attrs[slots]
        used = attrs >= 0
        at = (attrs[used], np.broadcast_to(np.arange(len(slots))[:, None], attrs.shape)[used])
        lo = np.full((len(self._names), len(slots)), np.nan)
        hi = np.full((len(self._names), len(slots)), np.nan)
        np.fmax.at(lo, at, self._lo[slots][used])
        np.fmin.at(hi, at, self._hi[slots][used])
        return lo, hi

    def _build_attribute(
        self, lo: npt.NDArray[np.float64], hi: npt.NDArray[np.float64], rows: Words
    ) -> list[float]:
        has = ~np.isnan(lo)
        bounds = np.concatenate([lo[has], hi[has]])
        bounds = bounds[np.isfinite(bounds)]
        qs = np.linspace(0, 1, self._cells + 1)[1:-1]
        cut = np.unique(np.quantile(bounds, qs)) if bounds.size else np.empty(0)
        slots = np.flatnonzero(has)
        first, last = (
            np.searchsorted(cut, lo[slots], "right"),
            np.searchsorted(cut, hi[slots], "right"),
        )
        at, bits = slots >> 6, np.left_shift(np.uint64(1), (slots & 63).astype(np.uint64))
        cells = self._cells
        starts, ends = np.zeros_like(rows), np.zeros_like(rows)
        np.bitwise_or.at(starts, (first, at), bits)  # row j: slots whose interval starts in j
        np.bitwise_or.at(ends, (last, at), bits)
        # cell c rules a slot out when its interval starts after c or ends before c
        rows[:] = 0
        for c in range(cells - 2, -1, -1):  # a loop of row ORs: accumulate() is slower here
            np.bitwise_or(rows[c + 1], starts[c + 1], out=rows[c])
        below = ends[0].copy()
        for c in range(1, cells):
            rows[c] |= below
            below |= ends[c]
        np.bitwise_or.at(rows[cells], at, bits)
        return list(cut.tolist())

    # -- matching ------------------------------------------------------------------------

    def _vector(self, attributes: Mapping[str, Scalar]) -> npt.NDArray[np.float64]:
        """The event's value per indexed attribute (NaN: absent or not a number), then 0."""
        x = np.full(len(self._names) + 1, np.nan)
        x[-1] = 0.0
        for name, value in attributes.items():
            a = self._attr_of.get(name)
            if a is not None and _number(value):
                x[a] = float(value)
        return x

    def _cell_rows(self, x: npt.NDArray[np.float64]) -> list[int]:
        missing = self._cells
        return [
            missing if v != v else bisect_right(cut, v)  # v != v: NaN
            for v, cut in zip(x.tolist(), self._cuts, strict=False)
        ]

    def match(self, attributes: Mapping[str, Scalar]) -> list[str]:
        return self.match_batch([attributes])[0]

    def match_batch(self, events: Sequence[Mapping[str, Scalar]]) -> list[list[str]]:
        """Match many events; with threads > 1, chunks of the batch run in parallel."""
        if not self._slot_of or not events:
            return [[] for _ in events]
        chunks = max(1, min(self._threads, len(events) // 8))
        if chunks == 1:
            return self._match_chunk(events)
        step = -(-len(events) // chunks)
        parts = [events[i : i + step] for i in range(0, len(events), step)]
        with ThreadPoolExecutor(chunks) as pool:
            return [answer for part in pool.map(self._match_chunk, parts) for answer in part]

    def _match_chunk(self, events: Sequence[Mapping[str, Scalar]]) -> list[list[str]]:
        return [self._match_one(e) for e in events]

    def _match_one(self, attributes: Mapping[str, Scalar]) -> list[str]:
        x = self._vector(attributes)
        slots = self._candidates(self._cell_rows(x))
        if self._delta:
            slots = np.concatenate([slots, np.fromiter(self._delta, np.intp, len(self._delta))])
        v = x[self._attrs[slots]]  # padding (-1) reads the last entry: 0.0, in (-inf, inf)
        ok = ((v >= self._lo[slots]) & (v <= self._hi[slots])).all(axis=1)
        found: list[str] = self._id_array[slots[ok]].tolist()
        return found

    def _candidates(self, cells: list[int]) -> npt.NDArray[np.intp]:
        """Slots that no row rules out (tombstones and unused slots are ruled out)."""
        acc = self._dead.copy()
        if cells:
            acc |= np.bitwise_or.reduce(self._rows[np.arange(len(cells)), cells], axis=0)
        words = np.flatnonzero(acc != ALL)
        bits = np.flatnonzero(np.unpackbits((~acc[words]).view(np.uint8), bitorder="little"))
        found: npt.NDArray[np.intp] = words[bits >> 6] * 64 + (bits & 63)
        return found

    def memory_bytes(self) -> int:
        arrays: list[npt.NDArray[np.generic]] = [self._attrs, self._lo, self._hi, self._dead]
        return sum(a.nbytes for a in [*arrays, self._rows])
