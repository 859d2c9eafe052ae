"""Two brokers on one PostgreSQL store whose queues are cut into partitions
(`layout=log&partitions=N`), each owning one: what is published through one reaches the
other's subscribers' streams, and a queue's bound holds wherever its deliveries come from."""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from tests.broker.test_operations import settings_for, started
from tests.store.conftest import PG

from tidings.broker import Broker
from tidings.broker.publishing import PublicationInput
from tidings.config import Limits
from tidings.store.inbox import partition_of

WAIT_S = 15.0


@pytest.fixture
async def pair(tmp_path: Path, schema: str) -> AsyncIterator[tuple[Broker, Broker]]:
    """Broker `a` owning partition 0 of 2, `b` partition 1; a queue's bound is 2 messages,
    new deliveries refused past it."""
    url = f"{PG}?schema={schema}&layout=log&partitions=2"
    limits = Limits(max_queue_messages=2, queue_overflow="refuse-new")
    brokers = []
    for name, own in (("a", 0), ("b", 1)):
        settings = settings_for(tmp_path / name, limits=limits)
        brokers.append(await started(dataclasses.replace(settings, store_url=f"{url}&own={own}")))
    yield brokers[0], brokers[1]
    for broker in brokers:
        await broker.close()
        broker.store.sync.close()


async def subscriber_of(a: Broker, b: Broker) -> str:
    """A subscriber of topic `t` whose queue `a` owns, its subscription known to `b`."""
    while True:
        me, _ = await a.register()
        if partition_of(me.id, 2) == 0:
            break
    await a.subscribe(me.id, "topic", topics=("t",))
    await b.following.reload()
    return me.id


async def test_a_publication_through_one_broker_reaches_a_stream_waiting_on_the_other(
    pair: tuple[Broker, Broker],
) -> None:
    a, b = pair
    sid = await subscriber_of(a, b)
    waiting = asyncio.create_task(a.pull(sid, 10, wait_s=WAIT_S))
    await asyncio.sleep(0.2)  # the pull waits for a message
    started_at = time.monotonic()
    await b.publish(PublicationInput("hello", ("t",)))
    messages = await waiting
    assert [m.body["data"] for m in messages] == ["hello"]
    assert time.monotonic() - started_at < WAIT_S / 2  # woken, not at the end of its wait


async def test_a_queues_bound_holds_for_deliveries_published_through_another_broker(
    pair: tuple[Broker, Broker],
) -> None:
    a, b = pair
    sid = await subscriber_of(a, b)
    for n in range(3):
        await b.publish(PublicationInput(n, ("t",)))
    deadline = time.monotonic() + WAIT_S
    while (await a.depth(sid)).ready < 3:  # its owner took them in
        assert time.monotonic() < deadline
        await asyncio.sleep(0.05)
    await a.quotas.enforce(time.time())  # the owner measures a queue it was told received
    assert not a.quotas.accepts(sid)
    while (await b.depth(sid)).ready < 3:  # the depth its owner told
        assert time.monotonic() < deadline
        await asyncio.sleep(0.05)
    await b.quotas.enforce(time.time())  # and the other broker, from that
    assert not b.quotas.accepts(sid)
    await b.publish(PublicationInput("refused", ("t",)))
    await asyncio.sleep(0.6)  # (a tick of the owner's: nothing more arrives)
    assert (await a.depth(sid)).ready == 3
