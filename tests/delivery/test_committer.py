"""Group commit: concurrent operations share transactions; each caller gets its own answer."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator, Sequence
from typing import Any

import pytest
from tests.conftest import until

from tidings.delivery.committer import INLINE_OPS, LEASE_WEIGHT, Committer
from tidings.store import open_store
from tidings.store.base import (
    Enqueue,
    Lease,
    Message,
    NewMessage,
    QueueDepth,
    QueueOp,
    Reject,
    Store,
)

LEASE = Lease("s", 10, 30.0, 5, 1.0)  # up to 10 of subscriber s's messages


def counted(n: int) -> Enqueue:
    """An operation whose answer (in `recorder`) is `n`."""
    return Enqueue([NewMessage("s", f"p{i}", f"p{i}", (), b"{}", 0.0) for i in range(n)])


def recorder(batches: list[int]) -> Any:
    """A stand-in for `Store.apply`: enqueues answer their size, a reject is refused."""

    def apply(ops: Sequence[QueueOp]) -> list[Any]:
        batches.append(len(ops))
        return [
            len(op.messages) if isinstance(op, Enqueue) else ValueError("refused") for op in ops
        ]

    return apply


async def test_concurrent_operations_share_commits_and_keep_their_own_results() -> None:
    batches: list[int] = []
    committer = Committer(recorder(batches))
    results = await asyncio.gather(*(committer.submit(counted(i)) for i in range(100)))
    assert results == list(range(100))
    assert sum(batches) == 100 and len(batches) == committer.commits < 100


async def test_one_operations_failure_is_only_its_own() -> None:
    committer = Committer(recorder([]))
    ok, bad = await asyncio.gather(
        committer.submit(counted(1)),
        committer.submit(Reject("s", "1.1.x", "why", 0.0)),
        return_exceptions=True,
    )
    assert ok == 1 and isinstance(bad, ValueError)


async def test_a_failed_commit_reaches_every_waiter() -> None:
    def apply(ops: Sequence[QueueOp]) -> list[Any]:
        raise OSError("disk full")

    committer = Committer(apply)
    with pytest.raises(OSError):
        await asyncio.gather(*(committer.submit(counted(1)) for _ in range(3)))


async def test_a_large_backlog_is_split_into_bounded_batches() -> None:
    batches: list[int] = []
    committer = Committer(recorder(batches), max_ops=10)
    await asyncio.gather(*(committer.submit(counted(0)) for _ in range(35)))
    assert max(batches) <= 10 and sum(batches) == 35


async def test_fresh_enqueues_waiting_together_become_one_operation() -> None:
    seen: list[list[QueueOp]] = []

    def apply(ops: Sequence[QueueOp]) -> list[Any]:
        seen.append(list(ops))
        return [len(op.messages) if isinstance(op, Enqueue) else True for op in ops]

    committer = Committer(apply)
    fresh = [Enqueue(counted(n).messages, fresh=True) for n in (1, 2, 3)]
    answers = await asyncio.gather(
        *(committer.submit(op) for op in fresh), committer.submit(Reject("s", "r", "x", 0.0))
    )
    assert answers == [1, 2, 3, True]
    [[merged, reject]] = seen
    assert isinstance(merged, Enqueue) and len(merged.messages) == 6
    assert isinstance(reject, Reject)


async def test_a_failed_merged_enqueue_fails_each_of_its_callers() -> None:
    def apply(ops: Sequence[QueueOp]) -> list[Any]:
        return [OSError("constraint") if isinstance(op, Enqueue) else True for op in ops]

    committer = Committer(apply)
    ops = [Enqueue(counted(1).messages, fresh=True) for _ in range(2)]
    answers = await asyncio.gather(*(committer.submit(op) for op in ops), return_exceptions=True)
    assert all(isinstance(a, OSError) for a in answers)


@pytest.mark.parametrize("at_once", [False, True], ids=["worker-thread", "loop-thread"])
async def test_a_lease_whose_caller_stopped_waiting_hands_its_messages_back(at_once: bool) -> None:
    store = open_store("memory://")
    committer = Committer(store.apply, apply_now=store.apply_now if at_once else lambda _: None)
    await committer.submit(Enqueue(counted(3).messages))
    waiting = asyncio.create_task(committer.submit(LEASE))
    await asyncio.sleep(0)  # submitted, and its commit under way
    waiting.cancel()
    for _ in range(200):  # the lease commits, then its hand-back in the next commit
        if committer.commits >= 3:
            break
        await asyncio.sleep(0.01)
    assert store.depth("s", 1.0) == QueueDepth(ready=3, leased=0, dead=0)
    store.close()


async def test_publishes_with_dedup_ids_waiting_together_become_one_operation() -> None:
    from tidings.store.base import DedupClaim, PublishOnce

    store = open_store("memory://")
    seen: list[list[QueueOp]] = []

    def apply(ops: Sequence[QueueOp]) -> list[Any]:
        seen.append(list(ops))
        return store.apply(ops)

    committer = Committer(apply)
    ops = [
        PublishOnce([DedupClaim(scope, d, p, 0.0, 0, 60.0)], 0.0)
        for scope, d, p in (("", "a", "p1"), ("", "b", "p2"), ("", "a", "p3"), ("k", "a", "p4"))
    ]
    answers = await asyncio.gather(*(committer.submit(op) for op in ops))
    first = DedupClaim("", "a", "p1", 0.0, 0, 60.0)
    # p3 is p1's duplicate; p4, another publisher's "a", is not
    assert answers == [{("", "a"): first}, {}, {("", "a"): first}, {}]
    [[merged]] = seen
    assert isinstance(merged, PublishOnce) and len(merged.claims) == 4


def threaded(calls: list[tuple[str, int]], name: str, answer_now: bool = True) -> Any:
    """A stand-in for `apply` (or `apply_now`): records its name, the thread and the batch."""

    def apply(ops: Sequence[QueueOp]) -> list[Any] | None:
        if name == "now" and not answer_now:
            calls.append(("now-refused", threading.get_ident()))
            return None
        calls.append((name, threading.get_ident()))
        return [len(op.messages) if isinstance(op, Enqueue) else True for op in ops]

    return apply


async def test_a_small_batch_runs_at_once_on_the_loops_thread() -> None:
    calls: list[tuple[str, int]] = []
    committer = Committer(threaded(calls, "apply"), apply_now=threaded(calls, "now"))
    assert await committer.submit(counted(2)) == 2
    assert calls == [("now", threading.get_ident())]


async def test_a_large_batch_goes_to_a_worker_thread() -> None:
    calls: list[tuple[str, int]] = []
    committer = Committer(threaded(calls, "apply"), apply_now=threaded(calls, "now"))
    half = INLINE_OPS // 2 + 1  # each small alone, too large together
    assert await asyncio.gather(*(committer.submit(counted(half)) for _ in range(2))) == [half] * 2
    [(name, thread)] = calls
    assert name == "apply" and thread != threading.get_ident()


async def test_a_batch_the_store_would_wait_for_runs_once_on_a_worker_thread() -> None:
    calls: list[tuple[str, int]] = []
    now = threaded(calls, "now", answer_now=False)
    committer = Committer(threaded(calls, "apply"), apply_now=now)
    assert await committer.submit(counted(3)) == 3
    assert [name for name, _ in calls] == ["now-refused", "apply"]
    assert calls[1][1] != threading.get_ident()


async def test_a_hundred_streams_leases_run_at_once_more_go_to_a_worker_thread() -> None:
    calls: list[tuple[str, int]] = []
    committer = Committer(threaded(calls, "apply"), apply_now=threaded(calls, "now"))

    def lease(i: int, most: int) -> Lease:
        return Lease(f"s{i}", most, 30.0, 5, 0.0)

    await asyncio.gather(*(committer.submit(lease(i, 1)) for i in range(500)))
    await asyncio.gather(*(committer.submit(lease(i, 500)) for i in range(100)))
    many = INLINE_OPS // LEASE_WEIGHT + 1  # each may take 500 messages
    await asyncio.gather(*(committer.submit(lease(i, 500)) for i in range(many)))
    assert [name for name, _ in calls] == ["now", "now", "apply"]


async def test_one_enqueue_of_many_deliveries_goes_to_a_worker_thread() -> None:
    calls: list[tuple[str, int]] = []
    committer = Committer(threaded(calls, "apply"), apply_now=threaded(calls, "now"))
    assert await committer.submit(counted(INLINE_OPS + 1)) == INLINE_OPS + 1
    [(name, thread)] = calls
    assert name == "apply" and thread != threading.get_ident()


def _park(committer: Committer) -> asyncio.Future[list[Message]]:
    parked = committer.park("s", lambda: LEASE)
    assert parked is not None
    return parked


@pytest.fixture
def parking() -> Iterator[tuple[Store, Committer]]:
    """An embedded store in memory and a committer over it, as the broker's."""
    store = open_store("memory://")
    yield store, Committer(store.apply, apply_now=store.apply_now)
    store.close()


async def test_a_parked_lease_runs_in_the_commit_that_enqueues_for_its_subscriber(
    parking: tuple[Store, Committer],
) -> None:
    _, committer = parking
    parked = _park(committer)
    await committer.submit(Enqueue([NewMessage("t", "p0", "p0", (), b"{}", 0.0)]))
    assert not parked.done()  # another subscriber's enqueue leaves it parked
    await committer.submit(Enqueue(counted(2).messages))
    assert [m.publication_id for m in await asyncio.wait_for(parked, 1.0)] == ["p0", "p1"]
    assert committer.commits == 2  # the lease went with the enqueue


async def test_an_unparked_lease_runs_in_no_commit(parking: tuple[Store, Committer]) -> None:
    store, committer = parking
    parked = _park(committer)
    assert committer.unpark("s", parked) and not committer.unpark("s", parked)
    await committer.submit(Enqueue(counted(1).messages))
    assert not parked.done() and store.depth("s", 1.0).ready == 1


async def test_a_parked_lease_whose_waiter_gave_up_leases_nothing(
    parking: tuple[Store, Committer],
) -> None:
    store, committer = parking
    _park(committer).cancel()
    await committer.submit(Enqueue(counted(1).messages))
    assert store.depth("s", 1.0).ready == 1


async def test_a_parked_lease_taken_by_a_commit_is_no_longer_parked(
    parking: tuple[Store, Committer],
) -> None:
    _, committer = parking
    parked = _park(committer)
    await committer.submit(Enqueue(counted(1).messages))
    assert not committer.unpark("s", parked)  # its waiter takes its answer instead
    assert [m.publication_id for m in parked.result()] == ["p0"]


async def test_no_more_leases_of_one_subscriber_are_parked_than_may_run_at_once(
    parking: tuple[Store, Committer],
) -> None:
    _, committer = parking
    assert committer.park("s", lambda: LEASE, most=1) is not None
    assert committer.park("s", lambda: LEASE, most=1) is None
    other = Lease("t", 10, 30.0, 5, 1.0)
    assert committer.park("t", lambda: other, most=1) is not None  # another subscriber's


async def test_no_lease_is_parked_while_a_commit_runs() -> None:
    """A busy committer's next commit comes soon, and a lease then takes what two commits
    enqueued: parking it would halve a busy stream's batches."""
    release = threading.Event()

    def apply(ops: Sequence[QueueOp]) -> list[Any]:
        release.wait(5.0)
        return [0 for _ in ops]

    committer = Committer(apply)
    running = asyncio.create_task(committer.submit(counted(1)))
    await asyncio.sleep(0.05)
    assert committer.park("s", lambda: LEASE) is None
    release.set()
    await running
    assert committer.park("s", lambda: LEASE) is not None


async def test_a_lease_answered_after_its_caller_was_cancelled_hands_its_messages_back(
    parking: tuple[Store, Committer],
) -> None:
    """Its commit ran and answered it, and the caller was cancelled before it resumed."""
    store, committer = parking
    await committer.submit(Enqueue(counted(3).messages))
    waiting = asyncio.create_task(committer.submit(LEASE))
    await asyncio.sleep(0)  # submitted: its commit comes next
    await asyncio.sleep(0)  # committed and answered; the caller not yet resumed
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting
    await until(lambda: store.depth("s", 1.0).ready == 3, timeout_s=2.0)
    assert store.depth("s", 1.0) == QueueDepth(ready=3, leased=0, dead=0)
