"""The async face over a store: each call answers as the store does, off the event loop."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tidings.model import Subscriber, Subscription
from tidings.store import open_store
from tidings.store.asyncstore import AsyncStore
from tidings.store.base import Endpoint, Store


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    s = open_store(f"sqlite:///{tmp_path / 'a.db'}")
    yield s
    s.close()


async def test_records_written_through_the_face_are_read_back_through_it(store: Store) -> None:
    face = AsyncStore(store)
    await face.add_subscriber(Subscriber("s", "hash", time.time()), ephemeral=False)
    await face.add_subscription(Subscription("t", "s", "topic", ("a",)))
    assert (await face.get_subscriber("s")) == store.get_subscriber("s")
    assert [sub.id for sub in await face.list_subscriptions("s")] == ["t"]
    assert await face.count_subscriptions("s") == 1
    version, subscriptions = await face.snapshot()
    assert version == await face.subscriptions_version() and len(subscriptions) == 1
    assert await face.set_endpoint("s", Endpoint("s", "http://127.0.0.1:9/", "secret"))
    assert [e.subscriber_id for e in await face.endpoints()] == ["s"]
    assert await face.remove_subscriber("s")
    assert await face.get_subscriber("s") is None


async def test_calls_run_off_the_event_loops_thread(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[threading.Thread] = []
    real = store.count_subscribers

    def counting() -> int:
        seen.append(threading.current_thread())
        return real()

    monkeypatch.setattr(store, "count_subscribers", counting)
    assert await AsyncStore(store).count_subscribers() == 0
    assert seen and seen[0] is not threading.main_thread()
