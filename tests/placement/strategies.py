"""Hypothesis strategies: small placement instances with many ties (small integer values)."""

from __future__ import annotations

import numpy as np
from hypothesis import strategies as st

from tidings.placement.model import Instance, Mode


@st.composite
def instances(draw: st.DrawFn, max_regions: int = 4, integral: bool = True) -> Instance:
    regions = draw(st.integers(1, max_regions))
    clients = draw(st.integers(1, 6))
    value = st.integers(0, 5).map(float) if integral else st.floats(0.5, 200.0)
    price = st.integers(0, 3).map(float) if integral else st.floats(1e-11, 3e-10)
    L = np.array(draw(_matrix(clients, regions, value)), dtype=np.float64)
    LR = np.array(draw(_matrix(regions, regions, value)), dtype=np.float64)
    np.fill_diagonal(LR, 0.0)
    alpha = np.array(draw(st.lists(price, min_size=regions, max_size=regions)))
    beta = np.array(draw(st.lists(price, min_size=regions, max_size=regions)))
    client = st.integers(0, clients - 1)
    publishers = draw(st.lists(client, max_size=4))
    size = st.integers(1, 4).map(float) if integral else st.floats(1.0, 2000.0)
    sizes = tuple(np.array(draw(st.lists(size, max_size=3))) for _ in publishers)
    subscribers = draw(st.lists(client, max_size=5))
    modes = draw(st.sampled_from([(Mode.DIRECT, Mode.ROUTED), (Mode.DIRECT,), (Mode.ROUTED,)]))
    ratio = draw(st.sampled_from([1.0, 33.3, 50.0, 75.0, 90.0, 95.0, 100.0]))
    max_ms = float(draw(st.integers(0, 14))) if integral else draw(st.floats(1.0, 500.0))
    return Instance(
        L,
        LR,
        alpha,
        beta,
        np.array(publishers, dtype=np.int64),
        sizes,
        np.array(subscribers, dtype=np.int64),
        ratio,
        max_ms,
        modes,
    )


def _matrix(
    rows: int, columns: int, value: st.SearchStrategy[float]
) -> st.SearchStrategy[list[list[float]]]:
    row = st.lists(value, min_size=columns, max_size=columns)
    return st.lists(row, min_size=rows, max_size=rows)
