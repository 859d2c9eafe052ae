"""The `contains` needles of one attribute: every satisfied predicate, in one pass, agreeing
with the reference semantics through additions, removals and rebuilds."""

from __future__ import annotations

import threading

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tidings.matching import needles as needles_module
from tidings.matching.needles import NeedleIndex
from tidings.matching.semantics import predicate_holds
from tidings.model import Op, Predicate

needles = st.text(alphabet="ab", max_size=4)
changes = st.lists(st.tuples(st.booleans(), needles, st.integers(0, 5)), max_size=60)
texts = st.text(alphabet="abc", max_size=24)


def oracle(held: list[tuple[str, int]], value: str) -> list[int]:
    return sorted(
        slot
        for needle, slot in held
        if predicate_holds(Predicate("k", Op.CONTAINS, needle), {"k": value})
    )


def change(index: NeedleIndex, held: list[tuple[str, int]], adding: bool, needle: str,
           slot: int) -> None:  # fmt: skip
    """A needle added, or removed if it is held, in the index and in `held` alike."""
    if adding:
        index.add(needle, slot)
        held.append((needle, slot))
    elif (needle, slot) in held:
        index.remove(needle, slot)
        held.remove((needle, slot))


@settings(max_examples=300, deadline=None)
@given(changes, st.lists(texts, min_size=1, max_size=4), st.integers(0, 8))
def test_the_automaton_finds_exactly_the_needles_the_oracle_finds(  # type: ignore[no-untyped-def]
    steps, values, pending
) -> None:
    index, held = NeedleIndex(direct=0, pending=pending), []
    for step in steps:
        change(index, held, *step)
        for value in values:  # matching between changes: the lazy builds and pending ones
            assert sorted(index.satisfied(value)) == oracle(held, value)


@settings(max_examples=200, deadline=None)
@given(changes, st.lists(texts, min_size=1, max_size=3), st.integers(0, 4), st.data())
def test_builds_in_the_background_agree_with_the_oracle_whenever_they_land(  # type: ignore[no-untyped-def]
    steps, values, pending, data
) -> None:
    index, held = NeedleIndex(direct=0, pending=pending, background_from=0), []
    for step in steps:
        change(index, held, *step)
        if data.draw(st.booleans()):
            index.wait()
        for value in values:
            assert sorted(index.satisfied(value)) == oracle(held, value)


def test_a_large_build_runs_in_the_background_while_a_short_value_is_answered(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # the build thread waits for the test's word: it is still running, whatever the machine
    released = threading.Event()
    build = needles_module._Build._run

    def held(self: needles_module._Build) -> None:
        released.wait(60)
        build(self)

    monkeypatch.setattr(needles_module._Build, "_run", held)
    index = NeedleIndex(pending=64)
    for n in range(2_000):  # 512,000 characters: a build of ~0.6-1.3 s
        index.add(f"{n:04d}".ljust(256, "z"), n)
    assert index.satisfied("0007") == []  # the pending ones, one by one: none is that short
    building = index._build
    assert building is not None and building.thread.is_alive()
    index.add("late", 2_000)
    assert index.satisfied("a late value") == [2_000]
    released.set()
    index.wait()
    assert index._build is None and index._pending == {"late"}
    assert index.satisfied("0007".ljust(256, "z") + "late") == [7, 2_000]


def test_a_long_value_waits_for_the_build_rather_than_check_every_pending_needle() -> None:
    index = NeedleIndex(pending=64, background_from=0)
    for n in range(2_000):
        index.add(f"n{n:05d}", n)
    assert index.satisfied("x" * 20_000 + "n01999") == [1_999]  # 2,000 x 20,000 > WAIT_FROM
    assert index._build is None and not index._pending


def test_every_needle_of_a_suffix_chain_is_found_once() -> None:
    index = NeedleIndex()
    for length in range(1, 1025):
        index.add("a" * length, length)
    assert sorted(index.satisfied("a" * 10_000)) == list(range(1, 1025))
    assert sorted(index.satisfied("b" + "a" * 3 + "b")) == [1, 2, 3]


def test_overlapping_needles_are_all_found() -> None:
    index = NeedleIndex(direct=0)
    for slot, needle in enumerate(["she", "he", "hers", "his", "ers", "rs"]):
        index.add(needle, slot)
    assert sorted(index.satisfied("ushers")) == [0, 1, 2, 4, 5]


def test_a_needle_equal_to_the_value_is_found_and_a_longer_one_is_not() -> None:
    index = NeedleIndex(direct=0)
    index.add("value", 1)
    index.add("values", 2)
    assert index.satisfied("value") == [1]


def test_the_empty_needle_is_in_every_string_the_empty_one_too() -> None:
    index = NeedleIndex(direct=0)
    index.add("", 7)
    index.add("x", 8)
    assert index.satisfied("") == [7]
    assert sorted(index.satisfied("x")) == [7, 8]


def test_a_predicate_given_twice_counts_twice_and_leaves_once_per_removal() -> None:
    index = NeedleIndex(direct=0)
    index.add("ab", 3)
    index.add("ab", 3)
    assert index.satisfied("xaby") == [3, 3]
    index.remove("ab", 3)
    assert index.satisfied("xaby") == [3]


def test_many_needles_against_a_long_value_each_found_once() -> None:
    index = NeedleIndex()
    for n in range(32_000):
        index.add(f"n{n:07d}", n // 32)
    value = "x" * 100_000 + "n0000005" + "n0031999" * 1_000
    assert sorted(index.satisfied(value)) == [0, 999]
    assert index.satisfied("x" * 250_000) == []


def test_needles_added_after_a_build_are_found_before_the_next_one() -> None:
    index = NeedleIndex(direct=0, pending=4)
    index.add("old", 1)
    assert index.satisfied("bold") == [1]  # built
    index.add("new", 2)  # pending: checked alone until the next build
    assert sorted(index.satisfied("old news")) == [1, 2]
    index.remove("old", 1)  # dead in the automaton: finds no slot
    assert index.satisfied("old news") == [2]
