"""One run's wait for stragglers (`trial._drain`), and for a cluster to learn of its
subscriptions (`settle`)."""

from __future__ import annotations

import asyncio
import time

from tidings.sim.perf import trial
from tidings.sim.perf.stats import Recorder
from tidings.sim.perf.targets.base import Deliver
from tidings.sim.perf.traffic import Workload


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


class Clocked:
    """A target that delivers nothing and notes when it subscribed and first sent."""

    name, url, filters, closed = "clocked", "", True, 0

    def __init__(self) -> None:
        self.subscribed: float | None = None
        self.first_send: float | None = None

    async def open(self) -> None: ...

    async def prepare(self, consumer: int, topic: int, wanted: range) -> None: ...

    async def subscribe(self, consumer: int, topic: int, wanted: range, deliver: Deliver) -> None:
        self.subscribed = time.monotonic()

    async def publish_batch(
        self, producer: int, topic: int, bodies: list[bytes], xs: list[int]
    ) -> None:
        if self.first_send is None:
            self.first_send = time.monotonic()

    async def close(self) -> None: ...


def test_a_run_told_to_settle_sends_nothing_until_that_long_after_subscribing() -> None:
    target = Clocked()
    workload = Workload(consumers=1, messages=1, size=150, drain=0, settle=0.3)
    asyncio.run(trial.run(target, workload))
    assert target.subscribed is not None and target.first_send is not None
    assert target.first_send - target.subscribed >= 0.3
