"""A matcher operator's own machinery, apart from the protocol (which the deployment tests
exercise): where its bulk work runs."""

from __future__ import annotations

import asyncio
import os
import threading

from tidings.elastic.matcher import MatcherOperator


async def test_a_matchers_background_work_runs_in_a_thread_of_the_lowest_priority() -> None:
    matcher = MatcherOperator("m", None, "tcp://127.0.0.1:*")  # type: ignore[arg-type]
    seen: list[tuple[int, int]] = []

    def work() -> None:
        me = threading.get_native_id()
        seen.append((me, os.getpriority(os.PRIO_PROCESS, me)))

    await matcher._in_background(work)
    await matcher._in_background(work)
    (thread, nice), again = seen
    assert nice == 19 and again == (thread, 19)  # one thread, kept for the next scale
    assert thread != threading.get_native_id()
    await asyncio.to_thread(work)
    assert seen[-1][1] == os.getpriority(os.PRIO_PROCESS, 0)  # the others: as they were
    assert matcher._background is not None
    matcher._background.shutdown()
