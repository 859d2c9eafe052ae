"""SlotOwners turns a content index's slot answer into subscription ids grouped by subscriber."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tidings.matching.owners import SlotOwners, grouped


def named(slots: np.ndarray) -> list[str]:
    return [f"s{slot}" for slot in slots.tolist()]


def test_an_answer_maps_each_subscriber_to_its_matching_ids_sorted() -> None:
    owners = SlotOwners()
    for slot, subscriber in [(3, "bob"), (11, "alice"), (2, "alice"), (7, "carol")]:
        owners.own(slot, subscriber)
    answer = owners.group(np.array([2, 3, 7, 11]), named)
    assert answer == {"alice": ["s11", "s2"], "bob": ["s3"], "carol": ["s7"]}


def test_a_released_slot_is_left_out_of_answers_made_before_it_was_released() -> None:
    owners = SlotOwners()
    owners.own(0, "alice")
    owners.own(1, "bob")
    owners.release(1)
    assert owners.group(np.array([0, 1]), named) == {"alice": ["s0"]}
    assert owners.group(np.array([1]), named) == {}


def test_slots_far_past_the_first_array_are_owned() -> None:
    owners = SlotOwners()
    owners.own(100_000, "alice")
    owners.own(5, "bob")
    assert owners.group(np.array([5, 100_000]), named) == {"alice": ["s100000"], "bob": ["s5"]}


def test_a_subscriber_owning_nothing_frees_its_code_for_the_next_one() -> None:
    owners = SlotOwners()
    owners.own(0, "alice")
    owners.own(1, "alice")
    owners.release(0)
    assert len(owners) == 1
    owners.release(1)
    assert len(owners) == 0
    owners.own(2, "bob")
    assert len(owners) == 1
    assert owners.group(np.array([2]), named) == {"bob": ["s2"]}


def test_an_empty_answer_names_nothing() -> None:
    def never(slots: np.ndarray) -> list[str]:
        raise AssertionError("nothing to name")

    assert SlotOwners().group(np.empty(0, np.intp), never) == {}


def test_a_long_answer_with_unowned_slots_gives_each_owner_its_ids_sorted() -> None:
    owners, truth = SlotOwners(), {}
    for slot in range(0, 192, 2):
        truth[slot] = f"u{slot % 7}"
        owners.own(slot, truth[slot])
    slots = np.arange(0, 192, dtype=np.intp)  # odd slots are owned by nobody
    live = sorted(truth)
    expected = grouped([truth[s] for s in live], [f"s{s}" for s in live])
    assert owners.group(slots, named) == expected
    assert all(len(ids) > 1 for ids in expected.values())


@settings(max_examples=100, deadline=None)
@given(
    script=st.lists(
        st.tuples(st.integers(0, 300), st.sampled_from(["a", "b", "c", "d"]) | st.none()),
        max_size=400,
    ),
    probe=st.sets(st.integers(0, 300), max_size=192),
)
def test_grouping_agrees_with_a_dict_of_owners_through_any_script(
    script: list[tuple[int, str | None]], probe: set[int]
) -> None:
    owners, truth = SlotOwners(), dict[int, str]()
    for slot, subscriber in script:
        if slot in truth:
            owners.release(slot)
            del truth[slot]
        if subscriber is not None:
            owners.own(slot, subscriber)
            truth[slot] = subscriber
    slots = np.array(sorted(probe), np.intp)
    live = [s for s in slots.tolist() if s in truth]
    expected = grouped([truth[s] for s in live], [f"s{s}" for s in live])
    assert owners.group(slots, named) == expected
    assert len(owners) == len(set(truth.values()))


@settings(max_examples=100, deadline=None)
@given(
    owned=st.dictionaries(
        st.integers(0, 5000), st.sampled_from(["a", "b", "c", "d"]), max_size=300
    ),
    before=st.dictionaries(st.integers(5001, 5100), st.sampled_from(["b", "e"]), max_size=20),
    released=st.sets(st.integers(0, 5100), max_size=100),
)
def test_owning_and_releasing_many_at_once_agrees_with_doing_it_one_by_one(
    owned: dict[int, str], before: dict[int, str], released: set[int]
) -> None:
    many, each = SlotOwners(), SlotOwners()
    for slot, subscriber in before.items():
        many.own(slot, subscriber)
        each.own(slot, subscriber)
    many.own_many(list(owned), list(owned.values()))
    for slot, subscriber in owned.items():
        each.own(slot, subscriber)
    gone = sorted(released & (owned.keys() | before.keys()))
    many.release_many(np.array(gone, np.intp))
    for slot in gone:
        each.release(slot)
    probe = np.arange(0, 6002, dtype=np.intp)
    assert many.group(probe, named) == each.group(probe, named)
    assert len(many) == len(each)
    many.own_many([6000, 6001], ["f", "a"])  # (codes freed by the releases, taken again)
    each.own(6000, "f")
    each.own(6001, "a")
    assert many.group(probe, named) == each.group(probe, named)


def test_owning_many_needs_one_subscriber_per_slot() -> None:
    with pytest.raises(ValueError, match="2 slots for 1 subscribers"):
        SlotOwners().own_many([0, 1], ["alice"])


def test_a_slot_named_twice_in_one_release_is_released_once() -> None:
    owners = SlotOwners()
    owners.own_many([0, 1], ["alice", "alice"])
    owners.release_many(np.array([0, 0], np.intp))
    assert len(owners) == 1  # alice still owns slot 1
    assert owners.group(np.array([0, 1]), named) == {"alice": ["s1"]}
