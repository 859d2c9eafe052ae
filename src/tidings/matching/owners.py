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
SMALL = 64  # matches: below this a Python loop groups faster than numpy's calls
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

    def __len__(self) -> int:
        """Subscribers owning at least one slot."""
        return len(self._code_of)

    def group(self, slots: Slots, ids_of: Callable[[Slots], list[str]]) -> Matches:
        """The subscription ids of `slots` (named by `ids_of`) by subscriber, sorted. Slots
        owned by nobody (released since the answer was made) are left out."""
        slots, codes = self._owned_only(slots)
        if not len(codes):
            return {}
        if len(codes) < SMALL:
            return grouped(_take(self._names, codes.tolist()), ids_of(slots))
        return self._by_code(slots, codes, ids_of)

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

    def _by_code(
        self, slots: Slots, codes: npt.NDArray[np.int32], ids_of: Callable[[Slots], list[str]]
    ) -> Matches:
        """Grouped by owner code in numpy, then one list per owner: no Python loop over the
        matches, except to make each owner's list."""
        order = np.argsort(codes, kind="stable")
        codes, ids = codes[order], ids_of(slots[order])
        firsts = np.flatnonzero(np.diff(codes, prepend=_NONE - 1))
        owners = _take(self._names, codes[firsts].tolist())
        singles = [[i] for i in ids]  # most owners have one match: a slice each costs 2x
        if len(firsts) == len(ids):
            return dict(zip(owners, singles, strict=True))
        lists = list(_take(singles, firsts.tolist()))
        bounds = np.append(firsts, len(ids))
        for g in np.flatnonzero(np.diff(bounds) > 1).tolist():  # owners with several
            lists[g] = sorted(ids[bounds[g] : bounds[g + 1]])
        return dict(zip(owners, lists, strict=True))


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
        found = out.get(owner)
        if found is None:
            out[owner] = [sid]
        else:
            found.append(sid)
    for found in out.values():
        if len(found) > 1:
            found.sort()
    return out
