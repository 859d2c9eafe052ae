"""The broker's subscription index: kinds, the matcher and the function index together."""

from __future__ import annotations

import dataclasses

from tidings.broker.index import SubscriptionIndex
from tidings.model import FunctionSpec, Op, Predicate, Publication, Subscription
from tidings.store.base import subscription_bytes

TOPIC = Subscription("t", "alice", "topic", ("news/#",))
CONTENT = Subscription("c", "bob", "content", (), (Predicate("x", Op.GT, 1),))
FUNCTION = Subscription("f", "carol", "function", (), (), FunctionSpec("sentiment", "builtin", "x"))


def pub(topics: tuple[str, ...] = (), x: int = 0) -> Publication:
    return Publication("p", 0.0, None, topics, {"x": x}, ("sentiment",))


async def test_a_load_replaces_everything_and_counts_each_kind() -> None:
    index = SubscriptionIndex()
    index.add(Subscription("old", "dave", "topic", ("old",)))
    await index.load([TOPIC, CONTENT, FUNCTION])
    assert index.counts() == {"topic": 1, "content": 1, "function": 1}
    assert index.kind_of("old") is None


async def test_a_batch_is_matched_by_topic_and_by_content() -> None:
    index = SubscriptionIndex()
    await index.load([TOPIC, CONTENT, FUNCTION])
    answers = index.match_batch([pub(("news/today",), x=0), pub((), x=2)])
    assert answers == [{"alice": ["t"]}, {"bob": ["c"]}]
    assert [s.id for s in index.functions.candidates(pub())] == ["f"]


def test_removing_answers_the_kind_it_had_and_stops_matching() -> None:
    index = SubscriptionIndex()
    index.add(TOPIC)
    index.add(FUNCTION)
    assert index.remove("t") == "topic"
    assert index.remove("f") == "function"
    assert index.remove("t") is None
    assert index.match_batch([pub(("news/today",))]) == [{}]
    assert index.functions.candidates(pub()) == []


def test_per_topic_fanouts_reach_topic_subscriptions_only_with_their_own_keys() -> None:
    index = SubscriptionIndex()
    index.add(TOPIC)
    index.add(Subscription("t2", "erin", "topic", ("sport",)))
    index.add(Subscription("c2", "bob", "content", (), (Predicate("x", Op.GT, -1),)))
    fanouts = index.per_topic(pub(("news/today", "sport", "weather")))
    assert [(f.dedup_key, dict(f.owners)) for f in fanouts] == [
        ("p#news/today", {"alice": ["t"]}),
        ("p#sport", {"erin": ["t2"]}),
    ]
    assert b'"matched_topic":"sport"' in fanouts[1].body


def needles(sid: str, *values: str) -> Subscription:
    return Subscription(
        sid, "erin", "content", (), tuple(Predicate("b", Op.CONTAINS, v) for v in values)
    )


async def test_the_contains_characters_held_follow_adds_removes_and_loads() -> None:
    index = SubscriptionIndex()
    index.add(needles("n1", "abc", "de"))
    index.add(needles("n2", "xyz"))
    index.add(CONTENT)  # no contains: nothing held
    assert index.needle_chars == 8
    index.add(needles("n1", "a"))  # indexed again: replaced, not added
    assert index.needle_chars == 4
    index.remove("n2")
    assert index.needle_chars == 1
    await index.load([needles("n3", "four"), TOPIC])
    assert index.needle_chars == 4


async def test_the_index_holds_its_subscriptions_stored_bytes_in_all() -> None:
    index = SubscriptionIndex()
    index.add(TOPIC)
    index.add(FUNCTION)
    assert index.subscription_bytes == subscription_bytes(TOPIC) + subscription_bytes(FUNCTION)
    suspended = dataclasses.replace(FUNCTION, status="suspended", status_reason="x" * 100)
    index.add(suspended)  # indexed again: its new size replaces the old
    assert index.subscription_bytes == subscription_bytes(TOPIC) + subscription_bytes(suspended)
    index.remove("t")
    assert index.subscription_bytes == subscription_bytes(suspended)
    await index.load([TOPIC, CONTENT])
    assert index.subscription_bytes == subscription_bytes(TOPIC) + subscription_bytes(CONTENT)
