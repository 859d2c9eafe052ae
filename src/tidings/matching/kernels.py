"""The interval index's inner loop, compiled: one pass per event over the rows, no I/O.

numpy needs a pass (and a temporary array) per step: OR the rows, find the clear bits, gather
the candidates' edges, test them, gather the bounds, compare. Here the rows are ORed four at
a time into one buffer, and each clear bit found in it is decided at once (its edge cells,
then, only if needed, its bounds).
Compiled by numba on first use (seconds) and cached on disk (beside this file, or in the
user's cache directory), so later processes load it in well under a second; `nogil`, so
threads matching different chunks run in parallel. numba is the `fast` extra (208 MB with
llvmlite, too much for a serverless function's 250 MB): without it the same functions run
as Python, with the same answers (tests/matching run both ways), only slower.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import numpy.typing as npt

njit: Any
try:
    from numba import njit
except ImportError:  # the core install: the loops run as Python
    njit = None

COMPILED = njit is not None


def compiled(fn: Callable[..., Any]) -> Any:
    """`fn` compiled without the GIL, its machine code cached on disk; where numba finds no
    writable place for the cache (a read-only install, no home directory), compiled in
    each process instead of failing at import; without numba, `fn` itself."""
    if njit is None:
        return fn
    try:
        return njit(nogil=True, cache=True)(fn)
    except RuntimeError:
        return njit(nogil=True)(fn)


BLOCK = 2048  # words of slots matched for every event of a batch before the next block
_FULL = np.uint64(0xFFFF_FFFF_FFFF_FFFF)
_DEBRUIJN = np.uint64(0x03F79D71B4CB0A89)
_TABLE = np.zeros(64, np.int64)
_TABLE[((np.uint64(1) << np.arange(64, dtype=np.uint64)) * _DEBRUIJN) >> np.uint64(58)] = np.arange(
    64
)


@compiled
def inside(x: Any, e: int, s: int, attrs: Any, bounds: Any) -> bool:
    """Does event e fall in every interval of slot s? (NaN, an absent value: outside.)"""
    for j in range(attrs.shape[1]):
        a = attrs[s, j]
        if a < 0:
            continue
        v = x[e, a]
        if not (bounds[s, j, 0] <= v <= bounds[s, j, 1]):
            return False
    return True


@compiled
def sure(mine: Any, near: Any) -> bool:
    """Is a slot not ruled out by the rows surely inside? Yes unless the event lies in an edge
    cell (holding a bound) of one of its intervals: `near` holds the slot's edge cell ids,
    `mine` marks the event's cell ids."""
    for j in range(near.shape[0]):  # noqa: SIM110 (numba compiles loops, not generators)
        if mine[near[j, 0]] or mine[near[j, 1]]:
            return False
    return True


@compiled
def or_rows(rows: Any, cells: Any, e: int, start: int, acc: Any) -> None:
    """OR into `acc` words start.. of the row of event e's cell on every attribute, four rows
    per pass: each pass reads and writes `acc` (in the cache) once for four rows."""
    attributes, width = rows.shape[0], acc.shape[0]
    a = 0
    while a + 4 <= attributes:
        r1, r2 = rows[a, cells[e, a], start:], rows[a + 1, cells[e, a + 1], start:]
        r3, r4 = rows[a + 2, cells[e, a + 2], start:], rows[a + 3, cells[e, a + 3], start:]
        for w in range(width):
            acc[w] |= r1[w] | r2[w] | r3[w] | r4[w]
        a += 4
    while a < attributes:
        acc |= rows[a, cells[e, a], start : start + width]
        a += 1


@compiled
def clear_bits(acc: Any, found: Any) -> int:
    """The clear bits of `acc`, ascending, at the front of `found` (room for 64 per word),
    and how many. (Growing `found` in this loop made it four times slower.)"""
    n = 0
    full, zero, one, shift = _FULL, np.uint64(0), np.uint64(1), np.uint64(58)
    for w in range(acc.shape[0]):
        v = acc[w]
        if v == full:
            continue
        free, base = ~v, np.int64(w) << 6
        while free != zero:
            low = free & (~free + one)
            found[n] = base + _TABLE[(low * _DEBRUIJN) >> shift]
            n += 1
            free ^= low
    return n


def _clear_bits_numpy(acc: Any, found: Any) -> int:
    """`clear_bits` without numba: the De Bruijn step wraps a uint64 product, which numpy
    warns about in Python; one vectorised pass is quicker there anyway."""
    where = np.flatnonzero(np.unpackbits(acc.view(np.uint8), bitorder="little") == 0)
    found[: where.size] = where
    return int(where.size)


if not COMPILED:
    clear_bits = _clear_bits_numpy  # match_rows finds it here at each call


@compiled
def gather(table: Any, at: Any, count: int, into: Any, offset: int) -> Any:
    """table[offset + at[:count]] into the front of `into` (returned, larger if it had to
    grow). A loop of plain copies keeps many of these scattered reads in flight at once."""
    if into.shape[0] < count:
        into = np.empty((2 * count, *table.shape[1:]), table.dtype)
    for i in range(count):
        into[i] = table[offset + at[i]]
    return into


@compiled
def match_rows(
    rows: Any,
    used: int,
    dead: Any,
    cells: Any,
    edges: Any,
    attrs: Any,
    bounds: Any,
    x: Any,
) -> Any:
    """Every event's matching slots, ascending: event e's are slots[starts[e]:starts[e + 1]].

    The slots are taken a block at a time, and every event of the batch is matched in a
    block before the next: the candidates' edge ids and bounds, read at random, then come
    from the block's share of those arrays (a few megabytes of edge ids), which the cache
    keeps far better than all of memory."""
    events, attributes, height = cells.shape[0], rows.shape[0], rows.shape[1]
    mine = np.zeros(attributes * height + 1, np.bool_)  # the last id is padding: never mine
    acc = np.empty(min(used, BLOCK), np.uint64)
    found = np.empty(acc.shape[0] * 64, np.int64)
    near = np.empty((4096, *edges.shape[1:]), edges.dtype)
    owner = np.empty(4096, np.int64)
    slots = np.empty(4096, np.int64)
    n = 0
    for start in range(0, used, BLOCK):
        block = acc[: min(used, start + BLOCK) - start]
        for e in range(events):
            block[:] = dead[start : start + block.shape[0]]
            or_rows(rows, cells, e, start, block)
            count = clear_bits(block, found)
            near = gather(edges, found, count, near, start * 64)
            if slots.shape[0] < n + count:
                slots = np.concatenate((slots, np.empty(n + count, np.int64)))
                owner = np.concatenate((owner, np.empty(n + count, np.int64)))
            for a in range(attributes):
                mine[a * height + cells[e, a]] = True
            for i in range(count):
                s = start * 64 + found[i]
                if sure(mine, near[i]) or inside(x, e, s, attrs, bounds):
                    slots[n], owner[n] = s, e
                    n += 1
            for a in range(attributes):
                mine[a * height + cells[e, a]] = False
    return by_owner(slots[:n], owner[:n], events)


@compiled
def by_owner(slots: Any, owner: Any, events: int) -> Any:
    """The slots grouped by event, keeping their order (a counting sort): (slots, starts)."""
    starts = np.zeros(events + 1, np.int64)
    for e in owner:
        starts[e + 1] += 1
    starts = np.cumsum(starts)
    at = starts[:-1].copy()
    out = np.empty_like(slots)
    for i in range(slots.shape[0]):
        out[at[owner[i]]] = slots[i]
        at[owner[i]] += 1
    return out, starts


@compiled
def check_rows(slots: Any, attrs: Any, bounds: Any, x: Any) -> Any:
    """Every event's slots among `slots` whose intervals all hold it, as `match_rows` gives
    them: (matching, starts)."""
    events = x.shape[0]
    out = np.empty(events * slots.shape[0], np.int64)
    starts = np.zeros(events + 1, np.int64)
    n = 0
    for e in range(events):
        for s in slots:
            if inside(x, e, s, attrs, bounds):
                out[n] = s
                n += 1
        starts[e + 1] = n
    return out[:n], starts


def match(
    rows: npt.NDArray[np.uint64],
    used: int,
    dead: npt.NDArray[np.uint64],
    cells: npt.NDArray[np.intp],
    edges: npt.NDArray[Any],
    attrs: npt.NDArray[np.int32],
    bounds: npt.NDArray[np.float64],
    x: npt.NDArray[np.float64],
) -> list[npt.NDArray[np.intp]]:
    """Per event (a row of `cells` and of `x`), the slots the rows and bounds accept."""
    return _per_event(*match_rows(rows, used, dead, cells, edges, attrs, bounds, x))


def check(
    slots: npt.NDArray[np.intp],
    attrs: npt.NDArray[np.int32],
    bounds: npt.NDArray[np.float64],
    x: npt.NDArray[np.float64],
) -> list[npt.NDArray[np.intp]]:
    """Per event (a row of `x`), those of `slots` whose bounds accept it, checked one by one:
    the inserts not yet in the rows."""
    return _per_event(*check_rows(slots, attrs, bounds, x))


def _per_event(
    slots: npt.NDArray[np.intp], starts: npt.NDArray[np.int64]
) -> list[npt.NDArray[np.intp]]:
    at = starts.tolist()
    return [slots[at[e] : at[e + 1]] for e in range(len(at) - 1)]


def warm_up() -> None:
    """Compile the kernels (or load them from the disk cache) for the arrays the interval
    index passes, so that the first match does not wait for them."""
    bounds, x = np.zeros((64, 1, 2)), np.zeros((1, 1))
    edges, attrs = np.zeros((64, 1, 2), np.uint16), np.full((64, 1), -1, np.int32)
    match(np.zeros((1, 2, 1), np.uint64), 1, np.zeros(1, np.uint64), np.zeros((1, 1), np.intp),
          edges, attrs, bounds, x)  # fmt: skip
    check(np.zeros(1, np.intp), attrs, bounds, x)
