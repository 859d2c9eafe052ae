"""The topic index agrees with `semantics.topic_matches`, through adds, removes and its cache."""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tidings.matching.semantics import any_topic_matches
from tidings.matching.topics import TopicIndex

from .strategies import raw_topics, subscription_ids, topic_filters, topic_names

Oracle = dict[str, tuple[str, ...]]


def oracle_match(oracle: Oracle, topics: Sequence[str]) -> set[str]:
    return {sid for sid, filters in oracle.items() if any_topic_matches(filters, tuple(topics))}


def index_of(subscriptions: dict[str, list[str]], cache_size: int = 16) -> TopicIndex:
    index = TopicIndex(cache_size=cache_size)
    for sid, filters in subscriptions.items():
        index.add(sid, filters)
    return index


# ---------------------------------------------------------------- documented semantics


@pytest.mark.parametrize(
    ("pattern", "topic", "expected"),
    [
        ("a/#", "a", True),
        ("a/#", "a/b", True),
        ("a/#", "a/b/c", True),
        ("a/#", "ab", False),
        ("a/*", "a/b", True),
        ("a/*", "a", False),
        ("a/*", "a/b/c", False),
        ("*/b", "a/b", True),
        ("*/*", "a", False),
        ("#", "a", True),
        ("#", "a/b/c", True),
        ("a/*/#", "a", False),
        ("a/*/#", "a/b", True),
        ("a/*/#", "a/b/c/d", True),
        ("a/b", "a/b", True),
        ("a/b", "a/b/c", False),
        ("a/b", "a", False),
    ],
)
def test_a_pattern_matches_exactly_the_documented_topics(
    pattern: str, topic: str, expected: bool
) -> None:
    assert (index_of({"s": [pattern]}).match([topic]) == {"s"}) is expected


def test_an_exact_name_matches_only_itself() -> None:
    index = index_of({"s1": ["news/sport"], "s2": ["news"]})
    assert index.match(["news/sport"]) == {"s1"}
    assert index.match(["news/sport/tennis"]) == set()


def test_a_publication_with_several_topics_matches_a_subscription_once() -> None:
    index = index_of({"s1": ["a/*", "b"], "s2": ["c"]})
    assert index.match(["a/x", "b", "z"]) == {"s1"}


def test_a_publication_without_topics_matches_nothing() -> None:
    assert index_of({"s1": ["#"]}).match([]) == set()


def test_removing_a_subscription_forgets_all_its_filters() -> None:
    index = index_of({"s1": ["a/#", "b", "c/*"]})
    assert index.remove("s1") is True
    assert index.match(["a", "b", "c/d"]) == set()
    assert len(index) == 0


def test_removing_an_unknown_subscription_answers_false() -> None:
    index = index_of({"s1": ["a"]})
    assert index.remove("nope") is False
    assert len(index) == 1


def test_adding_an_existing_id_replaces_its_filters() -> None:
    index = index_of({"s1": ["a", "b/#"]})
    index.add("s1", ["c"])
    assert index.match(["a", "b/x"]) == set()
    assert index.match(["c"]) == {"s1"}
    assert len(index) == 1


def test_a_subscription_added_after_a_cached_answer_is_matched() -> None:
    index = index_of({"s1": ["a/b"]})
    assert index.match(["a/b"]) == {"s1"}
    index.add("s2", ["a/*"])
    index.add("s3", ["a/b"])
    assert index.match(["a/b"]) == {"s1", "s2", "s3"}


def test_a_subscription_removed_after_a_cached_answer_is_not_matched() -> None:
    index = index_of({"s1": ["a/b"], "s2": ["#"]})
    assert index.match(["a/b"]) == {"s1", "s2"}
    index.remove("s2")
    assert index.match(["a/b"]) == {"s1"}
    index.remove("s1")
    assert index.match(["a/b"]) == set()


def test_the_cache_keeps_only_the_most_recent_topics() -> None:
    index = index_of({"s1": ["#"]}, cache_size=2)
    for topic in ("a", "b", "a", "c"):
        index.match([topic])
    assert index.cache_info() == (2, 2)
    assert set(index._cache) == {"a", "c"}


def test_the_cache_holds_at_most_its_budget_of_slots_the_oldest_answers_leaving() -> None:
    index = TopicIndex(cache_size=1000, cache_slots=80)
    for n in range(10):
        index.add(f"s{n}", ["#"])
    for topic in ("a", "b", "c", "d", "e", "f", "g", "h", "i"):
        assert len(index.match_slots(topic)) == 10
    assert index.cached_slots() == (80, 80)
    assert list(index._cache) == ["b", "c", "d", "e", "f", "g", "h", "i"]


def test_the_pattern_cache_holds_at_most_its_budget_of_keys() -> None:
    index = TopicIndex(cache_size=1000, cache_slots=16)
    index.add("s1", ["#"])
    index.add("s2", ["*/#"])  # two keys an answer for a topic of two levels or more
    for topic in ("a/1", "a/2", "a/3", "a/4", "a/5", "a/6", "a/7", "a/8", "a/9"):
        assert len(index.pattern_keys(topic)) == 2
    assert index._pattern_cache.held == 16
    assert list(index._pattern_cache) == [f"a/{n}" for n in range(2, 10)]


def test_an_answer_past_an_eighth_of_the_budget_is_served_but_not_cached() -> None:
    index = TopicIndex(cache_slots=79)
    for n in range(10):
        index.add(f"s{n}", ["#"])
    assert len(index.match_slots("a")) == 10
    assert index.cache_info()[0] == 0 and index.cached_slots() == (0, 79)
    assert index.match(["a"]) == {f"s{n}" for n in range(10)}


def test_dropping_and_clearing_cached_answers_gives_their_slots_back() -> None:
    index = index_of({"s1": ["a"], "s2": ["a"], "s3": ["b"]})
    index.match(["a"])
    index.match(["b"])
    assert index.cached_slots()[0] == 3
    index.add("s4", ["a"])  # an exact filter drops its one topic
    assert index.cached_slots()[0] == 1
    index.add("s5", ["x/*"])  # a pattern clears the cache
    assert index.cached_slots()[0] == 0 and index._pattern_cache.held == 0


def test_cached_pattern_answers_share_the_trie_s_strings() -> None:
    index = index_of({"s1": ["a/#"], "s2": ["a/*/c"]})
    first, second = index.pattern_keys("a/b/c"), index.pattern_keys("a/x/c")
    assert sorted(first) == ["a/#", "a/*/c"]
    assert all(x is y for x, y in zip(sorted(first), sorted(second), strict=True))


def test_an_index_without_cache_still_matches() -> None:
    index = index_of({"s1": ["a/*"]}, cache_size=0)
    assert index.match(["a/b"]) == {"s1"}
    assert index.cache_info() == (0, 0)


def test_a_popular_filter_keeps_the_right_subscribers_as_they_leave() -> None:
    count = 100
    index = index_of({f"s{i}": ["hot", "hot/#"] for i in range(count)})
    assert len(index.match(["hot"])) == count
    for i in range(0, count, 2):
        index.remove(f"s{i}")
    assert index.match(["hot/x"]) == {f"s{i}" for i in range(1, count, 2)}


def test_removing_the_last_pattern_prunes_the_trie() -> None:
    index = index_of({"s1": ["a/*/c/#"], "s2": ["a/b"]})
    index.remove("s1")
    assert not index._patterns
    assert index.match(["a/b"]) == {"s2"}


def test_an_answer_computed_while_the_index_changed_is_not_cached() -> None:
    index = index_of({"s1": ["a"]})
    compute = index._compute

    def racing(topic: str) -> object:
        answer = compute(topic)
        index.add("s2", ["a"])  # a mutation lands while the answer is being computed
        return answer

    index._compute = racing  # type: ignore[method-assign,assignment]
    assert index.match(["a"]) == {"s1"}
    index._compute = compute  # type: ignore[method-assign]
    assert index.match(["a"]) == {"s1", "s2"}


def test_every_mutation_advances_the_generation() -> None:
    index = TopicIndex()
    before = index.generation
    index.add("s1", ["a"])
    index.remove("s1")
    assert index.generation == before + 2


# ---------------------------------------------------------------- against the oracle

Step = tuple[str, str, tuple[str, ...]]
steps = st.one_of(
    st.tuples(st.just("add"), subscription_ids, st.lists(topic_filters(), max_size=3).map(tuple)),
    st.tuples(st.just("remove"), subscription_ids, st.just(())),
)
probes = st.lists(st.lists(topic_names(), min_size=1, max_size=2), min_size=1, max_size=6)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(steps, min_size=1, max_size=40),
    probes,
    st.sampled_from([0, 1, 3, 1000]),
    st.sampled_from([0, 8, 24, 1 << 22]),
)
def test_the_index_agrees_with_the_oracle_through_adds_removes_and_matches(
    script: list[Step], probe_topics: list[list[str]], cache_size: int, cache_slots: int
) -> None:
    index, oracle = TopicIndex(cache_size=cache_size, cache_slots=cache_slots), {}
    for action, sid, filters in script:
        if action == "add":
            index.add(sid, filters)
            oracle[sid] = filters
        else:
            assert index.remove(sid) is (oracle.pop(sid, None) is not None)
        assert len(index) == len(oracle)
        for topics in probe_topics:
            assert index.match(topics) == oracle_match(oracle, topics)
        assert index.cached_slots()[0] == sum(map(len, index._cache.values()))
        assert index._pattern_cache.held == sum(map(len, index._pattern_cache.values()))


@settings(max_examples=200, deadline=None)
@given(
    st.dictionaries(subscription_ids, st.lists(raw_topics, min_size=1, max_size=3)),
    st.lists(raw_topics, min_size=1, max_size=3),
)
def test_the_index_agrees_with_the_oracle_on_any_string(
    subscriptions: dict[str, list[str]], topics: list[str]
) -> None:
    index = index_of(subscriptions)
    oracle = {sid: tuple(filters) for sid, filters in subscriptions.items()}
    assert index.match(topics) == oracle_match(oracle, topics)
    assert index.match(topics) == oracle_match(oracle, topics)  # again, from the cache


@settings(max_examples=100, deadline=None)
@given(st.lists(topic_filters(), min_size=1, max_size=30, unique=True))
def test_removing_everything_leaves_an_empty_index(filters: list[str]) -> None:
    index = index_of({f"s{i}": [f] for i, f in enumerate(filters)})
    for i in range(len(filters)):
        assert index.remove(f"s{i}") is True
    assert len(index) == 0
    assert not index._patterns
    assert not index._exact


def test_every_wildcard_filter_of_the_deepest_allowed_kind_matches_as_the_oracle() -> None:
    # the worst case `max_pattern_segments` leaves (8): every mix of `*` and `a`, and of fewer
    # levels then `#`: a topic's walk reaches every one of their trie's nodes, 511 at most
    ending = ["/".join(c) for c in itertools.product("*a", repeat=8)]
    rest = ["/".join((*c, "#")) for n in range(8) for c in itertools.product("*a", repeat=n)]
    index = TopicIndex()
    for n, topic_filter in enumerate(ending + rest):
        index.add(f"s{n}", [topic_filter])
    for topic in ["a/a/a/a/a/a/a/a", "a/b/a/b/a/b/a/b", "a/a/a", "b/a/a/a/a/a/a/a/a"]:
        expected = {
            f"s{n}" for n, f in enumerate(ending + rest) if any_topic_matches((f,), (topic,))
        }
        assert index.match([topic]) == expected


@settings(max_examples=200, deadline=None)
@given(
    st.dictionaries(subscription_ids, st.lists(topic_filters(), min_size=1, max_size=3)),
    st.data(),
    probes,
)
def test_removing_many_at_once_agrees_with_the_oracle(
    subscriptions: dict[str, list[str]], data: st.DataObject, probe_topics: list[list[str]]
) -> None:
    index = index_of(subscriptions)
    oracle = {sid: tuple(filters) for sid, filters in subscriptions.items()}
    gone = data.draw(st.lists(st.sampled_from([*oracle, "absent"]), max_size=len(oracle) + 1))
    assert index.remove_many(gone) == len(set(gone) & oracle.keys())
    for sid in gone:
        oracle.pop(sid, None)
    assert len(index) == len(oracle)
    for topics in probe_topics:
        assert index.match(topics) == oracle_match(oracle, topics)
    if not oracle:
        assert not index._patterns and not index._exact
