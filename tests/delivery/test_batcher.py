"""Group commit: concurrent submissions share transactions; each waits for its own."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import pytest

from tidings.delivery.batcher import EnqueueBatcher
from tidings.store.base import NewMessage


def message(i: int) -> NewMessage:
    return NewMessage("s", f"p{i}", f"p{i}", ("x",), {}, 0.0)


async def test_concurrent_submissions_are_committed_together() -> None:
    commits: list[int] = []

    def enqueue(rows: Sequence[NewMessage]) -> int:
        commits.append(len(rows))
        return len(rows)

    batcher = EnqueueBatcher(enqueue)
    await asyncio.gather(*(batcher.submit([message(i)]) for i in range(100)))
    assert sum(commits) == 100 and len(commits) < 100


async def test_a_store_failure_reaches_every_waiter_of_that_batch() -> None:
    def enqueue(rows: Sequence[NewMessage]) -> int:
        raise OSError("disk full")

    batcher = EnqueueBatcher(enqueue)
    results = await asyncio.gather(
        *(batcher.submit([message(i)]) for i in range(3)), return_exceptions=True
    )
    assert all(isinstance(r, OSError) for r in results)


async def test_nothing_to_enqueue_returns_at_once() -> None:
    batcher = EnqueueBatcher(lambda rows: pytest.fail("no commit expected"))
    await batcher.submit([])
