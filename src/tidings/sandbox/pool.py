"""Sandbox worker processes driven from asyncio without blocking the loop, and the pool of
the library's (trusted) workers.

A request (one publication, many functions) goes to one worker, which answers call by
call. When the kernel ends a worker (its RLIMIT_CPU, or memory), a call's CPU time read from
here passes its cap (a code call's `cpu_ms`, a library call's `builtin_cpu_s`, the worker's
children counted: the OCR's tesseract), or a call overruns the parent's wall-clock watchdog
(the last resort: a busy machine slows a call down, it is not the call's fault), that call
is recorded as a failure. The library's pool then
replaces the worker and sends the calls it had not reached to a fresh one; subscribers'
code runs in workers of its own (`sandbox/tenants.py`), never in this pool.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from tidings.config import FunctionSettings
from tidings.sandbox.boundary import command, worker_env
from tidings.sandbox.cgroup import MemoryCgroups, release
from tidings.sandbox.cpu import KERNEL_SLACK_S, cpu_cap_s, tree_cpu_s


@dataclass(frozen=True, slots=True)
class WorkerCall:
    """One subscription's function as a worker is asked to call it (the source only once)."""

    sid: str
    kind: str  # "code" or "builtin"
    key: str  # the code's hash, or the builtin's name
    source: str = ""
    params: Any = None

    def wire(self, known: set[str]) -> dict[str, Any]:
        out: dict[str, Any] = {
            "sid": self.sid,
            "kind": self.kind,
            "hash": self.key,
            "name": self.key,
            "params": self.params or {},
        }
        if self.kind == "code" and self.key not in known:
            out["source"] = self.source
        return out


Result = tuple[bool, str | None]  # matched, error
Keep = Callable[[WorkerCall], bool]
BUILTIN_CPU_S = 10.0  # CPU for one of the library's functions (functions.builtin_cpu_s)
BUILTIN_WALL_S = 120.0  # ... and its last-resort wall clock (functions.builtin_wall_s)
START_BUDGET_S = 60.0  # a new worker loads the library and its models first
KILLED_BY_KERNEL = "killed: cpu time or memory limit exceeded (the worker was ended)"
KILLED_BY_WATCHDOG = "killed: wall-clock limit exceeded"
KILLED_BY_CPU = "killed: cpu time limit exceeded (ended from outside the worker)"
CPU_POLL_S = 0.02  # how often the parent reads a running code call's CPU time
BUILTIN_POLL_S = 0.1  # ... and a library call's (its budget is seconds)


Spawned = set[asyncio.subprocess.Process]  # started, not yet reaped


async def reap(proc: asyncio.subprocess.Process, spawned: Spawned | None = None) -> None:
    """Kill a worker's process and wait for it (shielded: a cancellation while waiting
    leaves it in `spawned`, for its owner's close)."""
    with contextlib.suppress(ProcessLookupError):
        proc.kill()
    await asyncio.shield(proc.wait())
    # its pipes too, now: left to the collector, a transport whose loop has closed meanwhile
    # (a runner closed with its event loop) complains from `__del__`
    transport = getattr(proc, "_transport", None)
    if isinstance(transport, asyncio.SubprocessTransport):
        transport.close()
    if spawned is not None:
        spawned.discard(proc)


async def reap_all(spawned: Spawned) -> None:
    for proc in list(spawned):
        await reap(proc, spawned)


class WorkerDied(Exception):
    """The worker ended (the kernel's CPU or memory limit), or was killed by the watchdog."""

    def __init__(self, error: str) -> None:
        super().__init__(error)
        self.error = error


def watchdog_s(settings: FunctionSettings) -> float:
    """Wall clock for one code call: past the kernel's CPU limit (`cpu.kernel_limit_s`: the
    parent's cap plus a second, whole seconds up) with room to spare; the last resort."""
    cpu_s = settings.cpu_ms / 1000
    return math.ceil(cpu_cap_s(cpu_s)) + KERNEL_SLACK_S + 1.0 + max(0.5, cpu_s * 5)


def publication_text(publication: Any) -> str:
    """The publication as JSON text: each call in a worker decodes its own copy."""
    return orjson.dumps(publication).decode()


class WorkerProcess:
    """The pool's handle on one worker process (`sandbox/worker.py` is what runs inside)."""

    def __init__(self, proc: asyncio.subprocess.Process, cgroup: Path | None = None) -> None:
        self.proc = proc
        self.cgroup = cgroup  # its memory cgroup, removed once it has ended
        self.dead = False  # killed as a request was cut short: never used again
        self.spawned: Spawned | None = None
        self.known: set[str] = set()
        self.lean = False  # a code worker started without the library (`--lean`)

    @classmethod
    async def start(
        cls,
        argv: Sequence[str],
        cgroups: MemoryCgroups | None = None,
        spawned: Spawned | None = None,
    ) -> WorkerProcess:
        """`argv`: the worker's command line, normally `boundary.command(...)`; in a memory
        cgroup of its own where `cgroups` grants one. Its process is in `spawned` until it
        has been reaped, so its owner's close can end whatever a cancellation left."""
        argv, cgroup = cgroups.wrap(list(argv)) if cgroups else (list(argv), None)
        try:
            worker = cls(await cls._spawn(argv, spawned), cgroup)
        except BaseException:
            release(cgroup)
            raise
        worker.spawned = spawned
        return worker

    @staticmethod
    async def _spawn(argv: Sequence[str], spawned: Spawned | None) -> asyncio.subprocess.Process:
        proc = await asyncio.create_subprocess_exec(
            *argv,
            env=worker_env(),
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.DEVNULL,
            limit=2**20,
        )
        if spawned is not None:
            spawned.add(proc)
        assert proc.stdout is not None
        try:
            ready = await asyncio.wait_for(proc.stdout.readline(), START_BUDGET_S)
            if not ready:
                raise RuntimeError("a sandbox worker failed to start")
            if "--seccomp" in argv and orjson.loads(ready).get("seccomp") != 2:
                # never serve from a worker whose filter is not in place
                raise RuntimeError("a sandbox worker started without its seccomp filter")
        except BaseException:  # a failed start, or one cancelled (the runner closing)
            await reap(proc, spawned)
            raise
        return proc

    async def run(
        self,
        publication: str,
        calls: Sequence[WorkerCall],
        budget_s: float,
        results: dict[str, Result],
        ms: dict[str, float] | None = None,
        cpu_s: float | None = None,
        builtin: tuple[float, float] = (BUILTIN_CPU_S, BUILTIN_WALL_S),
    ) -> None:
        """Fill `results` in call order (`publication`: its JSON text); raise WorkerDied
        when the worker ends or a call overruns (the worker is then dead). With `cpu_s`,
        each code call's CPU time is watched from here and the worker ended once it passes
        `cpu_cap_s(cpu_s)`, whatever the call did to its own time limit. A library call is
        watched so against `builtin`'s CPU seconds, its wall seconds the last resort."""
        assert self.proc.stdin is not None and self.proc.stdout is not None
        request = {"publication": publication, "calls": [c.wire(self.known) for c in calls]}
        try:
            self.proc.stdin.write(orjson.dumps(request) + b"\n")
            await self.proc.stdin.drain()
            self.known.update(c.key for c in calls if c.kind == "code")
            builtin_cpu_s, builtin_wall_s = builtin
            for call in calls:
                if call.kind == "code":
                    wait, poll = budget_s, CPU_POLL_S
                    cap = cpu_cap_s(cpu_s) if cpu_s is not None else None
                else:
                    wait, cap, poll = builtin_wall_s, cpu_cap_s(builtin_cpu_s), BUILTIN_POLL_S
                line = await self._answer(wait, cap, poll)
                if not line:
                    raise WorkerDied(KILLED_BY_KERNEL)
                answer = orjson.loads(line)
                results[call.sid] = (bool(answer["match"]), answer["error"])
                if ms is not None:
                    ms[call.sid] = float(answer.get("ms") or 0.0)
            await asyncio.wait_for(self.proc.stdout.readline(), builtin_wall_s)  # done
        except TimeoutError:
            await self.kill()
            raise WorkerDied(KILLED_BY_WATCHDOG) from None
        except (OSError, ValueError):  # a broken pipe, or garbage from a dying worker
            await self.kill()
            raise WorkerDied(KILLED_BY_KERNEL) from None
        except WorkerDied:
            await self.kill()
            raise
        except asyncio.CancelledError:
            with contextlib.suppress(ProcessLookupError):
                self.proc.kill()  # its answers would be read as the next request's
            self.dead = True
            raise

    async def _answer(
        self, wait_s: float, cap_s: float | None, poll_s: float = CPU_POLL_S
    ) -> bytes:
        """The worker's next line within `wait_s` (else TimeoutError); with `cap_s`,
        WorkerDied as soon as the worker has used that much CPU since this was asked (read
        every `poll_s`)."""
        assert self.proc.stdout is not None
        if cap_s is None:
            return await asyncio.wait_for(self.proc.stdout.readline(), wait_s)
        loop = asyncio.get_running_loop()
        deadline, before = loop.time() + wait_s, tree_cpu_s(self.proc.pid)
        reading = asyncio.ensure_future(self.proc.stdout.readline())
        try:
            while True:
                left = deadline - loop.time()
                done, _ = await asyncio.wait({reading}, timeout=max(0.0, min(poll_s, left)))
                if done:
                    return reading.result()
                if left <= 0:
                    raise TimeoutError
                used = tree_cpu_s(self.proc.pid)
                if before is not None and used is not None and used - before > cap_s:
                    raise WorkerDied(KILLED_BY_CPU)
        finally:
            if not reading.done():  # the worker is killed: its line will never be read
                reading.cancel()

    async def kill(self) -> None:
        await reap(self.proc, self.spawned)
        release(self.cgroup)


class WorkerPool:
    """`size` workers started with `argv` (default: the settings' worker count, library
    profile, inside the OS boundary). Trusted code only: the library's functions may share
    a worker; a subscriber's code may not (`sandbox/tenants.py`)."""

    def __init__(
        self, settings: FunctionSettings, argv: Sequence[str] | None = None, size: int = 0
    ) -> None:
        self.settings = settings
        self.argv = list(argv or command(settings, "library", bounded=True))
        self.size = size or settings.workers
        self.budget_s = watchdog_s(settings)
        self.builtin = (settings.builtin_cpu_s, settings.builtin_wall_s)
        self._idle: asyncio.Queue[WorkerProcess] | None = None
        self._workers: list[WorkerProcess] = []
        self.spawned: Spawned = set()
        self.killed = 0
        self.ms: dict[str, float] = {}  # subscription id -> its last call's wall time

    async def _take(self) -> WorkerProcess:
        if self._idle is None:
            self._idle = asyncio.Queue()
            for _ in range(self.size):
                self._workers.append(await WorkerProcess.start(self.argv, spawned=self.spawned))
                self._idle.put_nowait(self._workers[-1])
        return await self._idle.get()

    async def _replace(self, worker: WorkerProcess) -> None:
        await worker.kill()
        self.killed += 1
        fresh = await WorkerProcess.start(self.argv, spawned=self.spawned)
        self._workers[self._workers.index(worker)] = fresh
        assert self._idle is not None
        self._idle.put_nowait(fresh)

    async def run(
        self, publication: str, calls: Sequence[WorkerCall], keep: Keep | None = None
    ) -> dict[str, Result]:
        """Evaluate every call (`publication`: its JSON text); a call that brings its worker
        down is that call's failure. `keep`, asked once a worker is free, drops calls
        cancelled while they waited."""
        results: dict[str, Result] = {}
        pending = list(calls)
        while pending:
            worker = await self._take()
            pending = [c for c in pending if keep is None or keep(c)]
            if not pending:
                self._idle.put_nowait(worker)  # type: ignore[union-attr]
                break
            try:
                await worker.run(
                    publication, pending, self.budget_s, results, self.ms, builtin=self.builtin
                )
                self._idle.put_nowait(worker)  # type: ignore[union-attr]
                return results
            except WorkerDied as died:
                done = sum(1 for c in pending if c.sid in results)
                results[pending[done].sid] = (False, died.error)
                pending = pending[done + 1 :]
                await self._replace(worker)
        return results

    async def run_many(
        self, publication: str, calls: Sequence[WorkerCall], keep: Keep | None = None
    ) -> dict[str, Result]:
        """Spread the calls over the workers."""
        if not calls:
            return {}
        n = max(1, min(self.size, len(calls)))
        parts = await asyncio.gather(*(self.run(publication, calls[i::n], keep) for i in range(n)))
        return {k: v for part in parts for k, v in part.items()}

    async def aclose(self) -> None:
        for worker in self._workers:
            await worker.kill()
        await reap_all(self.spawned)
