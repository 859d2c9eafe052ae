"""Group commit: concurrent operations share transactions; each caller gets its own answer."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import pytest

from tidings.delivery.committer import Committer


def recorder(batches: list[int]) -> Any:
    def run_batch(ops: Sequence[Any]) -> list[Any]:
        batches.append(len(ops))
        results: list[Any] = []
        for op in ops:
            try:
                results.append(op(None))
            except Exception as exc:
                results.append(exc)
        return results

    return run_batch


async def test_concurrent_operations_share_commits_and_keep_their_own_results() -> None:
    batches: list[int] = []
    committer = Committer(recorder(batches))
    results = await asyncio.gather(*(committer.submit(lambda _, i=i: i * 2) for i in range(100)))
    assert results == [i * 2 for i in range(100)]
    assert sum(batches) == 100 and len(batches) < 100


async def test_one_operations_failure_is_only_its_own() -> None:
    committer = Committer(recorder([]))

    def boom(_: Any) -> int:
        raise ValueError("bad")

    ok, bad = await asyncio.gather(
        committer.submit(lambda _: 1), committer.submit(boom), return_exceptions=True
    )
    assert ok == 1 and isinstance(bad, ValueError)


async def test_a_failed_commit_reaches_every_waiter() -> None:
    def run_batch(ops: Sequence[Any]) -> list[Any]:
        raise OSError("disk full")

    committer = Committer(run_batch)
    with pytest.raises(OSError):
        await asyncio.gather(*(committer.submit(lambda _: 1) for _ in range(3)))


async def test_a_large_backlog_is_split_into_bounded_batches() -> None:
    batches: list[int] = []
    committer = Committer(recorder(batches), max_ops=10)
    await asyncio.gather(*(committer.submit(lambda _: 0) for _ in range(35)))
    assert max(batches) <= 10 and sum(batches) == 35
