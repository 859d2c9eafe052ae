"""The interval index answers exactly while merges and rebuilds run in the background."""

from __future__ import annotations

import threading

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tidings.matching import synthetic as wl
from tidings.matching.bitset import IntervalIndex, _without, event_number
from tidings.matching.content import ContentIndex
from tidings.model import Op, Predicate, Scalar


def between(key: str, lo: float, hi: float) -> list[Predicate]:
    return [Predicate(key, Op.GE, lo), Predicate(key, Op.LE, hi)]


def test_background_merges_and_rebuilds_answer_exactly_at_every_step() -> None:
    index = IntervalIndex(background_from=0, rebuild_from=4, delta_limit=3, bitmap_budget_mib=1)
    truth: dict[str, tuple[int, int]] = {}
    for i in range(120):
        lo = (i * 37) % 100
        index.add(f"s{i}", between("x", lo, lo + 10))
        truth[f"s{i}"] = (lo, lo + 10)
        if i % 7 == 3:
            index.remove(f"s{i - 2}")
            del truth[f"s{i - 2}"]
        x = (i * 13) % 110
        assert sorted(index.match({"x": x})) == sorted(
            s for s, (a, b) in truth.items() if a <= x <= b
        )
    index.wait()
    assert sorted(index.match({"x": 50})) == sorted(
        s for s, (a, b) in truth.items() if a <= 50 <= b
    )


def test_a_reader_thread_sees_the_same_answer_while_writes_rebuild_the_index() -> None:
    index = IntervalIndex(background_from=0, rebuild_from=8, delta_limit=16)
    for i in range(50):
        index.add(f"keep{i}", between("x", 0, 10) + between("y", i, i + 100))
    expected = sorted(f"keep{i}" for i in range(50))
    answers: list[list[str]] = []
    done = threading.Event()

    def read() -> None:
        while not done.is_set():
            answers.append(sorted(index.match({"x": 5, "y": 60})))

    reader = threading.Thread(target=read)
    reader.start()
    for i in range(3000):  # never matches the reader's event (x = 5 is outside [20, 30])
        index.add(f"other{i}", between("x", 20, 30))
        if i % 3 == 0:
            index.remove(f"other{i // 2}")
    done.set()
    reader.join()
    index.wait()
    assert answers and all(a == expected for a in answers)
    assert sorted(index.match({"x": 5, "y": 60})) == expected


def test_a_removed_subscription_never_comes_back_after_merges_and_rebuilds() -> None:
    index = IntervalIndex(rebuild_from=2, delta_limit=2)
    index.add("gone", between("x", 0, 10))
    index.remove("gone")
    for i in range(40):
        index.add(f"s{i}", between("x", 100, 110))
    index.rebuild()
    index.add("new", between("x", 0, 10))  # reuses the slot of "gone"
    index.merge()
    assert index.match({"x": 5}) == ["new"]


def test_a_threaded_batch_answers_as_its_events_do_one_by_one() -> None:
    w = wl.named("W-A", attributes=6, predicates=3)
    rng = np.random.default_rng(3)
    attrs, lows = wl.subscription_arrays(w, 3000, rng)
    index = ContentIndex(threads=2)
    for i, predicates in enumerate(wl.predicates_of(w, attrs, lows)):
        index.add(f"s{i}", predicates)
    values = wl.event_arrays(w, 40, rng)
    events = wl.events_of(w, values)
    got = index.match_batch(events)
    assert got == [index.match(e) for e in events]
    truth = [sorted(f"s{i}" for i in wl.brute_force(w, attrs, lows, v)) for v in values]
    assert [sorted(g) for g in got] == truth


def test_the_bulk_load_agrees_with_brute_force_on_the_standard_workload() -> None:
    w = wl.named("W-B", attributes=12, predicates=3)
    rng = np.random.default_rng(4)
    attrs, lows = wl.subscription_arrays(w, 5000, rng)
    index = IntervalIndex()
    index.add_arrays([f"s{i}" for i in range(len(attrs))], wl.columns_of(w, attrs, lows))
    values = wl.event_arrays(w, 30, rng)
    got = index.match_batch(wl.events_of(w, values))
    truth = [sorted(f"s{i}" for i in wl.brute_force(w, attrs, lows, v)) for v in values]
    assert [sorted(g) for g in got] == truth


huge = st.integers(-(10**400), 10**400) | st.integers(2**53 - 3, 2**53 + 3)
bounds = st.integers(-(2**53) + 1, 2**53 - 1) | st.floats(-1e15, 1e15)


@settings(max_examples=200, deadline=None)
@given(st.sampled_from([Op.LT, Op.LE, Op.GT, Op.GE, Op.EQ]), bounds, huge | bounds)
def test_any_event_number_compares_with_a_bound_as_python_does(
    op: Op, bound: float, value: Scalar
) -> None:
    index = ContentIndex()
    index.add("s", [Predicate("k", op, bound)])
    assert index.match({"k": value}) == (["s"] if _holds(op, value, bound) else [])


def _holds(op: Op, a: Scalar, b: float) -> bool:
    results = {Op.LT: a < b, Op.LE: a <= b, Op.GT: a > b, Op.GE: a >= b, Op.EQ: a == b}  # type: ignore[operator]
    return bool(results[op])


def test_event_values_that_are_not_numbers_read_as_absent() -> None:
    assert [event_number(v) != event_number(v) for v in (True, "1", None, 1, 2.5)] == [
        True,
        True,
        True,
        False,
        False,
    ]


def test_an_empty_subscription_id_is_still_matched() -> None:
    index = ContentIndex()
    index.add("", [Predicate("k", Op.GT, 1)])
    assert (index.match({"k": 2}), index.remove(""), index.match({"k": 2})) == ([""], True, [])


def test_a_batch_longer_than_a_chunk_answers_every_event_in_order() -> None:
    index = IntervalIndex()
    for i in range(10):
        index.add(f"s{i}", [Predicate("x", Op.EQ, i)])
    events: list[dict[str, Scalar]] = [{"x": i % 12} for i in range(150)]
    assert index.match_batch(events) == [[f"s{i % 12}"] if i % 12 < 10 else [] for i in range(150)]


def test_the_slot_answer_names_the_same_subscriptions_as_the_id_answer() -> None:
    w = wl.named("W-B", attributes=8, predicates=3)
    rng = np.random.default_rng(7)
    attrs, lows = wl.subscription_arrays(w, 3000, rng)
    index = IntervalIndex(rebuild_from=16, delta_limit=64)
    index.add_many([(f"s{i}", p) for i, p in enumerate(wl.predicates_of(w, attrs, lows))][:2900])
    index.add_many(  # some stay in the delta
        [(f"s{i}", p) for i, p in enumerate(wl.predicates_of(w, attrs, lows))][2900:]
    )
    events = wl.events_of(w, wl.event_arrays(w, 100, rng))
    slots = index.match_slots_batch(events)
    assert [sorted(index.ids_of(s)) for s in slots] == [
        sorted(a) for a in index.match_batch(events)
    ]
    assert any(len(s) for s in slots)


def test_a_slot_removed_after_matching_is_left_out_when_named() -> None:
    index = IntervalIndex()
    index.add_many([("a", between("x", 0, 10)), ("b", between("x", 5, 20))])
    slots = index.match_slots_batch([{"x": 7}])[0]
    index.remove("a")
    assert index.ids_of(slots) == ["b"]


def test_text_equality_lives_in_the_interval_index_beside_numeric_ranges() -> None:
    content = ContentIndex()
    content.add("red-warm", [Predicate("colour", Op.EQ, "red"), *between("t", 20, 30)])
    content.add("blue", [Predicate("colour", Op.EQ, "blue")])
    content.add("never", [Predicate("colour", Op.EQ, "red"), Predicate("colour", Op.EQ, "blue")])
    content.add("numeric", [Predicate("colour", Op.EQ, 3)])
    assert len(content.intervals) == 4 and not len(content.counting)
    assert content.match({"colour": "red", "t": 25}) == ["red-warm"]
    assert content.match({"colour": "red", "t": 35}) == []
    assert content.match({"colour": "blue"}) == ["blue"]
    assert content.match({"colour": "green", "t": 25}) == []  # a value no subscription names
    assert content.match({"colour": 3}) == ["numeric"]  # a number is not the text "3"
    assert content.match({"t": 25}) == []


def test_a_slot_freed_while_a_match_reads_older_rows_waits_for_that_match(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    index = IntervalIndex()
    for i in range(8):
        index.add(f"s{i}", between("a", 10 * i, 10 * i + 100))
    index.add("x", [Predicate("a", Op.GE, 0)])
    index.rebuild()
    taken, go = threading.Event(), threading.Event()
    values = index._values

    def paused(events: list[dict[str, Scalar]]) -> np.ndarray:  # the match holds its state
        out = values(events)
        taken.set()
        go.wait(10)
        return out

    monkeypatch.setattr(index, "_values", paused)
    answers: list[list[str]] = []
    reader = threading.Thread(target=lambda: answers.append(index.match({"a": 45})))
    reader.start()
    assert taken.wait(10)
    index.add("z", [Predicate("a", Op.GE, 1000)])
    index.merge()  # the tombstones are copied: the old rows' reader no longer sees new ones
    index.remove("x")
    index.rebuild()  # x's slot is free for a match that starts now, not for the paused one
    index.add("y", [Predicate("a", Op.GE, 100)])  # y does not match 45
    index.merge()
    go.set()
    reader.join(10)
    assert sorted(answers[0]) == ["s0", "s1", "s2", "s3", "s4"]
    monkeypatch.undo()
    assert sorted(index.match({"a": 45})) == ["s0", "s1", "s2", "s3", "s4"]
    assert sorted(index.match({"a": 150})) == ["s5", "s6", "s7", "y"]


@given(
    slots=st.lists(st.integers(0, 300), max_size=60),
    gone=st.lists(st.integers(0, 300), max_size=60),
)
def test_slots_without_others_are_the_set_difference_sorted(
    slots: list[int], gone: list[int]
) -> None:
    got = _without(np.array(slots, np.intp), np.array(gone, np.intp))
    assert got.tolist() == np.setdiff1d(slots, gone).tolist()
    assert got.dtype == np.intp


@pytest.mark.parametrize("merged", [False, True], ids=["in the delta", "merged"])
def test_subscriptions_removed_at_once_stop_matching_at_once(merged: bool) -> None:
    index = IntervalIndex(rebuild_from=1000, delta_limit=1000)  # (nothing rebuilds by itself)
    for i in range(6):
        index.add(f"s{i}", between("x", 0, 10))
    assert len(index.match({"x": 5})) == 6  # (a read: the staged rows join the delta)
    if merged:
        index.merge()
    gone = {index.slot_of(s) for s in ["s1", "s3", "s5"]}
    assert index.remove_many(["s1", "s3", "s3", "absent", "s5"]) == 3
    assert sorted(index.match({"x": 5})) == ["s0", "s2", "s4"]
    (slots,) = index.match_slots_batch([{"x": 5}])
    assert len(slots) == 3 and not gone & set(slots.tolist())  # not answered, not just unnamed
    assert [index.slot_of(s) for s in ["s1", "s3", "s5"]] == [None, None, None]
    assert index.remove_many(["s1"]) == 0
    index.rebuild()
    index.add("new", between("x", 0, 10))  # (a freed slot, taken again)
    assert sorted(index.match({"x": 5})) == ["new", "s0", "s2", "s4"]
