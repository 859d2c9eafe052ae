"""Subscriptions an index holds but some of its answers leave out.

An elastic matcher in both views of a scale keeps one index for two slices: each slice's
answers leave out the other's share until it leaves the index. Filtering the grouped answers
by id cost more than the matching itself (every match named, grouped, then looked up), so
here the content subscriptions that have a slot are left out by a mask over the slots,
before anything is named; the others (topic subscriptions, or an id hidden before it was
indexed) by id, after.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence

import numpy as np
import numpy.typing as npt

from tidings.matching.owners import Matches

Mask = npt.NDArray[np.bool_]
Slots = npt.NDArray[np.intp]


class Exclusion:
    """A set of subscription ids, and a mask of the content slots they hold now.

    The mask is kept one entry longer than its last hidden slot, and that entry is False:
    `mask.take(slots, mode="clip")` reads any slot past it as not hidden. The index that
    made it tells it of every slot it frees (`released`), so a reused slot is never hidden
    for the subscription that takes it."""

    def __init__(self, slots_of: Callable[[Sequence[str]], list[int | None]]) -> None:
        self._slots_of = slots_of
        self._ids: set[str] = set()
        self.mask: Mask = np.zeros(1, np.bool_)
        self.unmasked: set[str] = set()  # hidden ids whose slot (if any) is not in the mask

    def __len__(self) -> int:
        return len(self._ids)

    def __iter__(self) -> Iterator[str]:
        return iter(self._ids)

    def __contains__(self, subscription_id: object) -> bool:
        return subscription_id in self._ids

    def update(self, ids: Iterable[str]) -> None:
        """Hide `ids`, by slot those the index holds in one now (an id hidden by id only,
        which has a slot since, is masked too)."""
        unmasked = self.unmasked
        if not self._ids:  # (a new exclusion: 66,000 ids at a scale-out's start)
            new = list(ids)
        else:
            new = [sid for sid in ids if sid not in self._ids or sid in unmasked]
        self._ids.update(new)
        slots = self._slots_of(new)
        found = [s for s in slots if s is not None]
        if found:
            self._grow(max(found))
            self.mask[found] = True
        if unmasked or len(found) < len(new):
            for sid, slot in zip(new, slots, strict=True):
                if slot is None:
                    unmasked.add(sid)
                else:
                    unmasked.discard(sid)

    def difference_update(self, ids: Iterable[str]) -> None:
        """`discard` of each, the mask's share in one array operation."""
        gone = self._ids.intersection(ids)
        if not gone:
            return
        self._ids -= gone
        self.unmasked -= gone
        slots = [s for s in self._slots_of(list(gone)) if s is not None]
        at = np.array(slots, np.intp)
        self.mask[at[at < len(self.mask) - 1]] = False

    def discard(self, subscription_id: str) -> None:
        if subscription_id not in self._ids:
            return
        self._ids.discard(subscription_id)
        self.unmasked.discard(subscription_id)
        (slot,) = self._slots_of((subscription_id,))
        if slot is not None and slot < len(self.mask) - 1:
            self.mask[slot] = False

    def released(self, subscription_id: str, slot: int) -> None:
        """The index freed `slot`, which held `subscription_id`: if that id is still hidden,
        it is by id from now on (it may come back in another slot)."""
        if slot < len(self.mask) - 1 and self.mask[slot]:
            self.mask[slot] = False
            if subscription_id in self._ids:
                self.unmasked.add(subscription_id)

    def released_many(self, subscription_ids: Sequence[str], slots: Slots) -> None:
        """`released` of each pair, the mask read and cleared in array operations."""
        inside = np.flatnonzero(slots < len(self.mask) - 1)
        hit = inside[self.mask[slots[inside]]]
        if not hit.size:
            return
        self.mask[slots[hit]] = False
        for i in hit.tolist():
            if subscription_ids[i] in self._ids:
                self.unmasked.add(subscription_ids[i])

    def _grow(self, slot: int) -> None:
        if slot + 1 >= len(self.mask):
            grown = np.zeros(max(2 * len(self.mask), slot + 2), np.bool_)
            grown[: len(self.mask)] = self.mask
            self.mask = grown

    def filtered(self, answer: Matches, by_any_id: bool = False) -> Matches:
        """`answer` without the hidden ids it may still hold: the unmasked ones (an answer
        made through the mask), or any (`by_any_id`: one that was not). Answers may be
        shared: a new dict when something is left out."""
        hidden = self._ids if by_any_id else self.unmasked
        if not hidden or not answer:
            return answer
        return without(answer, hidden)


def without(answer: Matches, hidden: set[str]) -> Matches:
    """An answer without the subscriptions in `hidden` (a copy: answers are shared)."""
    out: Matches = {}
    for subscriber, ids in answer.items():
        kept = [sid for sid in ids if sid not in hidden]
        if kept:
            out[subscriber] = kept
    return out
