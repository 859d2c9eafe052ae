"""Prefixes and suffixes by needle length; slots as multisets."""

from __future__ import annotations

from tidings.matching.affixes import AffixIndex, SlotBag


def found(index: AffixIndex, value: str) -> list[int]:
    return sorted(s for slots in index.satisfied(value) for s in slots.tolist())


def test_a_value_finds_each_needle_it_starts_with_once_per_predicate() -> None:
    index = AffixIndex()
    for slot, needle in enumerate(["", "a", "ab", "abc", "b", "abd"]):
        index.add(needle, slot)
    index.add("ab", 9)
    index.add("ab", 9)  # one subscription, the predicate twice
    assert found(index, "abcx") == [0, 1, 2, 3, 9, 9]
    assert found(index, "") == [0] and found(index, "ba") == [0, 4]


def test_a_suffix_index_reads_the_end_of_the_value() -> None:
    index = AffixIndex(suffix=True)
    for slot, needle in enumerate(["", "z", "yz", "xyz!"]):
        index.add(needle, slot)
    assert found(index, "xyz") == [0, 1, 2] and found(index, "z") == [0, 1]


def test_a_needle_removed_with_its_last_predicate_leaves_no_length_behind() -> None:
    index = AffixIndex()
    index.add("abc", 1)
    index.add("abc", 2)
    index.add("xyz", 3)
    index.remove("abc", 1)
    assert found(index, "abc") == [2] and index._lengths == {3: 2}
    index.remove("abc", 2)
    index.remove("xyz", 3)
    assert (len(index), index._lengths, found(index, "abc")) == (0, {}, [])


def test_a_slot_bag_keeps_each_slot_as_many_times_as_it_was_added() -> None:
    bag = SlotBag()
    for slot in (4, 1, 4, 7):
        bag.add(slot)
    bag.remove(7)
    assert sorted(bag.array().tolist()) == [1, 4, 4] and len(bag) == 3
    bag.remove(4)
    assert sorted(bag.array().tolist()) == [1, 4]
