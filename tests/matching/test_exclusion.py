"""An Exclusion leaves its subscriptions out of a Matcher's answers, by slot or by id, and a
freed slot taken by another subscription is never hidden for it."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from tidings.matching.content import ContentIndex
from tidings.matching.engine import Event, Matcher, ScanContentIndex
from tidings.matching.exclusion import without
from tidings.model import Op, Predicate

IN_RANGE = (Predicate("x", Op.GE, 0), Predicate("x", Op.LE, 10))
TEXT = (Predicate("colour", Op.EQ, "red"),)  # answered by id, not by slot
EVENT = Event(("news",), {"x": 5, "colour": "red"})


def test_hidden_content_and_topic_subscriptions_are_left_out_of_the_answers() -> None:
    matcher = Matcher()
    matcher.add_contents([("c1", "alice", IN_RANGE), ("c2", "bob", IN_RANGE)])
    matcher.add_content("t1", "bob", TEXT)
    matcher.add_topic("n1", "carol", ["news"])
    hidden = matcher.exclusion(["c2", "t1", "n1"])
    assert hidden.mask.any() and not {"c2"} & hidden.unmasked  # c2 by its slot
    assert matcher.match_batch([EVENT], hidden) == [{"alice": ["c1"]}]
    assert matcher.match_batch([EVENT]) == [matcher.match(EVENT)]  # others see them all


def test_a_shown_subscription_comes_back() -> None:
    matcher = Matcher()
    matcher.add_contents([("c1", "alice", IN_RANGE), ("c2", "alice", IN_RANGE)])
    hidden = matcher.exclusion(["c1", "c2"])
    hidden.discard("c1")
    assert matcher.match_batch([EVENT], hidden) == [{"alice": ["c1"]}]
    assert list(hidden) == ["c2"] and "c2" in hidden and len(hidden) == 1


def test_a_freed_slot_is_not_hidden_for_the_subscription_that_takes_it() -> None:
    content = ContentIndex(rebuild_from=2, delta_limit=2)  # rebuilds free removed slots
    matcher = Matcher(content=content)
    matcher.add_contents([(f"f{i}", "carol", IN_RANGE) for i in range(4)])
    matcher.add_content("gone", "alice", IN_RANGE)
    hidden, slot = matcher.exclusion(["gone"]), content.slot_of("gone")
    matcher.remove("gone")
    for i in range(4):  # a rebuild, then no match older than it
        matcher.add_content(f"k{i}", "carol", IN_RANGE)
        matcher.wait()
        matcher.match_batch([EVENT])
    matcher.add_content("new", "bob", IN_RANGE)
    assert content.slot_of("new") == slot
    assert matcher.match_batch([EVENT], hidden)[0]["bob"] == ["new"]


def test_a_hidden_subscription_replaced_in_another_slot_stays_hidden() -> None:
    matcher = Matcher()
    matcher.add_content("c1", "alice", IN_RANGE)
    hidden = matcher.exclusion(["c1"])
    matcher.add_content("c1", "alice", IN_RANGE)  # replaced: its slot freed, a new one
    assert "c1" in hidden.unmasked
    assert matcher.match_batch([EVENT], hidden) == [{}]
    hidden.update(["c1"])  # hidden again: by its new slot
    assert not hidden.unmasked and matcher.match_batch([EVENT], hidden) == [{}]


def test_an_id_hidden_before_it_is_indexed_is_left_out_once_it_is() -> None:
    matcher = Matcher()
    hidden = matcher.exclusion(["later"])
    matcher.add_content("later", "alice", IN_RANGE)
    assert matcher.match_batch([EVENT], hidden) == [{}]


def test_without_copies_an_answer_leaving_out_the_given_ids() -> None:
    answer = {"alice": ["a", "b"], "bob": ["c"]}
    assert without(answer, {"b", "c"}) == {"alice": ["a"]}
    assert answer == {"alice": ["a", "b"], "bob": ["c"]}


ID = st.sampled_from([f"s{i}" for i in range(12)])
STEP = st.one_of(
    st.tuples(st.just("interval"), ID, st.integers(0, 9)),
    st.tuples(st.just("text"), ID, st.sampled_from(["red", "blue"])),
    st.tuples(st.just("topic"), ID, st.sampled_from(["news", "sport"])),
    st.tuples(st.just("remove"), ID, st.none()),
    st.tuples(st.just("hide"), ID, st.none()),
    st.tuples(st.just("show"), ID, st.none()),
    st.tuples(st.just("remove many"), st.lists(ID, min_size=1, max_size=5), st.none()),
    st.tuples(st.just("show many"), st.lists(ID, min_size=1, max_size=5), st.none()),
)


@settings(max_examples=200, deadline=None)
@given(steps=st.lists(STEP, max_size=60), scan=st.booleans(), x=st.integers(0, 12))
def test_answers_without_an_exclusion_are_the_answers_less_its_ids_through_any_script(
    steps: list[tuple[str, str | list[str], object]], scan: bool, x: int
) -> None:
    content = ScanContentIndex() if scan else ContentIndex(rebuild_from=2, delta_limit=4)
    matcher = Matcher(topic_cache_size=4, content=content)  # (rebuilds: freed slots reused)
    hidden, truth = matcher.exclusion(), set[str]()
    event = Event(("news",), {"x": x, "colour": "red"})
    for kind, sid, value in steps:
        if kind in ("remove many", "show many"):
            assert isinstance(sid, list)
        else:
            assert isinstance(sid, str)
        if kind == "interval":
            assert isinstance(value, int)
            lows = (Predicate("x", Op.GE, value), Predicate("x", Op.LE, value + 3))
            matcher.add_content(sid, f"u{value % 3}", lows)
        elif kind == "text":
            matcher.add_content(sid, "u0", (Predicate("colour", Op.EQ, value),))
        elif kind == "topic":
            assert isinstance(value, str)
            matcher.add_topic(sid, "u1", [value])
        elif kind == "remove":
            matcher.remove(sid)
        elif kind == "remove many":  # (at once: their slots, owners and mask entries)
            held = len(matcher)
            assert matcher.remove_many(sid) == held - len(matcher)
            assert not any(s in matcher._owner for s in sid)
        elif kind == "show many":
            hidden.difference_update(sid)
            truth.difference_update(sid)
        elif kind == "hide":
            hidden.update([sid])
            truth.add(sid)
        else:
            hidden.discard(sid)
            truth.discard(sid)
        assert matcher.match_batch([event], hidden) == [without(matcher.match(event), truth)]


def test_subscriptions_shown_at_once_come_back() -> None:
    matcher = Matcher()
    matcher.add_contents([(f"c{i}", "alice", IN_RANGE) for i in range(3)])
    matcher.add_topic("n1", "bob", ["news"])
    hidden = matcher.exclusion(["c0", "c1", "c2", "n1"])
    hidden.difference_update(["c0", "c2", "n1", "never hidden"])
    assert matcher.match_batch([EVENT], hidden) == [{"alice": ["c0", "c2"], "bob": ["n1"]}]
    assert list(hidden) == ["c1"]


def test_a_hidden_subscription_removed_among_others_stays_hidden_when_indexed_again() -> None:
    matcher = Matcher()
    matcher.add_contents([("c1", "alice", IN_RANGE), ("c2", "bob", IN_RANGE)])
    hidden = matcher.exclusion(["c1"])
    assert matcher.remove_many(["c1", "c2", "absent"]) == 2
    assert "c1" in hidden.unmasked and not hidden.mask.any()  # by id now: its slot is free
    matcher.add_content("c1", "alice", IN_RANGE)
    matcher.add_content("c3", "carol", IN_RANGE)
    assert matcher.match_batch([EVENT], hidden) == [{"carol": ["c3"]}]


def test_slots_freed_at_once_are_not_hidden_for_the_subscriptions_that_take_them() -> None:
    content = ContentIndex(rebuild_from=2, delta_limit=2)  # rebuilds free removed slots
    matcher = Matcher(content=content)
    matcher.add_contents([(f"f{i}", "carol", IN_RANGE) for i in range(4)])
    matcher.add_contents([("gone1", "alice", IN_RANGE), ("gone2", "alice", IN_RANGE)])
    hidden = matcher.exclusion(["gone1", "gone2"])
    slots = {content.slot_of("gone1"), content.slot_of("gone2")}
    matcher.remove_many(["gone1", "gone2"])
    for i in range(4):  # a rebuild, then no match older than it
        matcher.add_content(f"k{i}", "carol", IN_RANGE)
        matcher.wait()
        matcher.match_batch([EVENT])
    matcher.add_contents([("new1", "bob", IN_RANGE), ("new2", "bob", IN_RANGE)])
    assert {content.slot_of("new1"), content.slot_of("new2")} == slots
    assert matcher.match_batch([EVENT], hidden)[0]["bob"] == ["new1", "new2"]
