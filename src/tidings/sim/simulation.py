"""One simulator run: broker check, subscribers (here or in spawned processes), publishers on
their schedules, a drain until deliveries go quiet, then the run directory's files.

Ctrl-C stops publishing and receiving at once; what was measured is still written.
"""

from __future__ import annotations

import asyncio
import contextlib
import queue as queue_module
import signal
import time
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec

from tidings.client import AsyncClient, TidingsClientError
from tidings.errors import ErrorCode, TidingsError
from tidings.sim import events, rundir
from tidings.sim.config import SimConfig, marks
from tidings.sim.control import SPAWN, Control, check_broker
from tidings.sim.progress import ProgressFile, ProgressLine
from tidings.sim.publishers import Counter, publish_all, total_planned, warm_up
from tidings.sim.subscribers import Spec, run_part, specs

READY_TIMEOUT_S = 120.0


@dataclass
class RunOutcome:
    run_dir: Path
    summary: dict[str, Any]


# A broker of its own for a run given no URL: its data directory in, its URL out. The
# composition root (tidings.server.embedded_broker) is passed in by the CLI: the simulator
# sits below the server and never imports it.
Embedded = Callable[[Path], AbstractContextManager[str]]


@dataclass
class RunOptions:
    url: str | None = None
    processes: int = 1
    progress: bool = True
    progress_file: Path | None = None  # rewritten as the run goes (sim.progress.ProgressFile)
    embedded: Embedded | None = None


def run(config: SimConfig, run_dir: Path, options: RunOptions) -> RunOutcome:
    """Run `config` into the (new, empty) `run_dir`; an embedded broker when no URL is given."""
    rundir.write_json(run_dir / "config.json", msgspec.to_builtins(config))
    rundir.write_json(run_dir / "environment.json", rundir.environment())
    url = options.url or config.url
    with broker(url, run_dir, options.embedded) as live_url:
        return _run(config, run_dir, live_url, options)


@contextlib.contextmanager
def broker(url: str | None, run_dir: Path, embedded: Embedded | None) -> Iterator[str]:
    """`url` itself, or the URL of an embedded broker keeping its data in `run_dir/broker`."""
    if url is not None:
        yield url.rstrip("/")
        return
    if embedded is None:
        raise TidingsError(ErrorCode.UNAVAILABLE, field="url", detail="no broker URL given")
    with embedded(run_dir / "broker") as started:
        yield started


def _run(config: SimConfig, run_dir: Path, url: str, options: RunOptions) -> RunOutcome:
    control, state = Control(), State()
    try:
        asyncio.run(_coordinate(config, run_dir, url, options, control, state))
    except TidingsClientError as exc:
        raise TidingsError(ErrorCode.UNAVAILABLE, detail=f"{exc.message} ({url})") from None
    finally:
        summary = _finish(config, run_dir, url, state)
    return RunOutcome(run_dir, summary)


@dataclass
class State:
    interrupted: bool = False
    started: float = 0.0
    ended: float = 0.0


def _finish(config: SimConfig, run_dir: Path, url: str, state: State) -> dict[str, Any]:
    path = events.merge(run_dir)
    logged = list(events.read(path))
    seconds = (state.ended or time.time()) - (state.started or time.time())
    summary = events.summarize(logged, config.subscriber_count) | {
        "name": config.name,
        "url": url,
        "seconds": round(seconds, 3),
        "interrupted": state.interrupted,
    }
    rundir.write_json(run_dir / "summary.json", summary)
    rate = sum(p.rate * p.count for p in config.publishers)
    meta = {"publications_per_s": rate, "subscribers": config.subscriber_count}
    events.export(run_dir, meta | {"seconds": summary["seconds"]})
    return summary


async def _coordinate(
    config: SimConfig, run_dir: Path, url: str, options: RunOptions, control: Control, state: State
) -> None:
    with _interrupts(control, state):
        async with AsyncClient(url, headers=marks(config)) as client:
            await check_broker(client, url)
            parts = _subscribers(config, url, run_dir, options.processes, control)
            async with parts:
                await _publish_and_drain(client, config, run_dir, options, control, state)


@contextlib.contextmanager
def _interrupts(control: Control, state: State) -> Iterator[None]:
    """The first Ctrl-C stops the run cleanly; a second one is an ordinary interrupt."""
    loop = asyncio.get_running_loop()

    def stop() -> None:
        state.interrupted = True
        control.stop()
        loop.remove_signal_handler(signal.SIGINT)

    # not the main thread: no handler, Ctrl-C interrupts as usual
    with contextlib.suppress(RuntimeError, ValueError, NotImplementedError):
        loop.add_signal_handler(signal.SIGINT, stop)
    try:
        yield
    finally:
        loop.remove_signal_handler(signal.SIGINT)


async def _publish_and_drain(
    client: AsyncClient,
    config: SimConfig,
    run_dir: Path,
    options: RunOptions,
    control: Control,
    state: State,
) -> None:
    writer, counter = events.EventWriter(run_dir, "publishers"), Counter()
    if config.warmup:
        await warm_up(client, config, control)
    state.started = time.time()
    control.begin(state.started)
    publishing = asyncio.create_task(publish_all(client, config, control, writer, counter))
    planned = total_planned(config)
    progress = ProgressFile(options.progress_file, planned)

    def report(phase: str, final: bool = False) -> None:
        delivered = control.delivered_count
        line.update(counter.published, delivered, phase)
        recent = control.recent_latencies()
        progress.update(counter.published, delivered, phase, recent, final)

    try:
        with ProgressLine(planned, options.progress) as line:
            await _watch(publishing, control, report)
            await _drain(config, control, report)
    finally:
        report("finishing", final=True)
        state.ended = time.time()
        control.stop()
        publishing.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await publishing
        writer.close()


async def _watch(
    publishing: asyncio.Task[None], control: Control, report: Callable[[str], None]
) -> None:
    while not publishing.done() and not control.stopped:
        report("publishing")
        await asyncio.wait({publishing}, timeout=0.25)
    if publishing.done():
        publishing.result()


async def _drain(config: SimConfig, control: Control, report: Callable[[str], None]) -> None:
    """Wait until every offline period is over and nothing arrived for `quiet` seconds."""
    back = max(
        (control.start + w.at + w.seconds for g in config.subscribers for w in g.offline),
        default=0.0,
    )
    ended = time.time()
    deadline = max(ended, back) + config.drain
    while not control.stopped and time.time() < deadline:
        now = time.time()
        quiet = now - max(control.last_delivery, ended) >= config.quiet
        # nothing delivered yet may be a cold start (function workers): wait for the deadline
        if now >= back and quiet and control.delivered_count:
            return
        report("draining")
        await asyncio.sleep(0.05)


def _subscribers(
    config: SimConfig, url: str, run_dir: Path, processes: int, control: Control
) -> contextlib.AbstractAsyncContextManager[None]:
    everyone = specs(config)
    if processes <= 1 or len(everyone) <= 1:
        return _local(config, everyone, url, run_dir, control)
    chunks = [everyone[k::processes] for k in range(processes) if everyone[k::processes]]
    return _spawned(config, chunks, url, run_dir, control)


@contextlib.asynccontextmanager
async def _local(
    config: SimConfig, everyone: list[Spec], url: str, run_dir: Path, control: Control
) -> AsyncIterator[None]:
    part = run_part(config, everyone, url, run_dir, "subscribers", control)
    await anext(part)
    rest = asyncio.create_task(_exhaust(part))
    try:
        yield
    finally:
        control.stop()
        await rest


async def _exhaust(part: AsyncIterator[int]) -> None:
    async for _ in part:
        pass


@contextlib.asynccontextmanager
async def _spawned(
    config: SimConfig, chunks: list[list[Spec]], url: str, run_dir: Path, control: Control
) -> AsyncIterator[None]:
    queue: Any = SPAWN.Queue()
    procs = [
        SPAWN.Process(
            target=child_main,
            args=(config, chunk, url, run_dir, f"subscribers-{k}", control, queue),
            name=f"tidings-sim-{k}",
        )
        for k, chunk in enumerate(chunks)
    ]
    for proc in procs:
        proc.start()
    try:
        await _ready(queue, procs)
        yield
    finally:
        control.stop()
        await asyncio.to_thread(_join, procs)


async def _ready(queue: Any, procs: list[Any]) -> None:
    """Every process has its subscribers connected; one that failed or died is an error."""
    deadline, waiting = time.monotonic() + READY_TIMEOUT_S, len(procs)
    while waiting:
        try:
            name, error = await asyncio.to_thread(queue.get, True, 0.25)
        except queue_module.Empty:
            _check_alive(procs, deadline)
            continue
        if error is not None:
            raise TidingsError(ErrorCode.UNAVAILABLE, detail=f"{name}: {error}")
        waiting -= 1


def _check_alive(procs: list[Any], deadline: float) -> None:
    dead = [p.name for p in procs if p.exitcode is not None]
    if dead or time.monotonic() > deadline:
        why = f"{', '.join(dead)} exited" if dead else "timed out"
        raise TidingsError(ErrorCode.UNAVAILABLE, detail=f"subscriber processes: {why}")


def _join(procs: list[Any]) -> None:
    for proc in procs:
        proc.join(30)
        if proc.is_alive():
            proc.terminate()
            proc.join(5)


def child_main(
    config: SimConfig, chunk: list[Spec], url: str, run_dir: Path, name: str, control: Control,
    queue: Any,
) -> None:  # fmt: skip
    """A subscriber process: Ctrl-C is the coordinator's to handle, so it is ignored here."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    asyncio.run(_child(config, chunk, url, run_dir, name, control, queue))


async def _child(
    config: SimConfig, chunk: list[Spec], url: str, run_dir: Path, name: str, control: Control,
    queue: Any,
) -> None:  # fmt: skip
    part = run_part(config, chunk, url, run_dir, name, control)
    try:
        await anext(part)
    except TidingsClientError as exc:
        queue.put((name, exc.message))
        return
    queue.put((name, None))
    await _exhaust(part)
