"""Subscribers' queues over the committer and a real SQLite store: pull, ack, nack, release,
reject, each told to the observer."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from tests.conftest import until

from tidings.config import QueueSettings
from tidings.delivery.committer import Committer
from tidings.delivery.queues import SubscriberQueues
from tidings.delivery.signals import Signals
from tidings.model import Subscriber
from tidings.store import open_store
from tidings.store.base import Enqueue, Message, NewMessage, QueueOp, Store


@dataclass
class Rig:
    q: SubscriberQueues
    observer: Observer
    store: Store  # to enqueue into as a publish would


class Observer:
    def __init__(self) -> None:
        self.told: list[tuple[str, object]] = []

    def leased(self, messages: list[Message], now: float) -> None:
        self.told.append(("leased", [m.publication_id for m in messages]))

    def acked(self, subscriber_id: str, receipts: list[str], now: float) -> None:
        self.told.append(("acked", len(receipts)))

    def nacked(self, subscriber_id: str, receipts: list[str]) -> None:
        self.told.append(("nacked", len(receipts)))

    def rejected(self, subscriber_id: str, message: Message, reason: str) -> None:
        self.told.append(("rejected", reason))


def new(publication_id: str) -> NewMessage:
    """A delivery to subscriber s, as a publish enqueues it."""
    return NewMessage("s", publication_id, publication_id, ("sub",), b"{}", time.time())


async def waiting_pull(q: SubscriberQueues) -> asyncio.Task[list[Message]]:
    """A quick pull (a stream's) of s's queue once p1 is leased, waiting for more."""
    await q.pull("s", 10, wait_s=0)
    waiting = asyncio.create_task(q.pull("s", 10, wait_s=2.0, quick=True))
    await asyncio.sleep(0.1)
    return waiting


@pytest.fixture
async def rig(tmp_path: Path) -> AsyncIterator[Rig]:
    store = open_store(f"sqlite:///{tmp_path / 'q.db'}")
    store.add_subscriber(Subscriber("s", "hash", time.time()))
    store.enqueue([NewMessage("s", "p1", "p1", ("sub",), b"{}", time.time())])
    observer = Observer()
    settings = QueueSettings(visibility_timeout_s=30.0, max_wait_s=2.0)
    committer = Committer(store.apply, apply_now=store.apply_now)  # as the broker's
    q = SubscriberQueues(
        committer, settings, Signals(), observer, time.time, may_lease=store.may_lease
    )
    yield Rig(q, observer, store)
    store.close()


async def test_a_pull_leases_and_tells_the_observer(
    rig: Rig,
) -> None:
    q, observer = rig.q, rig.observer
    assert [m.publication_id for m in await q.pull("s", 10, wait_s=0)] == ["p1"]
    assert observer.told == [("leased", ["p1"])]


async def test_an_empty_pull_waits_until_told_of_a_new_message(
    rig: Rig,
) -> None:
    q = rig.q
    await q.pull("s", 10, wait_s=0)
    waiting = asyncio.create_task(q.pull("s", 10, wait_s=2.0))
    await asyncio.sleep(0.1)
    assert not waiting.done()
    # as a publish would: enqueue (here, without the committer), then the wake-up
    rig.store.enqueue([NewMessage("s", "p2", "p2", ("sub",), b"{}", time.time())])
    q.signals.notify(["s"])
    assert [m.publication_id for m in await asyncio.wait_for(waiting, 0.9)] == ["p2"]


async def test_released_messages_come_back_at_once_and_count_an_attempt(
    rig: Rig,
) -> None:
    q, observer = rig.q, rig.observer
    leased = await q.pull("s", 10, wait_s=0)
    result = await q.release("s", [m.receipt for m in leased])
    assert len(result.acked) == 1
    again = await q.pull("s", 10, wait_s=0)
    assert [(m.publication_id, m.attempt) for m in again] == [("p1", 2)]
    assert ("nacked", 1) in observer.told


async def test_a_nack_with_a_delay_keeps_the_message_away_until_then(
    rig: Rig,
) -> None:
    q = rig.q
    leased = await q.pull("s", 10, wait_s=0)
    await q.nack("s", [m.receipt for m in leased], delay_s=60)
    assert await q.pull("s", 10, wait_s=0) == []


async def test_an_ack_settles_and_a_reject_dead_letters_alone(
    rig: Rig,
) -> None:
    q, observer = rig.q, rig.observer
    leased = await q.pull("s", 10, wait_s=0)
    await q.reject("s", leased[0], "does not encode")
    assert ("rejected", "does not encode") in observer.told
    result = await q.ack("s", [leased[0].receipt])
    assert result.acked == [] and result.unknown == [leased[0].receipt]


async def test_a_waiting_long_poll_holds_no_turn_so_its_own_ack_goes_through(
    tmp_path: Path,
) -> None:
    store = open_store(f"sqlite:///{tmp_path / 'q.db'}")
    store.add_subscriber(Subscriber("s", "hash", time.time()))
    store.enqueue([NewMessage("s", "p1", "p1", ("sub",), b"{}", time.time())])
    settings = QueueSettings(max_wait_s=5.0, max_concurrent_ops_per_subscriber=1)
    q = SubscriberQueues(Committer(store.apply), settings, Signals(), Observer(), time.time)
    try:
        leased = await q.pull("s", 10, wait_s=0)
        polling = asyncio.create_task(q.pull("s", 10, wait_s=5.0))
        await asyncio.sleep(0.1)  # the long poll found nothing and waits
        assert (await q.ack("s", [leased[0].receipt])).acked == [leased[0].receipt]
        assert not polling.done() and q.admission.active() == 0
        polling.cancel()
    finally:
        store.close()


async def test_a_quick_pull_on_an_empty_queue_waits_without_a_lease_and_is_woken(
    rig: Rig,
) -> None:
    q = rig.q
    await q.pull("s", 10, wait_s=0)  # p1 leased: nothing else is ready
    commits = q.committer.commits
    waiting = asyncio.create_task(q.pull("s", 10, wait_s=2.0, quick=True))
    await asyncio.sleep(0.1)
    assert not waiting.done() and q.committer.commits == commits  # no lease went to the store
    await q.committer.submit(Enqueue([NewMessage("s", "p2", "p2", ("sub",), b"{}", time.time())]))
    q.signals.notify(["s"])  # as a publish does once its enqueue committed
    assert [m.publication_id for m in await asyncio.wait_for(waiting, 0.9)] == ["p2"]


async def test_an_empty_pull_is_answered_by_the_commit_that_enqueues_for_it(
    rig: Rig,
) -> None:
    q, observer = rig.q, rig.observer
    waiting = await waiting_pull(q)
    commits = q.committer.commits
    await q.committer.submit(Enqueue([new("p2")]))
    # nobody signals it: the enqueue's commit leased for it
    assert [m.publication_id for m in await asyncio.wait_for(waiting, 0.5)] == ["p2"]
    assert q.committer.commits == commits + 1 and observer.told[-1] == ("leased", ["p2"])


async def test_a_failed_commit_that_carried_a_parked_lease_leaves_the_pull_waiting(
    rig: Rig,
) -> None:
    """The parked lease rode on another's commit: that commit's failure is not the pull's."""
    store = rig.store
    failing = {"once": True}

    def apply(ops: Sequence[QueueOp]) -> list[Any]:
        if any(isinstance(op, Enqueue) for op in ops) and failing.pop("once", False):
            raise OSError("disk full")
        return store.apply(ops)

    committer = Committer(apply)
    q = SubscriberQueues(committer, rig.q.settings, Signals(), Observer(), time.time)
    waiting = await waiting_pull(q)
    with pytest.raises(OSError):
        await committer.submit(Enqueue([new("p2")]))
    await asyncio.sleep(0.1)
    assert not waiting.done()  # still waiting, not failed
    await committer.submit(Enqueue([new("p3")]))
    assert [m.publication_id for m in await asyncio.wait_for(waiting, 1.5)] == ["p3"]


async def test_a_pull_that_stopped_waiting_leaves_what_is_enqueued_next_ready(
    rig: Rig,
) -> None:
    waiting = await waiting_pull(rig.q)
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting
    await rig.q.committer.submit(Enqueue([new("p2")]))
    assert rig.store.depth("s", time.time()).ready == 1


async def test_a_pull_cancelled_once_its_parked_lease_was_answered_hands_it_back(
    rig: Rig,
) -> None:
    """A stream closing as a publication arrives: the lease its commit made goes back."""
    waiting = await waiting_pull(rig.q)
    await rig.q.committer.submit(Enqueue([new("p2")]))
    waiting.cancel()  # answered, not yet resumed
    with pytest.raises(asyncio.CancelledError):
        await waiting
    await until(lambda: rig.store.depth("s", time.time()).ready == 1, timeout_s=2.0)


async def test_a_quick_pull_finds_what_another_process_wrote_within_a_second(
    rig: Rig, tmp_path: Path
) -> None:
    q = rig.q
    await q.pull("s", 10, wait_s=0)
    writer = open_store(f"sqlite:///{tmp_path / 'q.db'}", writer=True)  # rows beside the log
    writer.enqueue([NewMessage("s", "p2", "p2", ("sub",), b"{}", time.time())])
    writer.close()
    started = time.monotonic()
    got = await q.pull("s", 10, wait_s=2.0, quick=True)  # nobody signals it
    assert [m.publication_id for m in got] == ["p2"] and time.monotonic() - started < 1.9
