"""The failure rule: suspended after N consecutive failures, a success resets the count."""

from __future__ import annotations

from tidings.sandbox.health import count_call


def test_consecutive_failures_trip_the_rule_with_the_last_error() -> None:
    failures: dict[str, int] = {}
    assert count_call(failures, "s", "boom", 3) is None
    assert count_call(failures, "s", "boom", 3) is None
    assert count_call(failures, "s", "bang", 3) == "3 consecutive failures; last: bang"
    assert "s" not in failures


def test_a_success_resets_the_count() -> None:
    failures: dict[str, int] = {}
    count_call(failures, "s", "boom", 2)
    count_call(failures, "s", None, 2)
    assert count_call(failures, "s", "boom", 2) is None
