"""The subscriptions' change log, on every backend: what changed after a version, as it is
now; pruned to a number of versions, after which a reader is told to read everything anew."""

from __future__ import annotations

import time

from tidings.model import Subscriber, Subscription
from tidings.store.base import Store


def subscriber(store: Store, sid: str) -> None:
    store.add_subscriber(Subscriber(sid, "hash", time.time()))


def topic(sid: str, owner: str, *topics: str) -> Subscription:
    return Subscription(sid, owner, "topic", topics)


def test_changes_after_a_version_are_the_subscriptions_as_they_are_now(store: Store) -> None:
    subscriber(store, "a")
    store.add_subscription(topic("s1", "a", "x"))
    start = store.subscriptions_version()
    store.add_subscription(topic("s2", "a", "y"))
    store.set_subscription_status("s1", "suspended", "tired")
    store.remove_subscription("s2")
    changes = store.subscription_changes(start)
    assert changes is not None and changes.version == store.subscriptions_version()
    by_id = {c if isinstance(c, str) else c.id: c for c in changes.changed}
    assert set(by_id) == {"s1", "s2"}
    assert by_id["s2"] == "s2"  # gone
    s1 = by_id["s1"]
    assert not isinstance(s1, str) and s1.status == "suspended"


def test_nothing_changed_since_the_current_version(store: Store) -> None:
    subscriber(store, "a")
    store.add_subscription(topic("s1", "a", "x"))
    changes = store.subscription_changes(store.subscriptions_version())
    assert changes is not None and changes.changed == []


def test_a_removed_subscriber_logs_each_of_its_subscriptions_as_gone(store: Store) -> None:
    subscriber(store, "a")
    store.add_subscription(topic("s1", "a", "x"))
    store.add_subscription(topic("s2", "a", "y"))
    start = store.subscriptions_version()
    assert store.remove_subscriber("a")
    changes = store.subscription_changes(start)
    assert changes is not None and sorted(map(str, changes.changed)) == ["s1", "s2"]


def test_a_reader_behind_the_pruned_log_is_told_to_read_everything(store: Store) -> None:
    subscriber(store, "a")
    start = store.subscriptions_version()
    for n in range(5):
        store.add_subscription(topic(f"s{n}", "a", "x"))
    assert store.prune_subscription_changes(keep=2) == 3
    assert store.subscription_changes(start) is None
    recent = store.subscription_changes(store.subscriptions_version() - 2)
    assert recent is not None
    assert sorted(c if isinstance(c, str) else c.id for c in recent.changed) == ["s3", "s4"]
    assert store.prune_subscription_changes(keep=2) == 0  # nothing more to forget
