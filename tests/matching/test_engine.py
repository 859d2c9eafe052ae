"""The Matcher agrees with a brute-force oracle built from `semantics`, through any interleaving."""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tidings.matching import bitset, synthetic
from tidings.matching.content import ContentIndex
from tidings.matching.engine import ContentMatcher, Event, Matcher, Matches, ScanContentIndex
from tidings.matching.semantics import any_topic_matches, conjunction_holds
from tidings.model import Op, Predicate

from .strategies import (
    attribute_maps,
    predicate_lists,
    subscriber_ids,
    subscription_changes,
    subscription_ids,
    topic_names,
)

CONTENT_INDEXES: dict[str, Callable[[], ContentMatcher]] = {
    "scan": ScanContentIndex,
    "index": ContentIndex,
}


@dataclass
class Oracle:
    """Every subscription, tested one by one with the reference semantics."""

    topic: dict[str, tuple[str, tuple[str, ...]]] = field(default_factory=dict)
    content: dict[str, tuple[str, tuple[Predicate, ...]]] = field(default_factory=dict)

    def remove(self, sid: str) -> bool:
        return (self.topic.pop(sid, None) or self.content.pop(sid, None)) is not None

    def match(self, event: Event) -> Matches:
        out: Matches = {}
        for sid, (owner, filters) in self.topic.items():
            if any_topic_matches(filters, event.topics):
                out.setdefault(owner, []).append(sid)
        for sid, (owner, predicates) in self.content.items():
            if conjunction_holds(predicates, event.attributes or {}):
                out.setdefault(owner, []).append(sid)
        return {owner: sorted(ids) for owner, ids in out.items()}


def make_matcher(content_index: str) -> Matcher:
    return Matcher(topic_cache_size=4, content=CONTENT_INDEXES[content_index]())


each_content_index = pytest.mark.parametrize("content_index", sorted(CONTENT_INDEXES))


# ---------------------------------------------------------------- examples


def test_a_match_lists_each_subscribers_matching_subscriptions_sorted() -> None:
    matcher = Matcher()
    matcher.add_topic("s3", "alice", ["news/#"])
    matcher.add_content("s1", "alice", [Predicate("price", Op.LT, 10)])
    matcher.add_topic("s2", "bob", ["news/*"])
    event = Event(topics=("news/sport",), attributes={"price": 5})
    assert matcher.match(event) == {"alice": ["s1", "s3"], "bob": ["s2"]}


def test_a_subscription_matching_two_topics_of_a_publication_is_listed_once() -> None:
    matcher = Matcher()
    matcher.add_topic("s1", "alice", ["a", "b"])
    assert matcher.match(Event(topics=("a", "b"))) == {"alice": ["s1"]}


def test_adding_an_existing_id_replaces_it_even_across_kinds() -> None:
    matcher = Matcher()
    matcher.add_topic("s1", "alice", ["a"])
    matcher.add_content("s1", "bob", [Predicate("k", Op.EXISTS, True)])
    assert len(matcher) == 1
    assert matcher.match(Event(topics=("a",))) == {}
    assert matcher.match(Event(attributes={"k": 1})) == {"bob": ["s1"]}


def test_removing_answers_whether_the_subscription_was_there() -> None:
    matcher = Matcher()
    matcher.add_content("s1", "alice", [Predicate("k", Op.EQ, 1)])
    assert matcher.remove("s1") is True
    assert matcher.remove("s1") is False
    assert matcher.match(Event(attributes={"k": 1})) == {}
    assert len(matcher) == 0


def test_removing_many_topic_and_content_subscriptions_at_once_forgets_exactly_them() -> None:
    matcher = Matcher()
    for n in range(6):
        matcher.add_topic(f"t{n}", "alice" if n % 2 else "bob", ["news/#", f"n/{n}"])
        matcher.add_content(f"c{n}", "alice", [Predicate("k", Op.EQ, 1)])
    event = Event(topics=("news/x", "n/4"), attributes={"k": 1})
    assert matcher.match(event)  # cached before the removal
    assert matcher.remove_many(["t0", "t1", "c2", "t4", "absent"]) == 4
    assert len(matcher) == 8
    assert matcher.match(event) == {
        "alice": ["c0", "c1", "c3", "c4", "c5", "t3", "t5"],
        "bob": ["t2"],
    }


def test_an_event_without_attributes_matches_only_exists_false() -> None:
    matcher = Matcher()
    matcher.add_content("s1", "alice", [Predicate("k", Op.EXISTS, False)])
    matcher.add_content("s2", "alice", [Predicate("k", Op.NE, 1)])
    assert matcher.match(Event(topics=("a",))) == {"alice": ["s1"]}


def test_the_thesis_topic_scenario_matches_each_publication_once_per_subscriber() -> None:
    matcher = Matcher()
    matcher.add_topic("t1", "S1", ["topic1", "topic2"])
    matcher.add_topic("t2", "S2", ["topic2"])
    matcher.add_topic("t3", "S3", ["topic2", "topic3"])
    events = [
        Event(("topic1",)),
        Event(("topic2", "topic3")),
        Event(("topic3",)),
        Event(("topic4",)),
    ]
    received = {who: 0 for who in ("S1", "S2", "S3", "S4")}
    for matches in matcher.match_batch(events):
        for who in matches:
            received[who] += 1
    # The compat API delivers once per matching topic (S3 then gets 3); matching is per event.
    assert received == {"S1": 2, "S2": 1, "S3": 2, "S4": 0}


def test_the_thesis_content_scenario_delivers_one_zero_zero_one() -> None:
    matcher = Matcher()
    matcher.add_content("c1", "A", [Predicate("content1", Op.LT, 1000)])
    matcher.add_content("c2", "B", [Predicate("content2", Op.EQ, 1000)])
    matcher.add_content("c3", "C", [Predicate("content1", Op.GT, 200)])
    matcher.add_content("c4", "D", [Predicate("content3", Op.EQ, "text")])
    events = [
        Event(attributes={"content1": 200}),
        Event(attributes={"content2": 500}),
        Event(attributes={"content3": "text"}),
        Event(attributes={"content3": "mobile"}),
    ]
    received = {who: 0 for who in "ABCD"}
    for matches in matcher.match_batch(events):
        for who in matches:
            received[who] += 1
    assert received == {"A": 1, "B": 0, "C": 0, "D": 1}


def test_a_batch_matches_as_its_events_do_one_by_one() -> None:
    matcher = Matcher()
    matcher.add_topic("t", "alice", ["a/*"])
    matcher.add_content("c", "bob", [Predicate("n", Op.IN, (1, 2))])
    events = [Event(("a/b",), {"n": 1}), Event(("a",), {"n": 3}), Event()]
    assert matcher.match_batch(events) == [matcher.match(e) for e in events]
    assert matcher.match_batch([]) == []


# ---------------------------------------------------------------- against the oracle

events = st.builds(
    Event,
    topics=st.lists(topic_names(), max_size=3, unique=True).map(tuple),
    attributes=st.none() | attribute_maps,
)
steps = st.one_of(
    *subscription_changes,
)


def apply(matcher: Matcher, oracle: Oracle, step: tuple[str, str, str, object]) -> None:
    action, sid, owner, args = step
    if action == "topic":
        oracle.remove(sid)
        matcher.add_topic(sid, owner, args)  # type: ignore[arg-type]
        oracle.topic[sid] = (owner, args)  # type: ignore[assignment]
    elif action == "content":
        oracle.remove(sid)
        matcher.add_content(sid, owner, args)  # type: ignore[arg-type]
        oracle.content[sid] = (owner, args)  # type: ignore[assignment]
    else:
        assert matcher.remove(sid) is oracle.remove(sid)


@each_content_index
@settings(max_examples=250, deadline=None)
@given(script=st.lists(steps, min_size=1, max_size=30), probes=st.lists(events, max_size=6))
def test_the_matcher_agrees_with_the_oracle_through_any_interleaving(
    content_index: str, script: list[tuple[str, str, str, object]], probes: list[Event]
) -> None:
    matcher, oracle = make_matcher(content_index), Oracle()
    for step in script:
        apply(matcher, oracle, step)
        assert len(matcher) == len(oracle.topic) + len(oracle.content)
        expected = [oracle.match(e) for e in probes]
        assert matcher.match_batch(probes) == expected
        assert [matcher.match(e) for e in probes] == expected


@each_content_index
@settings(max_examples=150, deadline=None)
@given(
    subscriptions=st.dictionaries(
        subscription_ids, st.tuples(subscriber_ids, predicate_lists), min_size=1
    ),
    batch=st.lists(attribute_maps, min_size=1, max_size=8),
)
def test_content_matching_agrees_with_the_oracle_on_every_operator(
    content_index: str,
    subscriptions: dict[str, tuple[str, tuple[Predicate, ...]]],
    batch: list[dict[str, object]],
) -> None:
    matcher, oracle = make_matcher(content_index), Oracle()
    for sid, (owner, predicates) in subscriptions.items():
        matcher.add_content(sid, owner, predicates)
        oracle.content[sid] = (owner, predicates)
    events_ = [Event(attributes=a) for a in batch]  # type: ignore[arg-type]
    assert matcher.match_batch(events_) == [oracle.match(e) for e in events_]


# ---------------------------------------------------------------- the cache of topic answers


def test_a_cached_topic_answer_follows_adds_and_removes_of_exact_filters_and_patterns() -> None:
    matcher = Matcher()
    matcher.add_topic("s1", "alice", ["a/b"])
    assert matcher.match(Event(("a/b",))) == {"alice": ["s1"]}
    matcher.add_topic("s2", "bob", ["a/b"])
    assert matcher.match(Event(("a/b",))) == {"alice": ["s1"], "bob": ["s2"]}
    matcher.add_topic("s3", "bob", ["a/*"])
    assert matcher.match(Event(("a/b",))) == {"alice": ["s1"], "bob": ["s2", "s3"]}
    matcher.remove("s3")
    matcher.remove("s1")
    assert matcher.match(Event(("a/b",))) == {"bob": ["s2"]}


def test_content_matches_never_change_a_cached_topic_answer() -> None:
    matcher = Matcher()
    matcher.add_topic("t", "alice", ["news"])
    matcher.add_content("c", "alice", [Predicate("n", Op.GT, 1)])
    assert matcher.match(Event(("news",), {"n": 2})) == {"alice": ["c", "t"]}
    assert matcher.match(Event(("news",), {"n": 0})) == {"alice": ["t"]}


def test_a_subscriber_with_several_matching_subscriptions_gets_them_sorted() -> None:
    matcher = Matcher()
    for sid in ("s9", "s1", "s5"):
        matcher.add_topic(sid, "alice", ["x/#"])
    matcher.add_topic("s2", "bob", ["x/y"])
    assert matcher.match(Event(("x/y",))) == {"alice": ["s1", "s5", "s9"], "bob": ["s2"]}


def test_a_subscription_with_an_exact_filter_and_a_pattern_on_one_topic_is_listed_once() -> None:
    matcher = Matcher()
    matcher.add_topic("s1", "alice", ["a/b", "a/*"])
    matcher.add_topic("s2", "alice", ["a/b"])
    assert matcher.match(Event(topics=("a/b",))) == {"alice": ["s1", "s2"]}
    matcher.remove("s2")
    assert matcher.match(Event(topics=("a/b",))) == {"alice": ["s1"]}


def test_an_answer_handed_out_keeps_its_value_when_subscriptions_change() -> None:
    matcher = Matcher(topic_cache_size=0)
    matcher.add_topic("s1", "alice", ["a/b"])
    before = matcher.match(Event(topics=("a/b",)))
    matcher.add_topic("s2", "alice", ["a/b"])
    matcher.remove("s1")
    assert before == {"alice": ["s1"]}
    assert matcher.match(Event(topics=("a/b",))) == {"alice": ["s2"]}


# ---------------------------------------------------------------- content in bulk


@each_content_index
def test_content_added_in_bulk_matches_as_if_added_one_by_one(content_index: str) -> None:
    items = [
        ("c1", "alice", [Predicate("n", Op.GT, 1)]),
        ("c2", "bob", [Predicate("n", Op.LT, 5)]),
        ("c3", "alice", [Predicate("kind", Op.PREFIX, "sen")]),
        ("c4", "carol", [Predicate("n", Op.GE, 0), Predicate("n", Op.LE, 9)]),
    ]
    bulk, single = make_matcher(content_index), make_matcher(content_index)
    bulk.add_contents(items)
    for sid, owner, predicates in items:
        single.add_content(sid, owner, predicates)
    probes = [Event(attributes={"n": 3, "kind": "sensor"}), Event(attributes={"n": 7}), Event()]
    assert bulk.match_batch(probes) == single.match_batch(probes)
    assert bulk.match(probes[0]) == {"alice": ["c1", "c3"], "bob": ["c2"], "carol": ["c4"]}


@each_content_index
def test_an_id_given_twice_in_one_bulk_add_keeps_the_last(content_index: str) -> None:
    matcher = make_matcher(content_index)
    matcher.add_topic("s", "dave", ["news"])
    matcher.add_contents(
        [("s", "alice", [Predicate("n", Op.GT, 1)]), ("s", "bob", [Predicate("n", Op.LT, 1)])]
    )
    assert len(matcher) == 1
    assert matcher.match(Event(("news",), {"n": 0})) == {"bob": ["s"]}
    assert matcher.match(Event(("news",), {"n": 2})) == {}


def test_a_subscription_moving_between_subscribers_is_answered_for_its_new_owner() -> None:
    matcher = Matcher()
    matcher.add_content("c", "alice", [Predicate("n", Op.GT, 1)])
    matcher.add_content("c", "bob", [Predicate("n", Op.GT, 1)])
    assert matcher.match(Event(attributes={"n": 2})) == {"bob": ["c"]}
    matcher.remove("c")
    assert matcher.match(Event(attributes={"n": 2})) == {}


def test_content_added_as_columns_matches_as_the_same_predicates_do() -> None:
    w = synthetic.named("W-B", domain=1000)
    rng = np.random.default_rng(7)
    attrs, lows = synthetic.subscription_arrays(w, 300, rng)
    ids = [f"s{i}" for i in range(300)]
    owners = [f"u{i % 40}" for i in range(300)]
    columns, objects = Matcher(), Matcher()
    columns.add_content_arrays(ids, owners, synthetic.columns_of(w, attrs, lows))
    objects.add_contents(zip(ids, owners, synthetic.predicates_of(w, attrs, lows), strict=True))
    probes = [
        Event(attributes=e) for e in synthetic.events_of(w, synthetic.event_arrays(w, 40, rng))
    ]
    answers = columns.match_batch(probes)
    assert answers == objects.match_batch(probes)
    assert sum(map(len, answers)) > 0
    columns.remove("s0")
    assert all("s0" not in ids for a in columns.match_batch(probes) for ids in a.values())


def test_columns_with_a_repeated_id_are_refused() -> None:
    w = synthetic.named("W-B", domain=1000)
    attrs, lows = synthetic.subscription_arrays(w, 2, np.random.default_rng(1))
    with pytest.raises(ValueError, match="repeats"):
        Matcher().add_content_arrays(["s", "s"], ["u", "u"], synthetic.columns_of(w, attrs, lows))


def test_columns_that_do_not_fit_are_refused_and_change_nothing() -> None:
    w = synthetic.named("W-B", domain=1000)
    attrs, lows = synthetic.subscription_arrays(w, 2, np.random.default_rng(1))
    columns = synthetic.columns_of(w, attrs, lows)
    matcher = Matcher()
    matcher.add_content("a", "alice", [Predicate("n", Op.GT, 1)])
    with pytest.raises(ValueError, match="differ"):
        matcher.add_content_arrays(["a", "b"], ["u"], columns)
    with pytest.raises(ValueError, match="empty"):
        matcher.add_content_arrays(["a", ""], ["u", "u"], columns)
    assert len(matcher) == 1
    assert matcher.match(Event(attributes={"n": 2})) == {"alice": ["a"]}


def test_a_scanning_content_index_takes_no_columns() -> None:
    w = synthetic.named("W-B", domain=1000)
    attrs, lows = synthetic.subscription_arrays(w, 1, np.random.default_rng(1))
    matcher = Matcher(content=ScanContentIndex())
    with pytest.raises(TypeError):
        matcher.add_content_arrays(["s"], ["u"], synthetic.columns_of(w, attrs, lows))


def test_many_subscriptions_through_rebuilds_and_reused_slots_agree_with_the_oracle() -> None:
    """Every write path, over enough rounds that the interval index rebuilds and reuses the
    slots it freed."""
    rng = random.Random(5)
    content = ContentIndex(rebuild_from=2, delta_limit=8)
    matcher, oracle = Matcher(content=content), Oracle()
    keys = ["k0", "k1", "k2"]
    next_id = 0
    held: dict[int | None, set[str]] = {}  # slot -> the subscriptions it ever held

    def fresh(count: int) -> list[tuple[str, str, tuple[Predicate, ...]]]:
        nonlocal next_id
        items = []
        for _ in range(count):
            key, low = rng.choice(keys), rng.randrange(0, 60)
            preds = (Predicate(key, Op.GE, low), Predicate(key, Op.LE, low + 50))
            items.append((f"s{next_id}", f"u{rng.randrange(7)}", preds))
            next_id += 1
        return items

    def add(items: list[tuple[str, str, tuple[Predicate, ...]]], way: int) -> None:
        if way == 0:
            matcher.add_contents(items)
        elif way == 1:
            for sid, owner, preds in items:
                matcher.add_content(sid, owner, preds)
        else:
            ops = np.array([[bitset.GE, bitset.LE]] * len(items), np.int8)
            attrs = np.array([[keys.index(p[0].key)] * 2 for _, _, p in items])
            vals = np.array([[p[0].value, p[1].value] for _, _, p in items], float)
            rows = bitset.IntervalRows(keys, attrs, ops, vals)
            matcher.add_content_arrays([i[0] for i in items], [i[1] for i in items], rows)
        for sid, owner, preds in items:
            oracle.content[sid] = (owner, preds)
            held.setdefault(content.slot_of(sid), set()).add(sid)

    add(fresh(300), 0)
    for round_ in range(24):
        for sid in rng.sample(sorted(oracle.content), 40):
            assert matcher.remove(sid) is oracle.remove(sid)
        add(fresh(40), round_ % 3)
        events = [Event(attributes={k: rng.randrange(0, 110) for k in keys}) for _ in range(4)]
        answers = matcher.match_batch(events)
        assert answers == [oracle.match(e) for e in events]
    assert None not in held and any(len(ids) > 1 for ids in held.values())  # slots reused


def test_columns_replace_the_subscriptions_whose_ids_they_hold_of_either_kind() -> None:
    w = synthetic.named("W-B", domain=1000)
    attrs, lows = synthetic.subscription_arrays(w, 3, np.random.default_rng(1))
    predicates = synthetic.predicates_of(w, attrs, lows)
    matcher = Matcher()
    matcher.add_topic("s0", "old", ["news"])
    matcher.add_content("s1", "old", [Predicate("n", Op.GT, 1)])
    matcher.add_content_arrays(
        ["s0", "s1", "s2"], ["u0", "u1", "u2"], synthetic.columns_of(w, attrs, lows)
    )
    assert matcher.match(Event(("news",), {"n": 2})) == {}
    objects = Matcher()
    objects.add_contents(zip(["s0", "s1", "s2"], ["u0", "u1", "u2"], predicates, strict=True))
    probes = [
        Event(attributes=e)
        for e in synthetic.events_of(w, synthetic.event_arrays(w, 200, np.random.default_rng(2)))
    ]
    assert matcher.match_batch(probes) == objects.match_batch(probes)
    assert len(matcher) == 3
