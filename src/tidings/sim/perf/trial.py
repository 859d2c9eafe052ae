"""One run: subscribe the consumers, let the producers send for `duration`, wait for the
stragglers, and sum up. The same code drives every target."""

from __future__ import annotations

import asyncio
import dataclasses
import math
import random
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from tidings.sim.perf.stats import Recorder, Second, percentiles
from tidings.sim.perf.targets.base import Deliver, Target
from tidings.sim.perf.traffic import X_DOMAIN, BodyHeader, Workload, encode
from tidings.sim.perf.workers import Crew

STALL_S = 2.0  # while draining, give up once nothing has arrived for this long
POLL_S = 0.02


@dataclass(frozen=True, slots=True)
class Summary:
    target: str
    url: str
    sent: int
    received: int
    expected: int
    lost: int
    duplicates: int
    wasted: int
    closed: int
    send_errors: int
    first_error: str | None
    duration_s: float
    sent_per_s: float
    received_per_s: float
    latency_ms: tuple[float, ...]  # min, median, 75th, 95th, 99th
    max_ms: float
    stopped_early: bool
    drain_per_s: float | None  # offline runs: receipts/s from the consumers' return to the last


class Audience:
    """Who wants what: for each topic, the x windows of its consumers."""

    def __init__(self, workload: Workload) -> None:
        self.wanted = [workload.wanted(c) for c in range(workload.consumers)]
        self._everything = not workload.content
        by_topic: list[list[range]] = [[] for _ in range(workload.topics)]
        for consumer, window in enumerate(self.wanted):
            by_topic[workload.topic_of_consumer(consumer)].append(window)
        self._low = [np.array([w.start for w in ws], dtype=np.int64) for ws in by_topic]
        self._high = [np.array([w.stop for w in ws], dtype=np.int64) for ws in by_topic]

    def receivers(self, topic: int, xs: list[int]) -> int:
        """Deliveries wanted of messages with these xs on `topic`, in all."""
        if self._everything:
            return len(xs) * self.listeners(topic)  # no content workload: every listener
        x = np.asarray(xs, dtype=np.int64)[:, None]
        return int(np.count_nonzero((self._low[topic] <= x) & (x < self._high[topic])))

    def listeners(self, topic: int) -> int:
        return len(self._low[topic])


def deliverer(recorder: Recorder, audience: Audience) -> Deliver:
    """Receipts into the recorder; what a consumer did not want is counted as waste. The
    header is read by position (`traffic.decode`, inlined: this runs for every receipt)."""
    wanted, received = audience.wanted, recorder.on_received

    def deliver(consumer: int, body: bytes | str, at_ns: int) -> None:
        if int(body[37:42]) not in wanted[consumer]:
            recorder.on_wasted()
            return
        received(consumer, int(body[20:25]), int(body[26:36]), int(body[0:19]), at_ns)

    return deliver


class Producer:
    """Sends `batch` messages at a time at `rate` (or flat out), at most `inflight` sends
    outstanding. The messages of a batch share their send time and topic."""

    def __init__(
        self, index: int, target: Target, workload: Workload, recorder: Recorder, audience: Audience
    ) -> None:
        self.index, self.target, self.workload = index, target, workload
        self.recorder, self.audience = recorder, audience
        self.random = random.Random(workload.seed * 1_000_003 + index)
        self.slots = asyncio.Semaphore(workload.inflight)
        self.errors: list[Exception] = []
        self._flying: set[asyncio.Task[None]] = set()

    async def run(self, until: float, stop: asyncio.Event) -> None:
        loop, seq = asyncio.get_running_loop(), 0
        start = loop.time()
        limit = self.workload.messages or float("inf")
        while loop.time() < until and seq < limit and not stop.is_set():
            if self.workload.rate:
                await asyncio.sleep(max(0.0, start + seq / self.workload.rate - loop.time()))
            await self.slots.acquire()
            self._launch(seq)
            seq += self.workload.batch
        await asyncio.gather(*self._flying, return_exceptions=True)

    def _launch(self, seq: int) -> None:
        task = asyncio.create_task(self._send(seq))
        self._flying.add(task)
        task.add_done_callback(self._flying.discard)

    async def _send(self, seq: int) -> None:
        count, size = self.workload.batch, self.workload.size
        topic = (seq // count) % self.workload.topics
        xs = [self.random.randrange(X_DOMAIN) for _ in range(count)]
        send_ns = time.time_ns()
        bodies = [
            encode(BodyHeader(send_ns, self.index, seq + i, x), size) for i, x in enumerate(xs)
        ]
        try:
            await self.target.publish_batch(self.index, topic, bodies, xs)
            wanted = self.audience.receivers(topic, xs)
            routed = wanted if self.target.filters else count * self.audience.listeners(topic)
            self.recorder.on_sent(send_ns, count, wanted, routed)
        except Exception as exc:  # a refused send is counted and reported, not fatal
            self.errors.append(exc)
        finally:
            self.slots.release()


async def run(
    target: Target,
    workload: Workload,
    on_second: Callable[[Second], None] = lambda _: None,
    stop: asyncio.Event | None = None,
) -> Summary:
    stop = stop or asyncio.Event()
    audience = Audience(workload)
    await target.open()
    crew = Crew(target.name, target.url, workload) if workload.processes else None
    try:
        recorder = Recorder()
        if crew:
            await crew.start()
        elif workload.offline:
            await _prepare(target, workload, audience)
        else:
            await _subscribe(target, workload, recorder, audience)
        await asyncio.sleep(workload.settle)
        return await _measure(target, workload, recorder, audience, on_second, stop, crew)
    finally:
        if crew:
            crew.kill()
        await target.close()


async def _prepare(target: Target, workload: Workload, audience: Audience) -> None:
    for consumer in range(workload.consumers):
        topic = workload.topic_of_consumer(consumer)
        await target.prepare(consumer, topic, audience.wanted[consumer])


async def _subscribe(
    target: Target, workload: Workload, recorder: Recorder, audience: Audience
) -> None:
    deliver = deliverer(recorder, audience)
    for consumer in range(workload.consumers):
        topic = workload.topic_of_consumer(consumer)
        await target.subscribe(consumer, topic, audience.wanted[consumer], deliver)


async def _measure(
    target: Target,
    workload: Workload,
    recorder: Recorder,
    audience: Audience,
    on_second: Callable[[Second], None],
    stop: asyncio.Event,
    crew: Crew | None,
) -> Summary:
    recorder.start_ns = time.time_ns()
    listeners = crew.listen(recorder) if crew else []
    loop = asyncio.get_running_loop()
    producers = [
        Producer(p, target, workload, recorder, audience) for p in range(workload.producers)
    ]
    reported = [0]  # seconds reported so far
    reporter = asyncio.create_task(_report(recorder, on_second, reported))
    until = loop.time() + workload.duration
    await asyncio.gather(*(p.run(until, stop) for p in producers))
    produced_s = (time.time_ns() - recorder.start_ns) / 1e9
    back_ns = time.time_ns()
    if workload.offline and not stop.is_set():  # the consumers come back to their backlog
        await (crew.go() if crew else _subscribe(target, workload, recorder, audience))
    if not stop.is_set():
        await _drain(recorder, workload.drain, stop)
    if crew:
        await crew.stop(listeners)
    else:
        recorder.closed = target.closed
    reporter.cancel()
    elapsed_s = (time.time_ns() - recorder.start_ns) / 1e9
    for second in range(reported[0], math.ceil(elapsed_s)):  # the last, partial one too
        on_second(recorder.second(second))
    errors = [e for p in producers for e in p.errors]
    summary = summarise(target, recorder, produced_s, errors, stop.is_set())
    if not workload.offline:
        return summary
    drained_s = (recorder.last_receive_ns - back_ns) / 1e9
    return dataclasses.replace(summary, drain_per_s=recorder.received / max(drained_s, 1e-9))


async def _report(
    recorder: Recorder, on_second: Callable[[Second], None], reported: list[int]
) -> None:
    while True:
        next_ns = recorder.start_ns + (reported[0] + 1) * 1_000_000_000
        await asyncio.sleep(max(0.0, (next_ns - time.time_ns()) / 1e9) + 0.01)
        on_second(recorder.second(reported[0]))
        reported[0] += 1


async def _drain(recorder: Recorder, drain_s: float, stop: asyncio.Event) -> None:
    """Wait for the stragglers: until all have come, `drain_s` is over, or nothing has come
    for STALL_S *and* as many polls. The polls count because on a loaded machine this
    process itself can be off the CPU for seconds: what reached its sockets meanwhile is
    read only once it runs again, so wall time alone would call that a stall."""
    deadline = time.monotonic() + drain_s
    seen, last_change, polls = recorder.received + recorder.wasted, time.monotonic(), 0
    while recorder.received + recorder.wasted < recorder.routed and time.monotonic() < deadline:
        stalled = polls >= STALL_S / POLL_S and time.monotonic() - last_change > STALL_S
        if stop.is_set() or stalled:
            return
        await asyncio.sleep(POLL_S)
        polls += 1
        if recorder.received + recorder.wasted != seen:
            seen, last_change, polls = recorder.received + recorder.wasted, time.monotonic(), 0


def summarise(
    target: Target, recorder: Recorder, produced_s: float, errors: list[Exception], stopped: bool
) -> Summary:
    latencies = recorder.latencies()
    received_s = max(produced_s, (recorder.last_receive_ns - recorder.start_ns) / 1e9)
    return Summary(
        target=target.name,
        url=target.url,
        sent=recorder.sent,
        received=recorder.received,
        expected=recorder.expected,
        lost=max(0, recorder.expected - recorder.received),
        duplicates=recorder.duplicates,
        wasted=recorder.wasted,
        closed=recorder.closed,
        send_errors=len(errors),
        first_error=str(errors[0]) if errors else None,
        duration_s=round(produced_s, 3),
        sent_per_s=recorder.sent / produced_s if produced_s else 0.0,
        received_per_s=recorder.received / received_s if received_s else 0.0,
        latency_ms=percentiles(latencies),
        max_ms=float(latencies.max()) if len(latencies) else float("nan"),
        stopped_early=stopped,
        drain_per_s=None,
    )
