"""`prefix` and `suffix` predicates of one attribute, and the multisets of slots the counting
index adds in bulk.

Checking each predicate with `startswith` costs a Python step per predicate: 32,000 `prefix`
predicates of one subscriber made a publication cost ~60 ms, and a batch of 200 froze the
broker 3.8 s. Here the needles are keys of a dict, and a value is cut at each length some
needle has: its prefix (suffix) of that length is the only needle of that length it can
satisfy. So a value costs one slice and one lookup per distinct needle length (at most
`limits.max_predicate_string` + 1 of them), whatever the number of predicates.
"""

from __future__ import annotations

from typing import TypeVar

import numpy as np

K = TypeVar("K")


class SlotBag:
    """A multiset of slots (a slot once per predicate), given as an array of int64."""

    def __init__(self) -> None:
        self._times: dict[int, int] = {}
        self._size = 0
        self._array: np.ndarray | None = None

    def __len__(self) -> int:
        return self._size

    def add(self, slot: int) -> None:
        self._times[slot] = self._times.get(slot, 0) + 1
        self._size += 1
        self._array = None

    def remove(self, slot: int) -> None:
        left = self._times[slot] - 1
        if left:
            self._times[slot] = left
        else:
            del self._times[slot]
        self._size -= 1
        self._array = None

    def array(self) -> np.ndarray:
        """Every slot as many times as it was added (built once per change)."""
        if self._array is None:
            slots = np.fromiter(self._times, np.int64, len(self._times))
            times = np.fromiter(self._times.values(), np.int64, len(self._times))
            self._array = np.repeat(slots, times)
        return self._array


def bag_add(bags: dict[K, SlotBag], key: K, slot: int) -> None:
    bag = bags.get(key)
    if bag is None:
        bag = bags[key] = SlotBag()
    bag.add(slot)


def bag_remove(bags: dict[K, SlotBag], key: K, slot: int) -> None:
    bag = bags[key]
    bag.remove(slot)
    if not len(bag):
        del bags[key]


class AffixIndex:
    """The `prefix` (or, with `suffix`, the `suffix`) predicates of one attribute whose values
    are strings: slots by needle, and how many distinct needles have each length."""

    def __init__(self, suffix: bool = False) -> None:
        self._suffix = suffix
        self._slots: dict[str, SlotBag] = {}
        self._lengths: dict[int, int] = {}

    def __len__(self) -> int:
        return len(self._slots)

    def add(self, needle: str, slot: int) -> None:
        if needle not in self._slots:
            self._lengths[len(needle)] = self._lengths.get(len(needle), 0) + 1
        bag_add(self._slots, needle, slot)

    def remove(self, needle: str, slot: int) -> None:
        bag_remove(self._slots, needle, slot)
        if needle not in self._slots:
            left = self._lengths[len(needle)] - 1
            if left:
                self._lengths[len(needle)] = left
            else:
                del self._lengths[len(needle)]

    def satisfied(self, value: str) -> list[np.ndarray]:
        """The slots of the needles `value` starts (ends) with, one array per needle."""
        end, found = len(value), []
        for length in self._lengths:
            if length <= end:
                bag = self._slots.get(value[end - length :] if self._suffix else value[:length])
                if bag is not None:
                    found.append(bag.array())
        return found
