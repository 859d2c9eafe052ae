"""The content index agrees with the reference semantics, whatever the interleaving."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from tests.matching.strategies import attribute_maps, predicate_lists, subscription_ids

from tidings.matching.content import ContentIndex
from tidings.matching.semantics import conjunction_holds
from tidings.model import Op, Predicate, Scalar

add = st.tuples(st.just("add"), subscription_ids, predicate_lists)
remove = st.tuples(st.just("remove"), subscription_ids, st.just(()))


@settings(max_examples=300, deadline=None)
@given(st.lists(add | remove, max_size=12), st.lists(attribute_maps, min_size=1, max_size=4))
def test_the_index_matches_exactly_what_the_oracle_matches(ops, events) -> None:  # type: ignore[no-untyped-def]
    index, truth = ContentIndex(), {}
    for kind, sid, preds in ops:
        if kind == "add":
            index.add(sid, preds)
            truth[sid] = preds
        else:
            assert index.remove(sid) == (truth.pop(sid, None) is not None)
        assert len(index) == len(truth)
    for attrs in events:
        expected = sorted(s for s, ps in truth.items() if conjunction_holds(ps, attrs))
        assert sorted(index.match(attrs)) == expected
    assert index.match_batch(events) == [index.match(e) for e in events]


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
