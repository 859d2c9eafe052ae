"""One run's wait for stragglers (`trial._drain`)."""

from __future__ import annotations

import asyncio
import time

from tidings.sim.perf import trial
from tidings.sim.perf.stats import Recorder


def arrive_in_hops(recorder: Recorder, hops: int) -> None:
    """A receipt that takes a few turns of the loop, as a socket read handed to a callback does."""
    loop = asyncio.get_running_loop()
    if hops == 0:
        recorder.on_received(0, 0, 0, time.time_ns(), time.time_ns())
        return
    loop.call_soon(arrive_in_hops, recorder, hops - 1)


def off_the_cpu(recorder: Recorder) -> None:
    """The process descheduled past the stall time, with a receipt already on its way."""
    time.sleep(trial.STALL_S + 0.5)
    arrive_in_hops(recorder, 3)


def test_a_receipt_read_after_the_process_was_off_the_cpu_is_waited_for() -> None:
    async def run() -> int:
        recorder = Recorder()
        recorder.on_sent(time.time_ns(), 1, 1, 1)
        asyncio.get_running_loop().call_later(0.1, off_the_cpu, recorder)
        await trial._drain(recorder, 30.0, asyncio.Event())
        return recorder.received  # as the drain ends, not once the loop closes

    assert asyncio.run(run()) == 1


def test_a_drain_ends_at_a_stall_when_nothing_comes() -> None:
    async def run() -> float:
        recorder = Recorder()
        recorder.on_sent(time.time_ns(), 1, 1, 1)
        started = time.monotonic()
        await trial._drain(recorder, 60.0, asyncio.Event())
        return time.monotonic() - started

    assert asyncio.run(run()) < 60.0  # the stall ended it, not the deadline
