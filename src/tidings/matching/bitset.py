"""The interval index: numeric comparison subscriptions as packed bitsets ("negative marking").

A subscription here is a conjunction of `<`, `<=`, `>`, `>=`, `=` on numbers and `=` on text;
its predicates on one attribute are merged into one closed interval (text values by their
codes, on an attribute of their own). Per attribute the value domain is cut
into cells, and each cell has a bitmap of the subscriptions it rules out (see `cells`). An
event ORs one row per attribute into the tombstone bitmap; the clear bits are candidates,
few, and one whose event lies in a cell holding one of its bounds is checked against its
real bounds (the compiled loop in `kernels` does all of this per event).

Writes never stop the answers. The answering state (rows, cuts, tombstones, delta) is an
immutable snapshot that readers take once per call; writers publish a new one under a lock.
An insert goes to the delta, checked directly with the candidates. When the delta is full it
is merged (its bits set in the rows; its slots are tombstoned meanwhile, so readers ignore the
half-set bits), and when the index has doubled it is rebuilt (cells recomputed); both run in
a background thread once the index is large (`background_from` slots), then swap the new
snapshot in atomically. A removal sets a tombstone bit; its slot is reused only after a
rebuild that started later has been published (the rows then hold none of its bits) and
every match that began before that publication has finished (a match still reading the old
rows could otherwise accept the slot for the subscription it used to hold and name the new
one): matches register the epoch they read, and a rebuild's freed slots wait for it.

Numbers compare as float64. Subscription values must be below 2**53 in magnitude (see
`accepts`); then an event number converted to float64 compares with them exactly.
"""

from __future__ import annotations

import math
import threading
from bisect import bisect_right
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TypeVar

import numpy as np
import numpy.typing as npt

from tidings.matching import cells as cl
from tidings.matching import kernels
from tidings.matching.cells import ALL, EQ, GE, GT, LE, LT, Floats, Slots, Words, intervals
from tidings.model import Op, Predicate, Scalar

__all__ = ["EQ", "GE", "GT", "LE", "LT", "IntervalIndex", "accepts", "intervals", "numeric"]

OP_CODES = {Op.LT: LT, Op.LE: LE, Op.GT: GT, Op.GE: GE, Op.EQ: EQ}
EXACT = 2**53
CHUNK = 64  # events matched together: one call of the compiled loop
Ints = npt.NDArray[np.int32]
T = TypeVar("T")
_NO_EDGES = np.zeros((0, 1, 2), np.uint16)
_NUMBER_TYPES = (int, float)


def _number(value: object) -> bool:
    """A subscription value the index compares exactly: a number below 2**53 in magnitude."""
    kind = type(value)
    if kind is int or kind is float:
        return -EXACT < value < EXACT  # type: ignore[operator]
    if isinstance(value, bool) or not isinstance(value, _NUMBER_TYPES):
        return False
    return -EXACT < value < EXACT


def _numeric(p: Predicate) -> bool:
    return p.op in OP_CODES and _number(p.value)


def numeric(predicates: Sequence[Predicate]) -> bool:
    """Is this conjunction all comparisons with numbers, as the bulk path (`add_arrays`)
    takes them?"""
    return bool(predicates) and all(_numeric(p) for p in predicates)


def accepts(predicates: Sequence[Predicate]) -> bool:
    """Can this conjunction live in the interval index (comparisons with numbers, equality
    with text)?"""
    return bool(predicates) and all(
        _numeric(p) or (p.op is Op.EQ and isinstance(p.value, str)) for p in predicates
    )


def event_number(value: object) -> float:
    """An event value as float64 (NaN when not a number); huge integers become +-inf, which
    compares with every accepted value as the integer does."""
    kind = type(value)
    if kind is float:
        return value  # type: ignore[return-value]
    if kind is not int and (isinstance(value, bool) or not isinstance(value, _NUMBER_TYPES)):
        return math.nan
    if -EXACT < value < EXACT:  # type: ignore[operator]
        return float(value)  # type: ignore[arg-type]
    return math.inf if value > 0 else -math.inf  # type: ignore[operator]


# One predicate's [lo, hi] by operator, as `cells.intervals` computes it for arrays.
_INTERVAL: dict[Op, Callable[[float], tuple[float, float]]] = {
    Op.GE: lambda v: (v, math.inf),
    Op.LE: lambda v: (-math.inf, v),
    Op.EQ: lambda v: (v, v),
    Op.GT: lambda v: (math.nextafter(v, math.inf), math.inf),
    Op.LT: lambda v: (-math.inf, math.nextafter(v, -math.inf)),
}


@dataclass(frozen=True, slots=True)
class _State:
    """What readers answer from. `dead` only ever gains bits in place (removals)."""

    rows: Words  # (attributes, cells + 1, words); may cover fewer words than `dead`
    cuts: tuple[list[float], ...]  # per attribute: interior cell boundaries
    dead: Words  # set: not answered by the rows (free, removed, unmerged)
    delta: Slots  # slots checked directly
    edges: cl.Edges | None  # (slot, interval, 2): edge cell ids (`cells.edges_of`); None: empty
    used: int  # words of the rows that hold a live slot: every slot past them is dead

    @property
    def cells(self) -> int:
        return int(self.rows.shape[1]) - 1

    def but(
        self, *, dead: Words | None = None, delta: Slots | None = None, used: int = 0
    ) -> _State:
        """This state with new tombstones, delta or more used words (`dataclasses.replace` is
        slow here)."""
        dead = self.dead if dead is None else dead
        delta = self.delta if delta is None else delta
        return _State(self.rows, self.cuts, dead, delta, self.edges, max(used, self.used))


@dataclass(frozen=True, slots=True)
class _Matrices:
    """Per slot, per interval: attribute (-1: padding) and closed bounds [lo, hi], the two
    bounds side by side (one gather fetches both)."""

    attrs: Ints
    bounds: Floats  # (slots, intervals, 2)

    @property
    def lo(self) -> Floats:
        return self.bounds[..., 0]

    @property
    def hi(self) -> Floats:
        return self.bounds[..., 1]


def _matrices(attrs: Ints, lo: Floats, hi: Floats) -> _Matrices:
    return _Matrices(attrs, np.stack([lo, hi], axis=-1))


def _empty_state(words: int) -> _State:
    rows = np.zeros((0, 2, 0), np.uint64)
    return _State(rows, (), np.full(words, ALL), np.empty(0, np.intp), None, 0)


@dataclass(frozen=True, slots=True)
class IntervalRows:
    """Numeric interval subscriptions as columns, for the bulk path (`add_arrays`): row i is
    one subscription, its predicates `keys[attrs[i, j]] ops[i, j] vals[i, j]` (op codes as
    `OP_CODES`; a shorter subscription repeats its last predicate)."""

    keys: Sequence[str]
    attrs: npt.NDArray[np.integer]
    ops: npt.NDArray[np.integer]
    vals: npt.NDArray[np.floating]


class IntervalIndex:
    def __init__(
        self,
        bitmap_budget_mib: int = 640,
        threads: int = 1,
        rebuild_from: int = 64,
        delta_limit: int = 1024,
        background_from: int = 65_536,
    ) -> None:
        self._rebuild_from, self._delta_limit = rebuild_from, delta_limit
        self._background_from = background_from
        self._budget = bitmap_budget_mib * 2**20
        self._threads = max(1, threads)
        self._pool: ThreadPoolExecutor | None = None
        self._lock = threading.RLock()
        self._worker: threading.Thread | None = None
        self._attr_of: dict[str, int] = {}  # key -> attribute of its numbers
        self._names: list[str] = []
        # `key = "text"` is an interval too: on a second attribute of the key, holding each
        # text value's code (numbered as first seen), [code, code]. An event's text maps to
        # its code, or NaN when no subscription names it (then it rules them all out).
        self._text_of: dict[str, int] = {}  # key -> attribute of its text codes
        self._codes: dict[str, dict[str, int]] = {}
        self._slot_of: dict[str, int] = {}
        self._ids: list[str | None] = []
        # The same as fixed-width text ('' once removed): an answer is one gather of a compact
        # array, not a cache miss per id string scattered over the heap.
        self._id_text: npt.NDArray[np.str_] = np.zeros(64, "U1")
        self._free: list[int] = []  # reusable now
        self._retired: list[int] = []  # reusable once a rebuild started after their removal lands
        # ... and once no match reads a state published before that: (epoch, slots)
        self._limbo: deque[tuple[int, list[int]]] = deque()
        self._epoch = 0  # rebuilds published
        self._readers: dict[int, int] = {}  # epoch -> matches running that began in it
        self._readers_lock = threading.Lock()
        # slot -> (attributes, lo, hi) of inserts not yet in the matrices: written in one
        # vectorised step (and only then published in the delta) by the next read or merge
        self._staged: dict[int, tuple[list[int], list[float], list[float]]] = {}
        self._built_at = 0
        self._mats = _matrices(np.full((64, 1), -1, np.int32), np.full((64, 1), -np.inf),
                               np.full((64, 1), np.inf))  # fmt: skip
        self._state = _empty_state(1)

    def __len__(self) -> int:
        return len(self._slot_of)

    def slot_of(self, subscription_id: str) -> int | None:
        """The slot answers name this subscription by (kept until it is removed), or None."""
        return self._slot_of.get(subscription_id)

    def slots_of(self, subscription_ids: Iterable[str]) -> list[int | None]:
        """`slot_of` of each, in one C-level pass."""
        return list(map(self._slot_of.get, subscription_ids))

    # -- writing -------------------------------------------------------------------------

    def add(self, subscription_id: str, predicates: Sequence[Predicate]) -> None:
        self.add_many([(subscription_id, predicates)])

    def add_many(self, items: Sequence[tuple[str, Sequence[Predicate]]]) -> None:
        """Add (or replace) many subscriptions: they join the delta, checked directly."""
        with self._lock:
            for sid, _ in items:
                self._remove(sid)
            for sid, preds in items:
                self._claim(sid, preds)
        self._settle()

    def add_arrays(self, ids: Sequence[str], rows: IntervalRows) -> None:
        """Bulk load: row i of `rows` is ids[i]."""
        with self._lock:
            to_attr = np.array([self._attribute(k) for k in rows.keys], np.int32)
            a, lo, hi = _merge_per_attribute(to_attr[rows.attrs], *intervals(rows.ops, rows.vals))
            if not self._slot_of.keys().isdisjoint(ids):  # (replacements: the loop only then)
                for sid in ids:
                    self._remove(sid)
            start, n = len(self._ids), len(ids)
            self._ids.extend(ids)
            self._grow(start + n, a.shape[1])
            self._store_ids(slice(start, start + n), ids)
            self._slot_of.update(zip(ids, range(start, start + n), strict=True))
            m = self._mats
            at, width = slice(start, start + n), a.shape[1]
            m.attrs[at], m.lo[at], m.hi[at] = -1, -np.inf, np.inf
            m.attrs[at, :width], m.lo[at, :width], m.hi[at, :width] = a, lo, hi
            self._publish_delta(np.arange(start, start + n))
        if 8 * n >= len(self):
            self.rebuild()
        self._settle()

    def remove(self, subscription_id: str) -> bool:
        with self._lock:
            return self._remove(subscription_id)

    def remove_many(self, subscription_ids: Iterable[str]) -> int:
        """`remove` of each, the array work done once for all; how many were there."""
        with self._lock:
            pop = self._slot_of.pop
            slots = [s for sid in subscription_ids if (s := pop(sid, None)) is not None]
            if not slots:
                return 0
            for slot in slots:
                self._ids[slot] = None
            at = np.array(slots, np.intp)
            self._id_text[at] = ""
            state = self._state
            cl.set_each_bit(state.dead, at)
            unstaged = [s for s in slots if self._staged.pop(s, None) is None]
            if unstaged and state.delta.size:  # (staged ones are not in the delta yet)
                gone = np.zeros(max(int(state.delta.max()), max(unstaged)) + 1, bool)
                gone[unstaged] = True
                hit = gone[state.delta]
                if hit.any():
                    self._state = state.but(delta=state.delta[~hit])
            self._retired.extend(slots)
            return len(slots)

    def _remove(self, subscription_id: str) -> bool:
        slot = self._slot_of.pop(subscription_id, None)
        if slot is None:
            return False
        self._ids[slot], self._id_text[slot] = None, ""
        state = self._state
        cl.set_bit(state.dead, slot)
        if self._staged.pop(slot, None) is None and (state.delta == slot).any():
            self._state = state.but(delta=state.delta[state.delta != slot])
        self._retired.append(slot)
        return True

    def _claim(self, subscription_id: str, predicates: Sequence[Predicate]) -> int:
        if not self._free and self._limbo:
            self._reclaim()
        slot = self._free.pop() if self._free else len(self._ids)
        merged: dict[int, list[float]] = {}  # attribute -> [lo, hi]: predicates intersected
        attr_of = self._attr_of
        for p in predicates:
            if isinstance(p.value, str):
                a, (lo, hi) = self._text_bounds(p.key, p.value)
            else:  # inline: inserts are a loop of these, 10-20 per subscription
                known = attr_of.get(p.key)
                a = self._attribute(p.key) if known is None else known
                lo, hi = _INTERVAL[p.op](float(p.value))  # type: ignore[arg-type]
            bounds = merged.get(a)
            if bounds is None:
                merged[a] = [lo, hi]
            else:
                bounds[0], bounds[1] = max(bounds[0], lo), min(bounds[1], hi)
        if slot == len(self._ids):
            self._ids.append(None)
        self._grow(slot + 1, len(merged))
        attrs = list(merged)
        bounds_ = list(merged.values())
        self._staged[slot] = (attrs, [b[0] for b in bounds_], [b[1] for b in bounds_])
        self._ids[slot] = subscription_id
        self._store_ids(slice(slot, slot + 1), [subscription_id])
        self._slot_of[subscription_id] = slot
        return slot

    def _flush(self) -> None:
        """Write the staged inserts into the matrices at once, then publish them in the delta."""
        with self._lock:
            if not self._staged:
                return
            m, staged = self._mats, self._staged
            width, attrs, lows, highs = m.attrs.shape[1], [], [], []
            for a, lo, hi in staged.values():
                pad = width - len(a)
                attrs.append(a + [-1] * pad)
                lows.append(lo + [-math.inf] * pad)
                highs.append(hi + [math.inf] * pad)
            slots = np.fromiter(staged, np.intp, len(staged))
            m.attrs[slots], m.lo[slots], m.hi[slots] = attrs, lows, highs
            # Published before `_staged` empties: a reader that finds nothing staged (and so
            # does not wait for this lock) must find these slots in the delta.
            self._publish_delta(slots)
            self._staged = {}

    def _reclaim(self) -> None:
        """Free the slots of every rebuild that no running match predates."""
        with self._readers_lock:
            oldest = min(self._readers, default=self._epoch)
        while self._limbo and self._limbo[0][0] <= oldest:
            self._free.extend(self._limbo.popleft()[1])

    @contextmanager
    def _reading(self) -> Iterator[None]:
        """Register a match for as long as it reads a state and names its slots (registered
        before it takes the state, so it never holds a newer state than its epoch says)."""
        with self._readers_lock:
            epoch = self._epoch
            self._readers[epoch] = self._readers.get(epoch, 0) + 1
        try:
            yield
        finally:
            with self._readers_lock:
                left = self._readers[epoch] - 1
                if left:
                    self._readers[epoch] = left
                else:
                    del self._readers[epoch]

    def _store_ids(self, at: slice, ids: Sequence[str]) -> None:
        longest, width = max(map(len, ids), default=0), self._id_text.dtype.itemsize // 4
        if longest > width:  # widen: a new array, the old one stays valid for readers
            self._id_text = self._id_text.astype(f"U{max(longest, 2 * width)}")
        self._id_text[at] = ids

    def _publish_delta(self, slots: Slots) -> None:
        state = self._state
        self._state = state.but(delta=np.concatenate([state.delta, slots]))

    def _text_bounds(self, key: str, value: str) -> tuple[int, tuple[float, float]]:
        """A text equality's attribute and interval: its value's code, as [code, code]."""
        a = self._text_of.get(key)
        if a is None:  # an attribute of its own, outside `_attr_of` (numbers only)
            a = self._text_of[key] = len(self._names)
            self._names.append(key)
        codes = self._codes.setdefault(key, {})
        code = float(codes.setdefault(value, len(codes)))
        return a, (code, code)

    def _attribute(self, key: str) -> int:
        a = self._attr_of.get(key)
        if a is None:
            a = self._attr_of[key] = len(self._names)
            self._names.append(key)
        return a

    def _grow(self, slots: int, width: int) -> None:
        """Make room for `slots` slots of `width` intervals: new arrays, old ones untouched."""
        m = self._mats
        cap, old_width = m.attrs.shape
        if slots <= cap and width <= old_width:
            return
        new_cap = max(cap, 1 << (slots - 1).bit_length())
        pad = ((0, new_cap - cap), (0, max(0, width - old_width)))
        self._mats = _matrices(np.pad(m.attrs, pad, constant_values=-1),
                               np.pad(m.lo, pad, constant_values=-np.inf),
                               np.pad(m.hi, pad, constant_values=np.inf))  # fmt: skip
        if new_cap > cap:
            more = np.zeros(new_cap - cap, self._id_text.dtype)
            self._id_text = np.concatenate([self._id_text, more])
            state = self._state
            extra = np.full(new_cap // 64 - len(state.dead), ALL)
            self._state = state.but(dead=np.concatenate([state.dead, extra]))

    # -- maintenance ---------------------------------------------------------------------

    def _due(self) -> Callable[[], None] | None:
        retired = len(self._retired)
        if len(self) >= max(self._rebuild_from, 2 * self._built_at) or retired > max(
            self._rebuild_from, len(self)
        ):
            return self._rebuild
        waiting = len(self._state.delta) + len(self._staged)
        return self._merge if waiting >= self._delta_limit else None

    def _settle(self) -> None:
        """Start the merge or rebuild that is due: inline when small, else in the background."""
        with self._lock:
            job = self._due()
            if job is None or (self._worker is not None and self._worker.is_alive()):
                return
            if len(self._ids) < self._background_from:
                job()
                return
            self._worker = threading.Thread(target=self._work, args=(job,), daemon=True)
            self._worker.start()

    def _work(self, job: Callable[[], None]) -> None:
        job()
        self._settle()  # more may have become due meanwhile

    def wait(self) -> None:
        """Wait for background maintenance (merges, rebuilds) to finish."""
        while (worker := self._worker) is not None and worker.is_alive():
            worker.join()

    def merge(self) -> None:
        """Merge the delta into the rows now."""
        self.wait()
        self._merge()

    def rebuild(self) -> None:
        """Recompute the cells and every row now."""
        self.wait()
        self._rebuild()

    def _merge(self) -> None:
        with self._lock:
            self._flush()
            state, mats, slots = self._state, self._mats, self._state.delta.copy()
        if not slots.size:
            return
        attrs = mats.attrs[slots]
        edges, height = state.edges, state.cells + 1
        if (
            int(slots.max()) >= state.rows.shape[2] * 64
            or int(attrs.max()) >= len(state.cuts)
            or edges is None
            or attrs.shape[1] > edges.shape[1]
        ):
            self._rebuild()  # outside the rows, or on an attribute the rows do not know
            return
        for a, cut in enumerate(state.cuts):  # only tombstoned slots' bits change: safe to read
            i, j = np.nonzero(attrs == a)
            first, last = cl.cell_range(np.asarray(cut), mats.lo[slots[i], j], mats.hi[slots[i], j])
            marks = np.zeros((len(slots), state.cells + 1), bool)
            c = np.arange(state.cells + 1)
            marks[i] = (c < first[:, None]) | (c > last[:, None])
            marks[i, state.cells] = True
            cl.set_bits(state.rows[a], slots, marks)
            edges[slots[i], j] = cl.edges_of(a, height, first, last, edges.dtype.type)
        with self._lock:
            now = self._state
            alive = slots[self._id_text[slots] != ""]
            dead = now.dead.copy()
            cl.clear_bits(dead, alive)
            used = -(-int(alive.max(initial=-1) + 1) // 64)
            self._state = now.but(dead=dead, delta=_without(now.delta, slots), used=used)

    def _rebuild(self) -> None:
        with self._lock:  # staged inserts are written first: the rebuild reads their rows
            self._flush()
            n, mats, attributes = len(self._ids), self._mats, len(self._names)
            alive = np.fromiter(self._slot_of.values(), np.intp, len(self._slot_of))
            pending, self._retired = self._retired, []
        rows, cuts, edges = self._build(mats, n, alive, attributes)
        with self._lock:
            now = self._state
            dead = np.full(len(now.dead), ALL)
            still = alive[self._id_text[alive] != ""]
            cl.clear_bits(dead, still)
            used = min(rows.shape[2], -(-n // 64))
            self._state = _State(rows, cuts, dead, _without(now.delta, alive), edges, used)
            self._epoch += 1
            self._limbo.append((self._epoch, sorted(pending, reverse=True)))
            self._built_at = len(alive)

    def _build(
        self, mats: _Matrices, n: int, alive: Slots, attributes: int
    ) -> tuple[Words, tuple[list[float], ...], cl.Edges]:
        """New rows, cuts and edges for the `alive` slots (all below `n`), from `mats`."""
        words = max(64, mats.attrs.shape[0]) // 64
        per_row = max(1, attributes) * words * 8
        cells = int(min(256, max(8, self._budget // per_row - 1)))
        rows = np.empty((attributes, cells + 1, words), np.uint64)
        dtype = cl.edge_dtype(attributes, cells + 1)
        padding = attributes * (cells + 1)  # never an event's cell: padding is never unsure
        edges = np.full((words * 64, mats.attrs.shape[1], 2), padding, dtype)
        live = np.zeros(n, bool)
        live[alive] = True
        attrs = mats.attrs[:n]

        def build(a: int) -> list[float]:
            slots, j = np.nonzero((attrs == a) & live[:, None])
            lo, hi = mats.lo[slots, j], mats.hi[slots, j]
            cut = cl.cuts_for(lo, hi, cells)
            first, last = cl.fill_rows(slots, lo, hi, cut, rows[a])
            edges[slots, j] = cl.edges_of(a, cells + 1, first, last, dtype)
            return list(cut.tolist())

        return rows, tuple(self._map(build, range(attributes))), edges

    def _map(self, fn: Callable[[int], list[float]], items: range) -> list[list[float]]:
        if self._threads == 1:
            return [fn(i) for i in items]
        with ThreadPoolExecutor(self._threads) as pool:
            return list(pool.map(fn, items))

    # -- matching ------------------------------------------------------------------------

    def match(self, attributes: Mapping[str, Scalar]) -> list[str]:
        with self._reading():
            return self.ids_of(self._match_state([attributes])[0])

    def match_batch(self, events: Sequence[Mapping[str, Scalar]]) -> list[list[str]]:
        """Per event, the matching ids. With threads, each chunk's ids are named in the thread
        that matched it: naming holds the GIL, and meanwhile the other threads' compiled loop,
        which does not, goes on."""
        if not self._slot_of:
            return [[] for _ in events]
        return self._chunked(events, self._named_chunk)

    def _named_chunk(self, events: Sequence[Mapping[str, Scalar]]) -> list[list[str]]:
        with self._reading():
            return [self.ids_of(slots) for slots in self._match_state(events)]

    def match_slots_batch(self, events: Sequence[Mapping[str, Scalar]]) -> list[Slots]:
        """The index's own answer: per event, the matching slots (ascending, then those of the
        delta). `ids_of` names them; a slot may be reused after the index changes, so name
        them before the next write."""
        if not self._slot_of:
            return [np.empty(0, np.intp) for _ in events]
        return self._chunked(events, self._match_chunk)

    def _chunked(
        self,
        events: Sequence[Mapping[str, Scalar]],
        fn: Callable[[Sequence[Mapping[str, Scalar]]], list[T]],
    ) -> list[T]:
        """fn over chunks of at most `CHUNK` events (working memory grows with the chunk);
        with threads > 1, chunks run in parallel."""
        chunks = max(1, min(self._threads, len(events) // 4))
        step = min(CHUNK, -(-len(events) // chunks)) if events else 1
        parts = [events[i : i + step] for i in range(0, len(events), step)]
        if chunks == 1:
            return [answer for part in parts for answer in fn(part)]
        if self._pool is None:
            self._pool = ThreadPoolExecutor(self._threads, thread_name_prefix="tidings-match")
        return [answer for part in self._pool.map(fn, parts) for answer in part]

    def ids_of(self, slots: Slots) -> list[str]:
        """Subscription ids of matching slots; a slot removed since is left out."""
        ids: list[str] = self._id_text[slots].tolist()
        return [i for i in ids if i] if "" in ids else ids

    def _match_chunk(self, events: Sequence[Mapping[str, Scalar]]) -> list[Slots]:
        with self._reading():
            return self._match_state(events)

    def _match_state(self, events: Sequence[Mapping[str, Scalar]]) -> list[Slots]:
        if self._staged:
            self._flush()
        state, mats = self._state, self._mats  # one snapshot for the whole chunk
        x = self._values(events)
        cells = self._cells(state, x)
        edges = _NO_EDGES if state.edges is None else state.edges
        answers = kernels.match(
            state.rows, state.used, state.dead, cells, edges, mats.attrs, mats.bounds, x
        )
        if state.delta.size:
            extra = kernels.check(state.delta, mats.attrs, mats.bounds, x)
            if any(len(found) for found in extra):
                answers = [np.concatenate(pair) for pair in zip(answers, extra, strict=True)]
        return answers

    def _values(self, events: Sequence[Mapping[str, Scalar]]) -> Floats:
        """(event, attribute) values, NaN where absent or not a number."""
        width, attr_of, text_of = len(self._names), self._attr_of, self._text_of
        out = []
        for attributes in events:
            row = [math.nan] * width
            for name, value in attributes.items():
                if isinstance(value, str):
                    a = text_of.get(name)
                    if a is not None and (code := self._codes[name].get(value)) is not None:
                        row[a] = code
                    continue
                a = attr_of.get(name)
                if a is not None:
                    row[a] = event_number(value)
            out.append(row)
        return np.array(out, np.float64)

    def _cells(self, state: _State, x: Floats) -> npt.NDArray[np.intp]:
        """(event, attribute) row in the rows: the value's cell, or the missing row."""
        missing, cuts = state.cells, state.cuts
        out = np.zeros((len(x), len(cuts)), np.intp)
        if len(x) < 4:
            for e, r in enumerate(x[:, : len(cuts)].tolist()):
                out[e] = [missing if v != v else bisect_right(cut, v) for v, cut in zip(r, cuts)]  # noqa: B905
            return out
        for a, cut in enumerate(cuts):
            col = x[:, a]
            out[:, a] = np.where(np.isnan(col), missing, np.searchsorted(cut, col, "right"))
        return out

    def memory_bytes(self) -> int:
        m, state = self._mats, self._state
        arrays: list[npt.NDArray[np.generic]] = [m.attrs, m.bounds, state.dead, state.rows]
        arrays.append(self._id_text)
        if state.edges is not None:
            arrays.append(state.edges)
        return sum(a.nbytes for a in arrays)


def _without(slots: Slots, gone: Slots) -> Slots:
    """`np.setdiff1d(slots, gone)` (sorted, once each) by a mask over the slot numbers: a
    bulk load's 34,000 slots took setdiff1d's two sorts 8 ms, the mask 0.3 ms."""
    if not slots.size:
        return slots
    out = np.ones(max(int(slots.max()), int(gone.max(initial=-1))) + 1, bool)
    out[gone] = False
    return np.unique(slots[out[slots]])


def _merge_per_attribute(
    attrs: npt.NDArray[np.int32], lo: Floats, hi: Floats
) -> tuple[Ints, Floats, Floats]:
    """Rows of predicates -> rows of one interval per distinct attribute (intersected)."""
    n, width = attrs.shape
    order = np.argsort(attrs, axis=1, kind="stable")
    a = np.take_along_axis(attrs, order, 1)
    lo, hi = np.take_along_axis(lo, order, 1), np.take_along_axis(hi, order, 1)
    new = np.ones((n, width), bool)
    new[:, 1:] = a[:, 1:] != a[:, :-1]
    starts = np.flatnonzero(new.ravel())
    lo_m = np.maximum.reduceat(lo.ravel(), starts)
    hi_m = np.minimum.reduceat(hi.ravel(), starts)
    row, col = starts // width, np.cumsum(new, axis=1).ravel()[starts] - 1
    out_w = int(col.max()) + 1 if col.size else 1
    out_a = np.full((n, out_w), -1, np.int32)
    out_lo, out_hi = np.full((n, out_w), -np.inf), np.full((n, out_w), np.inf)
    out_a[row, col], out_lo[row, col], out_hi[row, col] = a.ravel()[starts], lo_m, hi_m
    return out_a, out_lo, out_hi
