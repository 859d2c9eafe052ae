"""The content index agrees with the reference semantics, whatever the interleaving."""

from __future__ import annotations

import itertools

from hypothesis import given, settings
from hypothesis import strategies as st
from tests.matching.strategies import attribute_maps, predicate_lists, subscription_ids

from tidings.matching.content import ContentIndex
from tidings.matching.semantics import conjunction_holds
from tidings.model import Op, Predicate, Scalar

numbers = st.integers(-3, 3) | st.sampled_from([-0.0, 0.5, 1.5, 2.5, 1e9])
interval_ops = st.sampled_from([Op.LT, Op.LE, Op.GT, Op.GE, Op.EQ])
keys = st.sampled_from(["k0", "k1", "k2"])
numeric_predicates = st.builds(Predicate, keys, interval_ops, numbers)
numeric_lists = st.lists(numeric_predicates, min_size=1, max_size=4).map(tuple)
values: st.SearchStrategy[Scalar] = numbers | st.booleans() | st.just("1")
numeric_events = st.dictionaries(keys, values, max_size=3)
ids = st.sampled_from([f"s{i}" for i in range(12)])

add = st.tuples(st.just("add"), subscription_ids, predicate_lists)
add_numeric = st.tuples(st.just("add"), ids, numeric_lists)
remove = st.tuples(st.just("remove"), subscription_ids | ids, st.just(()))
rebuild = st.tuples(st.sampled_from(["rebuild", "merge"]), st.just(""), st.just(()))


def run(ops, events, **options) -> None:  # type: ignore[no-untyped-def]
    index, truth = ContentIndex(**options), {}
    for kind, sid, preds in ops:
        if kind == "add":
            index.add(sid, preds)
            truth[sid] = preds
        elif kind == "remove":
            assert index.remove(sid) == (truth.pop(sid, None) is not None)
        elif kind == "merge":
            index.intervals.merge()
        else:
            index.intervals.rebuild()
        assert len(index) == len(truth)
    for attrs in events:
        expected = sorted(s for s, ps in truth.items() if conjunction_holds(ps, attrs))
        assert sorted(index.match(attrs)) == expected
    assert index.match_batch(events) == [index.match(e) for e in events]


@settings(max_examples=300, deadline=None)
@given(st.lists(add | remove, max_size=12), st.lists(attribute_maps, min_size=1, max_size=4))
def test_the_index_matches_exactly_what_the_oracle_matches(ops, events) -> None:  # type: ignore[no-untyped-def]
    run(ops, events)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(add_numeric | add | remove | rebuild, max_size=40),
    st.lists(numeric_events, min_size=1, max_size=6),
    st.integers(1, 8),
    st.integers(1, 4),
)
def test_the_bitsets_agree_with_the_oracle_through_merges_rebuilds_and_tombstones(  # type: ignore[no-untyped-def]
    ops, events, rebuild_from, delta_limit
) -> None:
    run(ops, events, rebuild_from=rebuild_from, delta_limit=delta_limit, bitmap_budget_mib=1)


def matches(preds: list[Predicate], attrs: dict[str, Scalar]) -> bool:
    index = ContentIndex()
    index.add("s", preds)
    return index.match(attrs) == ["s"]


def test_a_range_on_one_key_needs_both_bounds() -> None:
    rng = [Predicate("t", Op.GE, 10), Predicate("t", Op.LT, 20)]
    assert [matches(rng, {"t": t}) for t in (9, 10, 19.5, 20)] == [False, True, True, False]


def test_exists_false_matches_an_event_without_the_key() -> None:
    assert matches([Predicate("k", Op.EXISTS, False)], {})
    assert not matches([Predicate("k", Op.EXISTS, False)], {"k": 1})


def test_numbers_and_strings_never_compare_with_each_other() -> None:
    assert not matches([Predicate("k", Op.LT, 10)], {"k": "5"})
    assert not matches([Predicate("k", Op.EQ, 1)], {"k": True})


def test_a_removed_subscription_slot_is_reused_cleanly() -> None:
    index = ContentIndex()
    index.add("a", [Predicate("k", Op.EQ, 1)])
    index.remove("a")
    index.add("b", [Predicate("k", Op.EQ, 2)])
    assert (index.match({"k": 1}), index.match({"k": 2})) == ([], ["b"])


def test_a_subscription_moves_between_the_two_indexes_when_replaced() -> None:
    index = ContentIndex()
    index.add("a", [Predicate("k", Op.LT, 5)])
    index.add("a", [Predicate("k", Op.PREFIX, "x")])
    assert (index.match({"k": 1}), index.match({"k": "xy"}), len(index)) == ([], ["a"], 1)


def test_many_interval_subscriptions_over_rebuilt_cells_match_exactly() -> None:
    index = ContentIndex(rebuild_from=16, delta_limit=7)
    for i in range(200):
        index.add(f"s{i}", [Predicate("x", Op.GE, i), Predicate("x", Op.LT, i + 10)])
    assert sorted(index.match({"x": 50})) == sorted(f"s{i}" for i in range(41, 51))
    assert index.match({"x": -1}) == [] and index.match({"y": 50}) == []


def test_a_subscription_waiting_in_the_delta_matches_before_its_merge() -> None:
    index = ContentIndex(rebuild_from=1, delta_limit=100)
    index.add("old", [Predicate("x", Op.GT, 0)])
    index.add("new", [Predicate("x", Op.LT, 5)])
    assert sorted(index.match({"x": 3})) == ["new", "old"]
    index.remove("new")
    assert index.match({"x": 3}) == ["old"]


def test_churn_without_growth_keeps_the_slots_bounded() -> None:
    index = ContentIndex(rebuild_from=8, delta_limit=4)
    for i in range(500):
        index.add(f"s{i}", [Predicate("x", Op.EQ, i)])
        index.remove(f"s{i - 3}")
    assert len(index.intervals._ids) < 64 and index.match({"x": 499}) == ["s499"]


def test_removing_many_takes_interval_and_counted_subscriptions_from_any_iterable() -> None:
    index = ContentIndex()
    index.add("numeric", [Predicate("x", Op.GT, 1)])
    index.add("counted", [Predicate("name", Op.NE, "a")])
    index.add("kept", [Predicate("x", Op.GT, 1)])
    assert index.slot_of("counted") is None  # (answered by the counting index)
    assert index.remove_many(s for s in ["numeric", "counted", "absent"]) == 2
    assert index.match({"x": 5, "name": "b"}) == ["kept"]


def test_many_contains_predicates_match_as_the_oracle_through_the_automaton() -> None:
    words = ["".join(w) for n in range(4) for w in itertools.product("ab", repeat=n)]
    index, truth = ContentIndex(), {}
    for i, (first, second) in enumerate(itertools.product(words, repeat=2)):
        preds = (Predicate("k0", Op.CONTAINS, first), Predicate("k0", Op.CONTAINS, second))
        if i % 3 == 0:  # another key, and a duplicated predicate
            preds += (Predicate("k1", Op.CONTAINS, first), preds[0])
        index.add(f"s{i}", preds)
        truth[f"s{i}"] = preds
    events: list[dict[str, Scalar]] = [
        {"k0": v, "k1": w} for v in ["", "a", "abba", "babab", "c" * 50] for w in ["", "bb", 1]
    ]
    events += [{"k0": 1}, {"k0": True, "k1": "ab"}, {}]
    agrees_before_and_after_removing_half(index, truth, events)


def agrees_before_and_after_removing_half(
    index: ContentIndex, truth: dict[str, tuple[Predicate, ...]], events: list[dict[str, Scalar]]
) -> None:
    """The index answers every event as the oracle does, then again once every other
    subscription is gone."""
    for removing in (False, True):
        if removing:
            for sid in list(truth)[::2]:
                index.remove(sid)
                del truth[sid]
        for event in events:
            expected = sorted(s for s, ps in truth.items() if conjunction_holds(ps, event))
            assert sorted(index.match(event)) == expected


affix_values: st.SearchStrategy[Scalar] = st.text(alphabet="ab", max_size=3) | st.sampled_from(
    [0, 1, 1.0, -0.0, True, False]
)
affix_predicates = st.builds(
    Predicate,
    keys,
    st.sampled_from([Op.NE, Op.PREFIX, Op.SUFFIX, Op.NE, Op.EXISTS, Op.EQ]),
    affix_values,
).map(lambda p: Predicate(p.key, p.op, bool(p.value)) if p.op is Op.EXISTS else p)
affix_events = st.dictionaries(
    keys, st.text(alphabet="ab", max_size=4) | st.sampled_from([0, 1.0, -0.0, True]), max_size=3
)
affix_ids = st.sampled_from([f"s{i}" for i in range(40)])
add_affixes = st.tuples(
    st.just("add"), affix_ids, st.lists(affix_predicates, min_size=1, max_size=6).map(tuple)
)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(add_affixes | st.tuples(st.just("remove"), affix_ids, st.just(())), max_size=60),
    st.lists(affix_events, min_size=1, max_size=6),
)
def test_many_not_equal_prefix_suffix_and_exists_predicates_match_as_the_oracle(  # type: ignore[no-untyped-def]
    ops, events
) -> None:
    """Equal values, empty strings, numbers and booleans against strings, missing keys, a
    predicate twice in one subscription, several on one key: counted in bulk, as the oracle."""
    run(ops, events)


def test_every_short_needle_as_prefix_suffix_and_not_equal_matches_as_the_oracle() -> None:
    words = ["".join(w) for n in range(4) for w in itertools.product("ab", repeat=n)]
    ops = [Op.PREFIX, Op.SUFFIX, Op.NE]
    index, truth = ContentIndex(), {}
    for i, (first, second, op) in enumerate(itertools.product(words, words, ops)):
        preds = (Predicate("k0", op, first), Predicate("k0", ops[i % 3], second))
        if i % 4 == 0:  # another key, a number and a duplicated predicate
            preds += (Predicate("k1", Op.NE, i % 3), preds[0])
        index.add(f"s{i}", preds)
        truth[f"s{i}"] = preds
    events: list[dict[str, Scalar]] = [
        {"k0": v, "k1": w} for v in ["", "a", "abba", "babab", "ab", "c"] for w in [0, 1.0, "0"]
    ]
    events += [{"k0": 1}, {"k0": True, "k1": 2}, {"k1": 1}, {}]
    agrees_before_and_after_removing_half(index, truth, events)


def test_not_equal_holds_only_between_values_of_one_type_on_a_present_key() -> None:
    ne = [Predicate("k", Op.NE, "1")]
    assert [matches(ne, e) for e in ({"k": "2"}, {"k": "1"}, {"k": 2}, {"k": True}, {})] == [
        True,
        False,
        False,
        False,
        False,
    ]
    assert not matches([Predicate("k", Op.NE, 1)], {"k": 1.0})
    assert matches([Predicate("k", Op.NE, 1), Predicate("k", Op.NE, 2)], {"k": 3})
