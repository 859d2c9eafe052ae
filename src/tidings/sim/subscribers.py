"""Subscribers as asyncio tasks: register, subscribe, then stream (or pull) and record.

A subscriber with offline periods closes its stream at each period's start and opens it
again at its end; what was published meanwhile waits in its queue and is drained then.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tidings.client import AsyncClient, AsyncSubscriberHandle, Message, TidingsClientError
from tidings.sim.config import Offline, SimConfig, SubscriberGroup, marks, on_broker
from tidings.sim.control import Control
from tidings.sim.events import EventWriter

SETUP_CONCURRENCY = 16
RECONNECT_S = 0.5
RETRIED = ("stream_closed", "unreachable")  # the stream broke, or the broker is not back yet


@dataclass
class Spec:
    """Which subscriber this is: its index in the run and its group."""

    index: int
    group: SubscriberGroup


@dataclass
class Sim:
    index: int
    handle: AsyncSubscriberHandle
    offline: list[Offline]
    kinds: dict[str, str] = field(default_factory=dict)
    connected: asyncio.Event = field(default_factory=asyncio.Event)


def specs(config: SimConfig) -> list[Spec]:
    out: list[Spec] = []
    for group in config.subscribers:
        out += [Spec(len(out) + i, group) for i in range(group.count)]
    return out


async def _subscribe(handle: AsyncSubscriberHandle, group: SubscriberGroup) -> dict[str, str]:
    made = []
    if group.topics:
        made.append(await handle.subscribe(topics=list(group.topics)))
    if group.predicates:
        made.append(await handle.subscribe(predicates=list(group.predicates)))
    for function in group.functions:
        made.append(await handle.subscribe(function=on_broker(dict(function), handle.client.url)))
    return {s.id: s.kind for s in made}


async def setup(client: AsyncClient, parts: list[Spec]) -> list[Sim]:
    gate = asyncio.Semaphore(SETUP_CONCURRENCY)

    async def one(spec: Spec) -> Sim:
        async with gate:
            handle = await client.register()
            kinds = await _subscribe(handle, spec.group)
            return Sim(spec.index, handle, list(spec.group.offline), kinds)

    return list(await asyncio.gather(*(one(s) for s in parts)))


class DeliveryRecorder:
    """Writes each delivery with its receive time and counts it for the coordinator."""

    def __init__(self, writer: EventWriter, control: Control) -> None:
        self.writer, self.control = writer, control

    def delivered(self, sim: Sim, message: Message[Any]) -> None:
        at = time.time()
        kinds = sorted({sim.kinds.get(s, "unknown") for s in message.subscription_ids})
        self.writer.write(
            {
                "event": "delivered",
                "publication_id": message.publication_id,
                "subscriber_id": sim.handle.id,
                "subscriber": sim.index,
                "kind": "+".join(kinds) or "unknown",
                "subscription_ids": message.subscription_ids,
                "attempt": message.attempt,
                "enqueued_at": message.enqueued_at,
                "at": at,
            }
        )
        self.control.delivered(1, at, max(0.0, at - message.enqueued_at))

    def presence(self, sim: Sim, event: str) -> None:
        self.writer.write({"event": event, "subscriber_id": sim.handle.id, "at": time.time()})


async def _stream(sim: Sim, config: SimConfig, recorder: DeliveryRecorder) -> None:
    """Receive over the push stream until cancelled. When it ends or breaks (a broker that
    restarts; a keep-alive missed under overload), reconnect: what was in flight comes back
    from the durable queue."""
    while True:
        try:
            await _stream_once(sim, config, recorder)
        except TidingsClientError as exc:
            if exc.code not in RETRIED:
                raise
        recorder.presence(sim, "reconnect")
        await asyncio.sleep(RECONNECT_S)


async def _stream_once(sim: Sim, config: SimConfig, recorder: DeliveryRecorder) -> None:
    # the simulator reconnects itself, to record each reconnection as a presence event
    async with sim.handle.stream(prefetch=config.prefetch, reconnect=False) as stream:
        sim.connected.set()
        async for message in stream:
            recorder.delivered(sim, message)
            await stream.ack([message.receipt])


async def _pull(sim: Sim, config: SimConfig, recorder: DeliveryRecorder) -> None:
    sim.connected.set()
    while True:
        messages = await sim.handle.pull(max_messages=config.prefetch, wait=1.0)
        for message in messages:
            recorder.delivered(sim, message)
        if messages:
            await sim.handle.ack([m.receipt for m in messages])


async def _until_offline(window: Offline | None, control: Control) -> None:
    if window is None:
        await control.wait_stop()
        return
    start = await control.started()
    await control.sleep_until(start + window.at)


async def _online(
    sim: Sim, window: Offline | None, config: SimConfig, rec: DeliveryRecorder
) -> None:
    """Receive until the next offline period begins or the run stops."""
    receive = _stream if config.delivery == "stream" else _pull
    reading = asyncio.create_task(receive(sim, config, rec))
    until = asyncio.create_task(_until_offline(window, rec.control))
    try:
        done, _ = await asyncio.wait({reading, until}, return_when=asyncio.FIRST_COMPLETED)
    finally:  # also when this task is cancelled: the reader must not outlive the event file
        for task in (reading, until):
            task.cancel()
        await asyncio.gather(reading, until, return_exceptions=True)
    if reading in done and not reading.cancelled():
        reading.result()


async def consume(sim: Sim, config: SimConfig, recorder: DeliveryRecorder) -> None:
    control = recorder.control
    for window in [*sorted(sim.offline, key=lambda w: w.at), None]:
        await _online(sim, window, config, recorder)
        if window is None or control.stopped:
            return
        recorder.presence(sim, "offline")
        if not await control.sleep_until(control.start + window.at + window.seconds):
            return
        recorder.presence(sim, "online")


async def cleanup(sims: list[Sim]) -> None:
    gate = asyncio.Semaphore(SETUP_CONCURRENCY)

    async def one(sim: Sim) -> None:
        async with gate:
            await sim.handle.unregister()

    await asyncio.gather(*(one(s) for s in sims), return_exceptions=True)


async def run_part(
    config: SimConfig, parts: list[Spec], url: str, run_dir: Path, name: str, control: Control
) -> AsyncIterator[int]:
    """Set up this part's subscribers, yield once they are all connected, receive until stop.

    An async generator: the first `__anext__` is the setup, the second runs to the end.
    """
    writer = EventWriter(run_dir, name)
    async with AsyncClient(url, headers=marks(config)) as client:
        sims = await setup(client, parts)
        recorder = DeliveryRecorder(writer, control)
        tasks = [asyncio.create_task(consume(s, config, recorder)) for s in sims]
        try:
            await _connected(sims, tasks)
            yield len(sims)
            await asyncio.gather(*tasks)
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            writer.close()
            if config.cleanup:
                await cleanup(sims)


async def _connected(sims: list[Sim], tasks: list[asyncio.Task[None]]) -> None:
    """Wait for every stream to open; a consumer that failed instead raises its error."""
    waiting: asyncio.Future[list[bool]] = asyncio.gather(*(s.connected.wait() for s in sims))
    others: list[asyncio.Future[Any]] = [waiting, *tasks]
    await asyncio.wait(others, return_when=asyncio.FIRST_COMPLETED)
    for task in tasks:
        if task.done() and not task.cancelled() and task.exception() is not None:
            waiting.cancel()
            raise task.exception()  # type: ignore[misc]
    await waiting
