"""Rows of the interval index agree with a slot-by-slot construction."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from tidings.matching import cells as cl


def bits_of(words: np.ndarray) -> np.ndarray:
    return np.unpackbits(words.view(np.uint8), bitorder="little").astype(bool)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 3), st.integers(0, 255)), unique_by=lambda p: p[1]))
def test_or_by_row_sets_exactly_the_listed_bits(pairs: list[tuple[int, int]]) -> None:
    rows = np.array([r for r, _ in pairs], np.intp)
    slots = np.array([s for _, s in pairs], np.intp)
    got = cl.or_by_row(rows, slots, 4, 4)
    expected = np.zeros((4, 256), bool)
    expected[rows, slots] = True
    assert (np.array([bits_of(r) for r in got]) == expected).all()


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 20), st.integers(0, 20)), min_size=1, max_size=60))
def test_a_cell_row_holds_exactly_the_slots_whose_interval_misses_the_cell(
    spans: list[tuple[int, int]],
) -> None:
    lo = np.array([min(a, b) for a, b in spans], float)
    hi = np.array([max(a, b) for a, b in spans], float)
    slots = np.arange(len(spans))
    cut = cl.cuts_for(lo, hi, 8)
    rows = np.zeros((9, 1), np.uint64)
    cl.fill_rows(slots, lo, hi, cut, rows)
    edges = [-np.inf, *cut.tolist(), np.inf]
    for c in range(len(cut) + 1):  # cell c is [edges[c], edges[c + 1])
        misses = (hi < edges[c]) | (lo >= edges[c + 1])
        assert (bits_of(rows[c])[: len(spans)] == misses).all()
    assert bits_of(rows[8])[: len(spans)].all()
