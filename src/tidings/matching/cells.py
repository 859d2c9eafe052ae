"""Cells and rows of the interval index: pure numpy functions, no state.

Per attribute, the value domain is cut into cells; a cell's row is a packed bitmap (uint64
words, bit `s & 63` of word `s >> 6` for slot `s`) of the slots whose interval on the attribute
misses the cell entirely, so an event whose value falls in the cell rules them out. One more
row, the last, holds every slot with an interval on the attribute (an event without the
attribute rules them all out). A slot's interval is the closed float range [lo, hi] its
predicates on the attribute accept; NaN means "no predicate on this attribute".
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

Words = npt.NDArray[np.uint64]
Floats = npt.NDArray[np.float64]
Slots = npt.NDArray[np.intp]
Edges = npt.NDArray[np.unsignedinteger[Any]]
ALL = np.uint64(0xFFFF_FFFF_FFFF_FFFF)
NOP, LT, LE, GT, GE, EQ = range(6)


def intervals(
    ops: npt.NDArray[np.integer], vals: npt.NDArray[np.floating]
) -> tuple[Floats, Floats]:
    """Each predicate (op code, value) as the closed float interval [lo, hi] it accepts.

    `x > v` is `x >= nextafter(v, +inf)` exactly, for float64 x: no float lies between.
    """
    v = vals.astype(np.float64)
    up, down = np.nextafter(v, np.inf), np.nextafter(v, -np.inf)
    lo = np.select([ops == GT, (ops == GE) | (ops == EQ)], [up, v], -np.inf)
    hi = np.select([ops == LT, (ops == LE) | (ops == EQ)], [down, v], np.inf)
    return lo, hi


def cuts_for(lo: Floats, hi: Floats, cells: int) -> Floats:
    """Interior cell boundaries, equi-depth over the finite bounds (at most `cells - 1`)."""
    bounds = np.concatenate([lo[~np.isnan(lo)], hi[~np.isnan(hi)]])
    bounds = bounds[np.isfinite(bounds)]
    if not bounds.size:
        return np.empty(0)
    cut: Floats = np.unique(np.quantile(bounds, np.linspace(0, 1, cells + 1)[1:-1]))
    return cut


def cell_range(cut: Floats, lo: Floats, hi: Floats) -> tuple[Slots, Slots]:
    """The first and last cell each interval meets: every other cell rules it out."""
    return np.searchsorted(cut, lo, "right"), np.searchsorted(cut, hi, "right")


def or_by_row(row: Slots, slots: Slots, rows: int, words: int) -> Words:
    """(rows, words) bitmaps with bit `slot` set in row `row[i]` for each slots[i].

    Bits of distinct slots never collide, so OR is a sum; bincount sums exactly in float64
    as long as each half-word stays under 2**53, hence the two 32-bit halves.
    """
    key, bit = row * words + (slots >> 6), slots & 63
    low = bit < 32
    size = rows * words
    out = np.bincount(key[low], np.ldexp(1.0, bit[low]), size).astype(np.uint64)
    high = np.bincount(key[~low], np.ldexp(1.0, bit[~low] - 32), size).astype(np.uint64)
    out |= high << np.uint64(32)
    return out.reshape(rows, words)


def edge_dtype(attributes: int, height: int) -> type[np.unsignedinteger]:
    """Edge ids `attribute * height + cell` and one padding id past them: 16 bits if they fit."""
    return np.uint16 if attributes * height < 0xFFFF else np.uint32


def edges_of(attribute: int, height: int, first: Slots, last: Slots, dtype: type) -> Edges:
    """(n, 2): the ids of the cells holding an interval's first and last bound; only an event
    in one of those may fall outside it (every other cell is wholly in or out)."""
    base = attribute * height
    edges: Edges = np.stack([first + base, last + base], axis=-1).astype(dtype)
    return edges


def fill_rows(
    slots: Slots, lo: Floats, hi: Floats, cut: Floats, rows: Words
) -> tuple[Slots, Slots]:
    """Fill `rows` (cells + 1, words) for one attribute: slots[i] has [lo[i], hi[i]] there.
    Returns each interval's first and last cell."""
    cells, words = rows.shape[0] - 1, rows.shape[1]
    first, last = cell_range(cut, lo, hi)
    starts = or_by_row(first, slots, cells, words)  # row j: intervals starting in cell j
    ends = or_by_row(last, slots, cells, words)
    rows[cells - 1] = 0  # cell c rules out what starts after c or ends before c
    for c in range(cells - 2, -1, -1):  # a loop of row ORs: accumulate() is slower here
        np.bitwise_or(rows[c + 1], starts[c + 1], out=rows[c])
    del starts
    below = ends[0].copy()
    for c in range(1, cells):
        rows[c] |= below
        below |= ends[c]
    rows[cells] = or_by_row(np.zeros_like(slots), slots, 1, words)[0]
    return first, last


def set_bits(rows: Words, slots: Slots, marks: npt.NDArray[np.bool_]) -> None:
    """Set bit `slots[i]` in every row r with marks[i, r], in place (rows: (rows, words))."""
    words = slots >> 6
    first, span = int(words.min()), int(words.max() - words.min() + 1)
    if span * 64 <= 8 * len(slots) + 4096:  # new slots are mostly consecutive: pack a block
        block = np.zeros((rows.shape[0], span * 64), bool)
        block[:, slots - first * 64] = marks.T
        packed = np.packbits(block, axis=1, bitorder="little").view(np.uint64)
        rows[:, first : first + span] |= packed
        return
    s, r = np.nonzero(marks)
    bits = np.left_shift(np.uint64(1), (slots[s] & 63).astype(np.uint64))
    np.bitwise_or.at(rows, (r, words[s]), bits)


def clear_bits(words: Words, slots: Slots) -> None:
    bits = np.left_shift(np.uint64(1), (slots & 63).astype(np.uint64))
    np.bitwise_and.at(words, slots >> 6, ~bits)


def set_each_bit(words: Words, slots: Slots) -> None:
    bits = np.left_shift(np.uint64(1), (slots & 63).astype(np.uint64))
    np.bitwise_or.at(words, slots >> 6, bits)


def set_bit(words: Words, slot: int) -> None:
    words[slot >> 6] |= np.uint64(1 << (slot & 63))
