"""Brokers sharing one PostgreSQL follow each other's subscription changes through the
store's change log: work in proportion to the change, a full read only at start or when
the log no longer reaches back."""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from tests.conftest import PG

from tidings.broker import Broker
from tidings.config import SubscriptionSettings, load_settings
from tidings.model import FunctionSpec, Publication, Subscription
from tidings.store import open_store


async def started(tmp: Path, url: str) -> Broker:
    settings = load_settings({"data_dir": tmp, "store_url": url, "event_log": False}, env={})
    # no periodic refresh: each test says when (a refresh is what housekeeping runs)
    quiet = SubscriptionSettings(staleness_s=3600)
    broker = Broker(dataclasses.replace(settings, subscriptions=quiet), open_store(url))
    await broker.start()
    return broker


@pytest.fixture
async def pair(tmp_path: Path, schema: str) -> AsyncIterator[tuple[Broker, Broker]]:
    url = f"{PG}?schema={schema}"
    a, b = await started(tmp_path / "a", url), await started(tmp_path / "b", url)
    yield a, b
    for broker in (a, b):
        await broker.close()
        broker.store.sync.close()


def reloads(broker: Broker) -> float:
    return broker.metrics.value("subscription_reloads")


async def test_a_change_through_one_broker_is_applied_by_the_other_without_a_reload(
    pair: tuple[Broker, Broker],
) -> None:
    a, b = pair
    subscriber, _ = await a.register()
    sub = await a.subscribe(subscriber.id, "topic", topics=("news/#",))
    await b.refresh(shared=True)
    assert b.index.kind_of(sub.id) == "topic"
    assert b.index.match_batch([_pub("news/x")]) == [{subscriber.id: [sub.id]}]
    await a.unsubscribe(subscriber.id, sub.id)
    await b.refresh(shared=True)
    assert b.index.kind_of(sub.id) is None
    assert reloads(b) == 1  # its start alone
    assert b.metrics.value("subscription_changes_applied") == 2


async def test_a_suspension_elsewhere_takes_a_function_out_of_reach_here(
    pair: tuple[Broker, Broker],
) -> None:
    a, b = pair
    subscriber, _ = await a.register()
    spec = FunctionSpec("sentiment", "builtin", "positive")
    await a.store.add_subscription(_function(subscriber.id, spec))
    await b.refresh(shared=True)
    assert [s.id for s in b.index.functions.candidates(_pub("x", "sentiment"))] == ["f1"]
    await a.store.set_subscription_status("f1", "suspended", "5 consecutive failures")
    await b.refresh(shared=True)
    assert b.index.functions.candidates(_pub("x", "sentiment")) == []
    assert [s.id for s in b.index.functions.suspended()] == ["f1"]


async def test_a_broker_behind_the_pruned_log_reads_everything_anew(
    pair: tuple[Broker, Broker],
) -> None:
    a, b = pair
    subscriber, _ = await a.register()
    subs = [await a.subscribe(subscriber.id, "topic", topics=(f"t{n}",)) for n in range(4)]
    await a.store.prune_subscription_changes(keep=1)
    await b.refresh(shared=True)
    assert reloads(b) == 2
    assert all(b.index.kind_of(s.id) == "topic" for s in subs)


def _pub(topic: str, *function_types: str) -> Publication:
    return Publication("p", 0.0, None, (topic,), {}, function_types)


def _function(owner: str, spec: FunctionSpec) -> Subscription:
    return Subscription("f1", owner, "function", (), (), spec, 0.0)
