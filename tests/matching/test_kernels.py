"""The compiled inner loop answers what the same steps in plain numpy answer."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tidings.matching import kernels


def packed(dense: np.ndarray) -> np.ndarray:
    return np.packbits(dense, axis=-1, bitorder="little").view(np.uint64)


@settings(max_examples=50, deadline=None)
@given(st.integers(1, 3000), st.integers(0, 2**32 - 1))
def test_the_clear_bits_are_listed_in_order(words: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    density = rng.choice([0.0, 0.5, 0.95, 0.995, 1.0])  # 0.995: the candidate case
    dense = rng.random(words * 64) < density
    found = np.empty(words * 64, np.int64)
    count = kernels.clear_bits(packed(dense), found)
    assert found[:count].tolist() == np.flatnonzero(~dense).tolist()


def test_every_single_clear_bit_is_found_at_its_position() -> None:
    acc = ~(np.uint64(1) << np.arange(64, dtype=np.uint64))  # word w lacks only bit w
    found = np.empty(64 * 64, np.int64)
    assert kernels.clear_bits(acc, found) == 64
    assert found[:64].tolist() == [w * 64 + w for w in range(64)]


@settings(max_examples=30, deadline=None)
@given(st.integers(1, 9), st.integers(0, 2**32 - 1))
def test_or_rows_ors_the_events_row_of_every_attribute(attributes: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    rows = rng.integers(0, 2**63, (attributes, 5, 7), dtype=np.uint64)
    cells = rng.integers(0, 5, (2, attributes + 1))
    acc = np.zeros(7, np.uint64)
    kernels.or_rows(rows, cells, 1, 0, acc)
    expected = np.bitwise_or.reduce(rows[np.arange(attributes), cells[1, :attributes]], axis=0)
    assert acc.tolist() == expected.tolist()


def random_index(
    rng: np.random.Generator, slots: int, density: float, edge_type: type = np.uint16
) -> dict[str, np.ndarray]:
    """Rows, edges and bounds as the interval index holds them, random but self-consistent
    in shape (the kernel must not care whether the rows agree with the bounds); a fifth of
    the edge ids are padding (`attributes x height`)."""
    attributes, height, width = 3, 5, 2
    edges = rng.integers(0, attributes, (slots, width, 1)) * height + rng.integers(
        0, height, (slots, width, 2)
    )
    edges[rng.random((slots, width)) < 0.2] = attributes * height
    return {
        "rows": packed(rng.random((attributes, height, slots)) < density),
        "dead": packed(rng.random(slots) < 0.1),
        "edges": edges.astype(edge_type),
        "attrs": np.where(
            rng.random((slots, width)) < 0.2, -1, rng.integers(0, attributes, (slots, width))
        ).astype(np.int32),
        "bounds": np.sort(rng.random((slots, width, 2)), axis=-1),
    }


def expected_answers(
    ix: dict[str, np.ndarray], cells: np.ndarray, x: np.ndarray
) -> list[list[int]]:
    attributes, height = ix["rows"].shape[:2]
    out = []
    for e in range(len(cells)):
        ruled_out = ix["dead"] | np.bitwise_or.reduce(
            ix["rows"][np.arange(attributes), cells[e, :attributes]], axis=0
        )
        mine = set((np.arange(attributes) * height + cells[e, :attributes]).tolist())
        answer = []
        for s in np.flatnonzero(np.unpackbits(ruled_out.view(np.uint8), bitorder="little") == 0):
            sure = not mine & set(ix["edges"][s].ravel().tolist())
            a, (lo, hi) = ix["attrs"][s], ix["bounds"][s].T
            v = x[e, a]
            inside = bool(((a < 0) | ((lo <= v) & (v <= hi))).all())
            if sure or inside:
                answer.append(int(s))
        out.append(answer)
    return out


@settings(max_examples=40, deadline=None)
@given(
    st.sampled_from([64, 640, 12_800]), st.sampled_from([0.0, 0.3, 0.9]), st.integers(0, 2**32 - 1)
)
def test_match_rows_answers_as_the_same_steps_in_numpy(
    slots: int, density: float, seed: int
) -> None:
    rng = np.random.default_rng(seed)
    ix = random_index(rng, slots, density)
    events, attributes, height = 4, 3, 5
    cells = rng.integers(0, height, (events, attributes + 1))
    x = np.where(
        rng.random((events, attributes + 1)) < 0.1, np.nan, rng.random((events, attributes + 1))
    )
    got = kernels.match(
        ix["rows"], slots // 64, ix["dead"], cells, ix["edges"], ix["attrs"], ix["bounds"], x
    )
    assert [g.tolist() for g in got] == expected_answers(ix, cells, x)


def test_a_kernel_compiles_without_a_disk_cache_where_numba_has_nowhere_to_keep_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    real = kernels.njit
    if real is None:
        pytest.skip("numba is not installed here (the `fast` extra)")

    def njit(**options: bool) -> Any:  # numba's own error when no cache locator fits
        if options.get("cache"):
            raise RuntimeError("cannot cache function 'add': no locator available")
        return real(**options)

    monkeypatch.setattr(kernels, "njit", njit)

    def add(a: int, b: int) -> int:
        return a + b

    assert kernels.compiled(add)(2, 3) == 5


@pytest.mark.parametrize("edge_type", [np.uint16, np.uint32])
def test_match_rows_answers_alike_across_blocks_of_slots(edge_type: type) -> None:
    rng = np.random.default_rng(7)
    slots = 64 * (2 * kernels.BLOCK + 37)  # three blocks, the last one short
    ix = random_index(rng, slots, 0.85, edge_type)
    events, attributes, height = 3, 3, 5
    cells = rng.integers(0, height, (events, attributes + 1))
    x = rng.random((events, attributes + 1))
    got = kernels.match(
        ix["rows"], slots // 64, ix["dead"], cells, ix["edges"], ix["attrs"], ix["bounds"], x
    )
    expected = expected_answers(ix, cells, x)
    assert all(max(e, default=0) >= 64 * 2 * kernels.BLOCK for e in expected)  # reached
    assert [g.tolist() for g in got] == expected


@settings(max_examples=30, deadline=None)
@given(st.integers(0, 40), st.integers(0, 2**32 - 1))
def test_check_keeps_the_slots_whose_every_interval_holds_the_event(count: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    ix = random_index(rng, 64, 0.5)
    slots = rng.choice(64, count, replace=False).astype(np.intp)
    x = np.where(rng.random((3, 4)) < 0.1, np.nan, rng.random((3, 4)))
    expected = []
    for e in range(3):
        keep = []
        for s in slots.tolist():
            a, (lo, hi) = ix["attrs"][s], ix["bounds"][s].T
            if ((a < 0) | ((lo <= x[e, a]) & (x[e, a] <= hi))).all():
                keep.append(s)
        expected.append(keep)
    got = kernels.check(slots, ix["attrs"], ix["bounds"], x)
    assert [g.tolist() for g in got] == expected


def test_without_numba_the_kernels_run_as_python_and_the_indexes_still_agree_with_the_oracle() -> (
    None
):
    """The core install (no `fast` extra, as in a serverless function) runs the same kernels
    as Python: the content index's and the engine's tests pass there too."""
    root = Path(__file__).parents[2]
    tests = [f"tests/matching/{name}" for name in ("test_content.py", "test_engine.py")]
    program = (
        "import sys; sys.modules['numba'] = None\n"  # as if it were not installed
        "from tidings.matching import kernels; assert not kernels.COMPILED\n"
        "import pytest\n"
        f"sys.exit(pytest.main(['-q', '-p', 'no:cacheprovider', '-W', 'error', *{tests!r}]))"
    )
    done = subprocess.run(
        [sys.executable, "-c", program], cwd=root, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
