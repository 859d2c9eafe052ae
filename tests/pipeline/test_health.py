from __future__ import annotations

from tidings.model import FunctionSpec, Subscriber, Subscription
from tidings.pipeline.health import FunctionCall, FunctionHealth
from tidings.store import open_store
from tidings.store.base import Store

CODE = "def match(publication):\n    return True\n"


def store_with(*ids: str) -> Store:
    store = open_store("memory://")
    store.add_subscriber(Subscriber("alice", "hash", 0.0))
    for sid in ids:
        spec = FunctionSpec("text", "code", CODE)
        store.add_subscription(Subscription(sid, "alice", "function", function=spec))
    return store


def calls(sid: str, outcomes: str, start: int = 0) -> list[FunctionCall]:
    """One call per character, in publication order: `x` failed, `.` answered."""
    return [
        FunctionCall(float(start + i), f"p{start + i:03d}", sid, "boom" if o == "x" else None)
        for i, o in enumerate(outcomes)
    ]


def status(store: Store, sid: str) -> tuple[str, str | None]:
    sub = store.get_subscription(sid)
    assert sub is not None
    return sub.status, sub.status_reason


def test_consecutive_failures_suspend_a_function_as_the_broker_does() -> None:
    store = store_with("f1")
    health = FunctionHealth(store, failures_to_suspend=3)
    assert health.record(reversed(calls("f1", "xxx"))) == ["f1"]  # sorted by publication
    assert status(store, "f1") == ("suspended", "3 consecutive failures; last: boom")


def test_an_answer_resets_the_count_and_counts_carry_across_batches() -> None:
    store = store_with("f1", "f2")
    health = FunctionHealth(store, failures_to_suspend=3)
    assert health.record(calls("f1", "xx.xx") + calls("f2", "x")) == []
    assert health.record(calls("f1", ".", start=10) + calls("f2", "xx", start=10)) == ["f2"]
    assert status(store, "f1") == ("active", None)
    assert status(store, "f2")[0] == "suspended"


def test_a_suspended_function_is_suspended_once_per_batch() -> None:
    store = store_with("f1")
    health = FunctionHealth(store, failures_to_suspend=2)
    version = store.subscriptions_version()
    assert health.record(calls("f1", "xxxxx")) == ["f1"]
    assert store.subscriptions_version() == version + 1
