"""Interval-index content subscriptions as columns: the bulk of a large snapshot.

A content subscription of comparisons with numbers (`bitset.numeric`, the bulk path's input)
becomes one row of numpy arrays instead of a tuple of Predicate objects: its id, its owner
(a code into `owner_names`), and its predicates as (attribute code, op code, value) in flat
arrays, row i's predicates at `starts[i]:starts[i + 1]`. The arrays are built while the
subscriptions stream past, from stdlib `array`s (no Python object per predicate), pickle
as raw buffers, and load into a worker's `Matcher` with `add_content_arrays`, the bulk path.
"""

from __future__ import annotations

from array import array
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from tidings.matching.bitset import OP_CODES, IntervalRows, numeric
from tidings.matching.engine import Matcher
from tidings.model import Predicate

Ints = npt.NDArray[np.int32]


def eligible(subscription_id: str, predicates: Sequence[Predicate]) -> bool:
    """Does this content subscription go to the columns: comparisons with numbers
    (`bitset.numeric`)? Anything else stays a tuple and the ContentIndex routes it. The
    interval index reads "" as a removed id, so that one stays a tuple too."""
    return bool(subscription_id) and numeric(predicates)


@dataclass(frozen=True, slots=True)
class Columns:
    ids: npt.NDArray[np.str_]  # (n,)
    owners: Ints  # (n,) codes into owner_names
    owner_names: tuple[str, ...]
    keys: tuple[str, ...]  # attribute names; `attrs` holds codes into them
    starts: npt.NDArray[np.int64]  # (n + 1,) row i's predicates: starts[i]:starts[i + 1]
    attrs: Ints  # (p,)
    ops: npt.NDArray[np.int8]  # (p,) bitset op codes
    vals: npt.NDArray[np.float64]  # (p,)

    def __len__(self) -> int:
        return len(self.ids)

    def matrices(self) -> tuple[Ints, npt.NDArray[np.int8], npt.NDArray[np.float64]]:
        """(attrs, ops, vals) as (n, width) rows for `add_arrays`. A shorter row is padded
        with copies of its last predicate: the same interval again, intersected away."""
        counts = np.diff(self.starts)
        width = int(counts.max()) if len(counts) else 1
        take = self.starts[:-1, None] + np.minimum(np.arange(width), counts[:, None] - 1)
        return self.attrs[take], self.ops[take], self.vals[take]

    def load_into(self, matcher: Matcher) -> None:
        """Add every row, with its owner, to the matcher in one bulk call."""
        if len(self):
            names = self.owner_names
            owners = [names[c] for c in self.owners.tolist()]
            rows = IntervalRows(self.keys, *self.matrices())
            matcher.add_content_arrays(self.ids.tolist(), owners, rows)


class ColumnsBuilder:
    """Appends subscriptions one at a time; `build` makes the arrays."""

    def __init__(self) -> None:
        self._ids: list[str] = []
        self._owners = array("i")
        self._owner_codes: dict[str, int] = {}
        self._key_codes: dict[str, int] = {}
        self._starts = array("q", [0])
        self._attrs, self._ops, self._vals = array("i"), array("b"), array("d")

    def add(self, subscription_id: str, owner: str, predicates: Sequence[Predicate]) -> None:
        """Add an `eligible` subscription (ids are unique within one snapshot)."""
        self._ids.append(subscription_id)
        self._owners.append(self._owner_codes.setdefault(owner, len(self._owner_codes)))
        keys = self._key_codes
        for p in predicates:
            self._attrs.append(keys.setdefault(p.key, len(keys)))
            self._ops.append(OP_CODES[p.op])
            self._vals.append(float(p.value))  # type: ignore[arg-type]  # a number (numeric)
        self._starts.append(len(self._attrs))

    def build(self) -> Columns:
        return Columns(
            np.array(self._ids, dtype=np.str_) if self._ids else np.array([], dtype="U1"),
            np.frombuffer(self._owners, np.int32).copy(),
            tuple(self._owner_codes),
            tuple(self._key_codes),
            np.frombuffer(self._starts, np.int64).copy(),
            np.frombuffer(self._attrs, np.int32).copy(),
            np.frombuffer(self._ops, np.int8).copy(),
            np.frombuffer(self._vals, np.float64).copy(),
        )
