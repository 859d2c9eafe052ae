"""Consumers in processes of their own, so that a fan-out run measures the broker and not one
Python process's ability to take 50,000 callbacks a second. Each process subscribes its share
of the consumers through its own copy of the target and streams its receipts to the parent."""

from __future__ import annotations

import asyncio
import multiprocessing
import signal
from multiprocessing.connection import Connection
from typing import Any

import uvloop

from tidings.errors import ErrorCode, TidingsError
from tidings.sim.perf.stats import Recorder
from tidings.sim.perf.targets import make_target
from tidings.sim.perf.traffic import Workload

FLUSH_S = 0.1


class Crew:
    """The consumer processes of one run, seen from the parent."""

    def __init__(self, name: str, url: str | None, workload: Workload) -> None:
        context = multiprocessing.get_context("spawn")
        self._pipes: list[Connection] = []
        self._processes = []
        for share in range(workload.processes):
            consumers = list(range(share, workload.consumers, workload.processes))
            parent, child = context.Pipe()
            process = context.Process(
                target=_main, args=(name, url, workload, consumers, child), daemon=True
            )
            self._pipes.append(parent)
            self._processes.append(process)

    async def start(self) -> None:
        for process in self._processes:
            process.start()
        for pipe in self._pipes:
            await _expect(pipe, "ready")

    async def go(self) -> None:
        """Offline runs: the consumers, prepared at `start`, begin to consume."""
        for pipe in self._pipes:
            pipe.send("go")

    def listen(self, recorder: Recorder) -> list[asyncio.Task[None]]:
        return [asyncio.create_task(_relay(pipe, recorder)) for pipe in self._pipes]

    async def stop(self, listeners: list[asyncio.Task[None]]) -> None:
        for pipe in self._pipes:
            pipe.send("stop")
        await asyncio.gather(*listeners)

    def kill(self) -> None:
        for process in self._processes:
            if process.is_alive():
                process.kill()
            process.join(5)


async def _receive(pipe: Connection) -> tuple[Any, ...]:
    message: tuple[Any, ...] = await asyncio.to_thread(pipe.recv)
    if message[0] == "error":
        _, code, field, params = message
        raise TidingsError(ErrorCode(code), field=field, **params)
    return message


async def _expect(pipe: Connection, kind: str) -> None:
    message = await _receive(pipe)
    if message[0] != kind:
        raise RuntimeError(f"a consumer process said {message[0]!r}, not {kind!r}")


async def _relay(pipe: Connection, recorder: Recorder) -> None:
    while True:
        kind, receipts, wasted, duplicates, closed = await _receive(pipe)
        recorder.merge(receipts)
        recorder.wasted += wasted
        recorder.duplicates += duplicates
        recorder.closed += closed
        if kind == "done":
            return


def _main(
    name: str, url: str | None, workload: Workload, consumers: list[int], pipe: Connection
) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent decides when to stop
    try:
        uvloop.run(_consume(name, url, workload, consumers, pipe))
    except TidingsError as exc:
        pipe.send(("error", exc.code.value, exc.field, exc.params))
    except Exception as exc:  # reported to the parent, which prints one line
        pipe.send(("error", ErrorCode.UNAVAILABLE.value, None, {"detail": f"{name}: {exc!r}"}))


async def _consume(
    name: str, url: str | None, workload: Workload, consumers: list[int], pipe: Connection
) -> None:
    from tidings.sim.perf.trial import Audience, deliverer

    target, audience, recorder = make_target(name, url, workload), Audience(workload), Recorder()
    deliver = deliverer(recorder, audience)
    try:
        for consumer in consumers:
            topic = workload.topic_of_consumer(consumer)
            if workload.offline:
                await target.prepare(consumer, topic, audience.wanted[consumer])
            else:
                await target.subscribe(consumer, topic, audience.wanted[consumer], deliver)
        pipe.send(("ready",))
        if workload.offline:
            await asyncio.to_thread(pipe.recv)  # "go": the producers are done
            for consumer in consumers:
                topic = workload.topic_of_consumer(consumer)
                await target.subscribe(consumer, topic, audience.wanted[consumer], deliver)
        sent = [0, 0, 0]
        while not pipe.poll():
            await asyncio.sleep(FLUSH_S)
            recorder.closed = target.closed
            pipe.send(("receipts", recorder.take_fresh(), *_deltas(recorder, sent)))
        pipe.recv()
    finally:
        await target.close()
    recorder.closed = target.closed
    pipe.send(("done", recorder.take_fresh(), *_deltas(recorder, sent)))


def _deltas(recorder: Recorder, sent: list[int]) -> tuple[int, int, int]:
    now = [recorder.wasted, recorder.duplicates, recorder.closed]
    wasted, duplicates, closed = (a - b for a, b in zip(now, sent, strict=True))
    sent[:] = now
    return wasted, duplicates, closed
