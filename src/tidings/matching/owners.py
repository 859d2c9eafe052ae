"""Subscribers of content slots: from the content index's integer answer to subscriber ids.

The interval index answers with slot numbers. Looking each matching subscription's id up in a
dict of a million ids costs a cache miss or two per match (about 1 µs at 10^6); here every
subscriber gets a small integer code and a numpy array holds each slot's code, so the owners of
a whole answer are one gather, and names are made once per answer.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from operator import itemgetter
from typing import TypeVar

import numpy as np
import numpy.typing as npt

Slots = npt.NDArray[np.intp]
# subscriber id -> ids of that subscriber's subscriptions that matched, sorted.
Matches = dict[str, list[str]]
_NONE = -1
T = TypeVar("T")


class SlotOwners:
    """Slot -> subscriber, for the slots of one content index. A subscriber's code is freed
    when it owns no slot any more, so codes stay as few as the subscribers."""

    def __init__(self) -> None:
        self._code_by_slot: npt.NDArray[np.int32] = np.full(64, _NONE, np.int32)
        self._names: list[str] = []  # code -> subscriber id
        self._code_of: dict[str, int] = {}
        self._owned: list[int] = []  # code -> slots it owns
        self._free: list[int] = []

    def own(self, slot: int, subscriber_id: str) -> None:
        code = self._code_of.get(subscriber_id)
        if code is None:
            code = self._new_code(subscriber_id)
        if slot >= len(self._code_by_slot):
            grown = np.full(max(2 * len(self._code_by_slot), slot + 1), _NONE, np.int32)
            grown[: len(self._code_by_slot)] = self._code_by_slot
            self._code_by_slot = grown
        self._code_by_slot[slot] = code
        self._owned[code] += 1

    def own_many(self, slots: Sequence[int], subscriber_ids: Sequence[str]) -> None:
        """`own` of each pair, in array operations: a scale's 34,000 records took 28 ms one
        by one, most of it setting one array element at a time."""
        if len(slots) != len(subscriber_ids):
            raise ValueError(f"{len(slots)} slots for {len(subscriber_ids)} subscribers")
        if not slots:
            return
        for subscriber_id in dict.fromkeys(subscriber_ids):  # (codes in order of appearance)
            if subscriber_id not in self._code_of:
                self._new_code(subscriber_id)
        n = len(slots)
        at = np.fromiter(slots, np.intp, n)
        codes = np.fromiter(map(self._code_of.__getitem__, subscriber_ids), np.int32, n)
        end = int(at.max()) + 1
        if end > len(self._code_by_slot):
            grown = np.full(max(2 * len(self._code_by_slot), end), _NONE, np.int32)
            grown[: len(self._code_by_slot)] = self._code_by_slot
            self._code_by_slot = grown
        self._code_by_slot[at] = codes
        counts = np.bincount(codes)
        for code in np.flatnonzero(counts).tolist():
            self._owned[code] += int(counts[code])

    def _new_code(self, subscriber_id: str) -> int:
        if self._free:
            code = self._free.pop()
            self._names[code] = subscriber_id
        else:
            code = len(self._names)
            self._names.append(subscriber_id)
            self._owned.append(0)
        self._code_of[subscriber_id] = code
        return code

    def release(self, slot: int) -> None:
        code = int(self._code_by_slot[slot])
        self._code_by_slot[slot] = _NONE
        self._owned[code] -= 1
        if not self._owned[code]:
            del self._code_of[self._names[code]]
            self._free.append(code)

    def release_many(self, slots: Slots) -> None:
        """`release` of each (owned) slot, in array operations."""
        slots = np.unique(slots)  # (a slot given twice is released once)
        codes = self._code_by_slot[slots]
        self._code_by_slot[slots] = _NONE
        counts = np.bincount(codes[codes != _NONE])
        for code in np.flatnonzero(counts).tolist():
            self._owned[code] -= int(counts[code])
            if not self._owned[code]:
                del self._code_of[self._names[code]]
                self._free.append(code)

    def __len__(self) -> int:
        """Subscribers owning at least one slot."""
        return len(self._code_of)

    def group(
        self,
        slots: Slots,
        ids_of: Callable[[Slots], list[str]],
        hidden: npt.NDArray[np.bool_] | None = None,
    ) -> Matches:
        """The subscription ids of `slots` (named by `ids_of`) by subscriber, sorted. Slots
        owned by nobody (released since the answer was made) are left out, and so are those
        `hidden` marks (an `Exclusion`'s mask: any slot past its end is read as its last
        entry, which is False).

        The owners are one gather and one C-level lookup; the grouping is a Python loop.
        Grouping by owner code in numpy (argsort, diff, one slice per owner) cost more at
        the small answer sizes measured (65 against 16 us at 64 matches, 110 against 56 at 200)
        and about as much at 10^6 subscriptions (`benchmarks/matcher_grouping.py`)."""
        if hidden is not None and len(slots):
            slots = slots[~hidden.take(slots, mode="clip")]
        slots, codes = self._owned_only(slots)
        if not len(codes):
            return {}
        return grouped(_take(self._names, codes.tolist()), ids_of(slots))

    def _owned_only(self, slots: Slots) -> tuple[Slots, npt.NDArray[np.int32]]:
        """The owned ones of `slots`, and their owners' codes."""
        by_slot = self._code_by_slot
        if len(slots) and slots.max() >= len(by_slot):  # never owned: past the array
            slots = slots[slots < len(by_slot)]
        codes = by_slot[slots]
        if len(codes) and codes.min() < 0:
            keep = codes >= 0
            slots, codes = slots[keep], codes[keep]
        return slots, codes


def _take(items: Sequence[T], at: list[int]) -> Sequence[T]:
    """items[i] for i in `at`, in one C-level pass."""
    if len(at) > 1:
        found: Sequence[T] = itemgetter(*at)(items)
        return found
    return [items[at[0]]]


def grouped(owners: Sequence[str], ids: Sequence[str]) -> Matches:
    """Subscription ids by owner, each subscriber's list sorted."""
    out: Matches = {}
    for owner, sid in zip(owners, ids, strict=True):
        if owner in out:
            out[owner].append(sid)
        else:
            out[owner] = [sid]
    if len(out) < len(ids):  # someone has several
        for found in out.values():
            if len(found) > 1:
                found.sort()
    return out
