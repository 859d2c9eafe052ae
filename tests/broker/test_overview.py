"""The operator's view over a real SQLite store: subscriber pages with depths, gauges with or
without per-subscriber queues, readiness."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tidings.broker.index import SubscriptionIndex
from tidings.broker.overview import Overview
from tidings.errors import ErrorCode, TidingsError
from tidings.metrics import Metrics
from tidings.model import Subscriber, Subscription
from tidings.store import open_store
from tidings.store.asyncstore import AsyncStore
from tidings.store.base import NewMessage, Store


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    s = open_store(f"sqlite:///{tmp_path / 'o.db'}")
    for sid in ("a", "b"):
        s.add_subscriber(Subscriber(sid, "hash", time.time()))
    s.enqueue([NewMessage("b", "p", "p", ("t",), b"{}", time.time())])
    yield s
    s.close()


def overview(store: Store) -> Overview:
    index = SubscriptionIndex()
    index.add(Subscription("t", "b", "topic", ("x",)))
    return Overview(AsyncStore(store), index, Metrics(), time.time)


async def test_a_page_of_subscribers_comes_with_their_depths(store: Store) -> None:
    page = await overview(store).subscribers_page("", 10)
    assert [(r.id, d.ready) for r, d in page] == [("a", 0), ("b", 1)]


async def test_gauges_name_subscribers_only_when_asked(store: Store) -> None:
    view = overview(store)
    anonymous, admin = await view.gauges(), await view.gauges(per_subscriber=True)
    assert (anonymous.subscribers, anonymous.ready, anonymous.subscriptions) == (2, 1, {"topic": 1})
    assert anonymous.queues == []
    assert [q.subscriber_id for q in admin.queues] == ["b"]


async def test_a_store_that_does_not_answer_is_not_ready(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    def stuck() -> int:
        time.sleep(0.5)
        return 0

    monkeypatch.setattr(store, "subscriptions_version", stuck)
    with pytest.raises(TidingsError) as caught:
        await overview(store).check_store(timeout_s=0.05)
    assert caught.value.code == ErrorCode.UNAVAILABLE
