"""The push stream's flow control, on a real broker over SQLite: at most `prefetch` in
flight, acknowledgements settled beside the reader, the unacknowledged released at close."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from tests.broker.test_operations import settings_for, started

from tidings.broker import Broker, PublicationInput
from tidings.delivery.stream import PushStream


@pytest.fixture
async def broker(tmp_path: Path) -> AsyncIterator[Broker]:
    b = await started(settings_for(tmp_path))
    yield b
    await b.close()
    b.store.sync.close()


async def subscribed(broker: Broker, publications: int) -> str:
    me, _ = await broker.register()
    await broker.subscribe(me.id, "topic", topics=("t",))
    await broker.publish_batch([PublicationInput(i, ("t",)) for i in range(publications)])
    return me.id


async def test_no_more_than_prefetch_messages_are_handed_out_until_some_are_settled(
    broker: Broker,
) -> None:
    sid = await subscribed(broker, 10)
    push = PushStream(broker.queues, sid, prefetch=4)
    first = await push.next_batch()
    assert len(first) == 4 and push.free() == 0
    waiting = asyncio.create_task(push.next_batch())
    await asyncio.sleep(0.05)
    assert not waiting.done()  # no room: it does not lease
    await push.settle("ack", [m.receipt for m in first[:2]])
    second = await asyncio.wait_for(waiting, 10)
    assert len(second) == 2 and len(push.inflight) == 4
    assert {m.receipt for m in first[2:] + second} == set(push.inflight)
    await push.close()


async def test_no_more_than_its_bytes_are_handed_out_until_some_are_settled(
    broker: Broker,
) -> None:
    me, _ = await broker.register()
    await broker.subscribe(me.id, "topic", topics=("t",))
    big = "x" * 100_000  # ten of them pass the stream's 350,000 bytes in flight
    await broker.publish_batch([PublicationInput(big, ("t",)) for _ in range(10)])
    push = PushStream.sized_by(broker.queues, me.id, 100, None, inflight_bytes=350_000)
    held = []
    while push.free():
        held += await asyncio.wait_for(push.next_batch(), 10)
    assert len(held) == 4  # the fourth passes the bytes: no more, whatever the count
    waiting = asyncio.create_task(push.next_batch())
    await asyncio.sleep(0.05)
    assert not waiting.done()
    await push.settle("ack", [held[0].receipt])
    assert len(await asyncio.wait_for(waiting, 10)) == 1
    await push.close()


async def test_closing_commits_the_acks_read_then_releases_the_rest_at_once(
    broker: Broker,
) -> None:
    sid = await subscribed(broker, 3)
    push = PushStream(broker.queues, sid, prefetch=10)
    acked, *released = await push.next_batch()
    await push.settle("ack", [acked.receipt])  # returns before its commit is done
    await push.close()
    again = await broker.pull(sid, 10, wait_s=0)  # ready now, not after the visibility
    assert [m.publication_id for m in again] == [m.publication_id for m in released]
    assert all(m.attempt == 2 for m in again)
    assert (await broker.depth(sid)).leased == 2


async def test_a_nack_hands_messages_back_and_frees_their_room(broker: Broker) -> None:
    sid = await subscribed(broker, 2)
    push = PushStream(broker.queues, sid, prefetch=2)
    batch = await push.next_batch()
    await push.settle("nack", [m.receipt for m in batch])
    again = await asyncio.wait_for(push.next_batch(), 10)
    assert sorted(m.publication_id for m in again) == sorted(m.publication_id for m in batch)
    await push.close()


async def test_an_ack_of_more_receipts_than_a_stream_may_commit_at_once_goes_alone(
    broker: Broker,
) -> None:
    sid = await subscribed(broker, 3)
    push = PushStream(broker.queues, sid, prefetch=3)
    batch = await push.next_batch()
    unknown = [f"9.{i}.ab" for i in range(1_500)]  # past the 1,000 a stream commits at once
    await push.settle("ack", unknown)  # nothing else committing: started at once
    waiting = asyncio.create_task(push.settle("ack", [m.receipt for m in batch]))
    await asyncio.wait_for(waiting, 10)  # started once the large one was committed
    await push.close()
    assert (await broker.queues.ack(sid, [m.receipt for m in batch])).acked == []  # acked once
