"""What only PostgreSQL promises: several stores (brokers) share one set of queues."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator

import psycopg
import pytest
from tests.conftest import require_service

from tidings.model import Subscriber, Subscription
from tidings.store import open_store
from tidings.store.base import NewMessage, Store, encode_body

from .conftest import PG


@pytest.fixture
def two_stores() -> Iterator[tuple[Store, Store]]:
    require_service("postgres")
    url = f"{PG}?schema=t_{uuid.uuid4().hex[:12]}"
    first, second = open_store(url), open_store(url)
    yield first, second
    first.close(), second.close()
    with psycopg.connect(PG, autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA "{url.rsplit("=", 1)[1]}" CASCADE')


def test_two_stores_leasing_one_queue_at_once_never_hand_out_a_message_twice(
    two_stores: tuple[Store, Store],
) -> None:
    first = two_stores[0]
    first.add_subscriber(Subscriber("s1", "h", 1.0))
    first.enqueue(
        [NewMessage("s1", f"p{i}", f"p{i}", ("x",), encode_body(i), 1.0) for i in range(400)]
    )
    taken: list[list[int]] = [[], []]

    def drain(store: Store, into: list[int]) -> None:
        while batch := store.lease("s1", 5, 30.0, 5, 2.0):
            into.extend(int(m.body) for m in batch)  # type: ignore[arg-type]

    workers = [
        threading.Thread(target=drain, args=(s, t)) for s, t in zip(two_stores, taken, strict=True)
    ]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    assert sorted(taken[0] + taken[1]) == list(range(400))


def test_a_subscription_made_through_one_store_bumps_the_version_the_other_sees(
    two_stores: tuple[Store, Store],
) -> None:
    first, second = two_stores
    before = second.subscriptions_version()
    first.add_subscriber(Subscriber("s1", "h", 1.0))
    first.add_subscription(Subscription("x1", "s1", "topic", topics=("a",)))
    assert second.subscriptions_version() == before + 1
    assert [s.id for s in second.all_subscriptions()] == ["x1"]
