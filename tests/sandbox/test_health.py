"""The failure rule: suspended after N consecutive failures, a success resets the count."""

from __future__ import annotations

from tidings.sandbox.health import FailureRule


def test_a_subscription_is_suspended_at_the_limit_of_consecutive_failures() -> None:
    rule = FailureRule(3)
    assert rule.count("s", "boom") is None
    assert rule.count("s", "boom") is None
    assert rule.count("s", "bang") == "3 consecutive failures; last: bang"


def test_a_success_starts_the_count_again() -> None:
    rule = FailureRule(2)
    rule.count("s", "boom")
    rule.count("s", None)
    assert rule.count("s", "boom") is None


def test_a_tripped_rule_counts_again_from_zero() -> None:
    rule = FailureRule(2)
    rule.count("s", "boom")
    assert rule.count("s", "boom") is not None
    assert rule.count("s", "boom") is None


def test_forgetting_a_subscription_starts_its_count_again() -> None:
    rule = FailureRule(2)
    rule.count("s", "boom")
    rule.forget("s")
    assert rule.count("s", "boom") is None


def test_subscriptions_are_counted_apart() -> None:
    rule = FailureRule(2)
    rule.count("a", "boom")
    assert rule.count("b", "boom") is None
    assert rule.count("a", "boom") is not None
