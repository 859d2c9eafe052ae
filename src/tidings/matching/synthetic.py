"""The standard workload of the REIN/TAMA/H-Tree papers, generated with numpy.

Values are integers in [0, D); each subscription has k distinct attributes out of d, each
predicate the interval [l, l + wD] with l uniform in [0, (1 - w)D); attributes are drawn
uniformly or Zipf(alpha) distributed. Events carry every attribute (or m of them), values
uniform in [0, D). Named points: W-A (d=20, k=10, w=0.5) and W-B (d=50, k=5, w=0.3).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, replace

import numpy as np
import numpy.typing as npt

from tidings.matching.bitset import IntervalRows
from tidings.matching.cells import GE, LE
from tidings.model import Op, Predicate, Scalar

Ints = npt.NDArray[np.int64]


@dataclass(frozen=True)
class SyntheticWorkload:
    name: str = "custom"
    domain: int = 1_000_000
    attributes: int = 20
    predicates: int = 10
    width: float = 0.5
    zipf: float = 0.0  # 0: attributes drawn uniformly
    event_attributes: int = 0  # 0: every attribute

    def key(self, attribute: int) -> str:
        return f"a{attribute}"


NAMED = {
    "W-A": SyntheticWorkload("W-A", attributes=20, predicates=10, width=0.5),
    "W-B": SyntheticWorkload("W-B", attributes=50, predicates=5, width=0.3),
}


def named(name: str, **changes: object) -> SyntheticWorkload:
    return replace(NAMED[name], **changes)  # type: ignore[arg-type]


def _attribute_weights(w: SyntheticWorkload) -> npt.NDArray[np.float64]:
    ranks = np.arange(1, w.attributes + 1, dtype=np.float64)
    weights = ranks**-w.zipf if w.zipf else np.ones(w.attributes)
    normed: npt.NDArray[np.float64] = weights / weights.sum()
    return normed


def subscription_arrays(
    w: SyntheticWorkload, n: int, rng: np.random.Generator
) -> tuple[Ints, Ints]:
    """(attributes, lows), both (n, k): k distinct attributes per row; high = low + wD."""
    p = _attribute_weights(w)
    # Distinct attributes per row, weighted: the k smallest of Exp(1)/p (Efraimidis-Spirakis).
    keys = rng.exponential(size=(n, w.attributes)) / p
    attrs = np.argsort(keys, axis=1)[:, : w.predicates].astype(np.int64)
    span = int(w.width * w.domain)
    lows = rng.integers(0, w.domain - span, size=(n, w.predicates), dtype=np.int64)
    return attrs, lows


def predicates_of(w: SyntheticWorkload, attrs: Ints, lows: Ints) -> Iterator[tuple[Predicate, ...]]:
    """Each row as `>=` low and `<=` low + wD per attribute."""
    span = int(w.width * w.domain)
    for row_a, row_l in zip(attrs.tolist(), lows.tolist(), strict=True):
        yield tuple(
            p
            for a, lo in zip(row_a, row_l, strict=True)
            for p in (Predicate(w.key(a), Op.GE, lo), Predicate(w.key(a), Op.LE, lo + span))
        )


def columns_of(w: SyntheticWorkload, attrs: Ints, lows: Ints) -> IntervalRows:
    """The same subscriptions as `predicates_of`, as the columns the bulk paths take."""
    n, k = attrs.shape
    ops = np.tile(np.array([GE, LE], np.int8), (n, k))
    vals = np.empty((n, 2 * k))
    vals[:, 0::2], vals[:, 1::2] = lows, lows + int(w.width * w.domain)
    keys = [w.key(a) for a in range(w.attributes)]
    return IntervalRows(keys, np.repeat(attrs, 2, axis=1), ops, vals)


def event_arrays(w: SyntheticWorkload, n: int, rng: np.random.Generator) -> npt.NDArray[np.float64]:
    """(n, d) values; NaN where a sparse event leaves the attribute out."""
    values = rng.integers(0, w.domain, size=(n, w.attributes)).astype(np.float64)
    if w.event_attributes and w.event_attributes < w.attributes:
        keep = np.argsort(rng.random((n, w.attributes)), axis=1)[:, : w.event_attributes]
        sparse = np.full_like(values, np.nan)
        np.put_along_axis(sparse, keep, np.take_along_axis(values, keep, axis=1), axis=1)
        values = sparse
    return values


def events_of(w: SyntheticWorkload, values: npt.NDArray[np.float64]) -> list[dict[str, Scalar]]:
    return [
        {w.key(a): int(v) for a, v in enumerate(row) if v == v}  # v != v: NaN, left out
        for row in values.tolist()
    ]


def brute_force(
    w: SyntheticWorkload, attrs: Ints, lows: Ints, values: npt.NDArray[np.float64]
) -> Ints:
    """The matching rows for one event (d values): every predicate compared, vectorised."""
    x = values[attrs]
    span = int(w.width * w.domain)
    return np.flatnonzero(((x >= lows) & (x <= lows + span)).all(axis=1))
