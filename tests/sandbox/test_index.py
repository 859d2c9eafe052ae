"""The function-subscription index: active ones by type, suspended ones apart."""

from __future__ import annotations

from typing import Literal

from tidings.model import FunctionSpec, Publication, Subscription
from tidings.sandbox.index import FunctionIndex


def function_sub(
    sid: str, function_type: str, status: Literal["active", "suspended"] = "active"
) -> Subscription:
    spec = FunctionSpec(function_type, "builtin", "positive")
    return Subscription(sid, "owner", "function", (), (), spec, 0.0, status)


def pub(*types: str) -> Publication:
    return Publication("p", 0.0, None, (), {}, types)


def test_a_publication_reaches_the_active_subscriptions_of_the_types_it_names() -> None:
    index = FunctionIndex()
    index.add(function_sub("a", "sentiment"))
    index.add(function_sub("b", "ocr"))
    index.add(function_sub("c", "other"))
    assert [s.id for s in index.candidates(pub("ocr", "sentiment"))] == ["b", "a"]


def test_a_type_named_twice_calls_each_subscription_once() -> None:
    index = FunctionIndex()
    index.add(function_sub("a", "sentiment"))
    assert [s.id for s in index.candidates(pub("sentiment", "sentiment"))] == ["a"]


def test_a_suspended_subscription_is_listed_apart_and_reached_by_nothing() -> None:
    index = FunctionIndex()
    index.add(function_sub("a", "sentiment", status="suspended"))
    assert index.candidates(pub("sentiment")) == []
    assert [s.id for s in index.suspended()] == ["a"]


def test_indexing_again_moves_a_subscription_between_active_and_suspended() -> None:
    index = FunctionIndex()
    index.add(function_sub("a", "sentiment", status="suspended"))
    index.add(function_sub("a", "sentiment"))
    assert index.suspended() == []
    assert len(index) == 1
    assert [s.id for s in index.candidates(pub("sentiment"))] == ["a"]


def test_a_stopped_subscription_is_reached_by_nothing_until_indexed_again() -> None:
    index = FunctionIndex()
    index.add(function_sub("a", "sentiment"))
    index.stop("a")
    assert index.candidates(pub("sentiment")) == []


def test_a_removed_subscription_is_gone_whatever_its_status() -> None:
    index = FunctionIndex()
    index.add(function_sub("a", "sentiment"))
    index.add(function_sub("b", "sentiment", status="suspended"))
    index.remove("a")
    index.remove("b")
    assert len(index) == 0
