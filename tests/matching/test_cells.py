"""Rows and candidates of the interval index agree with a slot-by-slot construction."""

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


@settings(max_examples=50, deadline=None)
@given(st.integers(1, 3), st.integers(1, 3000), st.integers(0, 2**32 - 1))
def test_the_clear_bits_are_listed_in_order(rows: int, words: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    density = rng.choice([0.5, 0.95, 0.995, 1.0])  # 0.995: the candidate case, a bit per word
    dense = rng.random((rows, words * 64)) < density
    acc = np.packbits(dense, axis=1, bitorder="little").view(np.uint64)
    assert cl.free_slots(acc.ravel()).tolist() == np.flatnonzero(~dense).tolist()


def test_the_bit_index_of_every_single_bit_word_is_its_position() -> None:
    words = np.uint64(1) << np.arange(64, dtype=np.uint64)
    assert cl.bit_index(words).tolist() == list(range(64))


@settings(max_examples=100, deadline=None)
@given(st.integers(1, 4), st.integers(1, 5), st.integers(0, 2**32 - 1))
def test_a_candidate_is_unsure_exactly_when_its_event_sits_in_an_edge_cell(
    attributes: int, width: int, seed: int
) -> None:
    rng = np.random.default_rng(seed)
    height, events, count = 9, 3, 40
    cells = rng.integers(0, height, (events, attributes + 1))
    ev = np.sort(rng.integers(0, events, count))
    attr = rng.integers(0, attributes, (count, width))
    first = rng.integers(0, height - 1, (count, width))
    last = np.minimum(first + rng.integers(0, 3, (count, width)), height - 2)
    padded = rng.random((count, width)) < 0.2
    dtype = cl.edge_dtype(attributes, height)
    edges = np.stack([attr * height + first, attr * height + last], axis=-1).astype(dtype)
    edges[padded] = attributes * height
    at_edge = (cells[ev[:, None], attr] == first) | (cells[ev[:, None], attr] == last)
    expected = np.flatnonzero((at_edge & ~padded).any(axis=1))
    assert cl.unsure(edges, cells, ev, attributes, height).tolist() == expected.tolist()
