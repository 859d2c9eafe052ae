"""A pool of sandbox worker processes, driven from asyncio without blocking the loop.

A request (one publication, many functions) goes to one worker, which answers call by
call. When a call overruns its wall-clock budget (the worker's own CPU timer failed, e.g. a
long C-level operation) or the worker dies, the worker is killed and replaced, that call is
recorded as a failure, and the calls it had not reached are sent again to a fresh worker,
so one runaway function does not take others down with it.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from tidings.config import FunctionSettings
from tidings.sandbox.boundary import command, worker_env


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
BUILTIN_BUDGET_S = 15.0  # wall clock for one of the library's functions (vision is slow)
START_BUDGET_S = 60.0  # a new worker loads the library and its models first


class WorkerProcess:
    """The pool's handle on one worker process (`sandbox/worker.py` is what runs inside)."""

    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self.proc = proc
        self.known: set[str] = set()

    @classmethod
    async def start(cls, argv: Sequence[str]) -> WorkerProcess:
        """`argv`: the worker's command line, normally `boundary.command(...)`."""
        proc = await asyncio.create_subprocess_exec(
            *argv,
            env=worker_env(),
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.DEVNULL,
            limit=2**20,
        )
        assert proc.stdout is not None
        ready = await asyncio.wait_for(proc.stdout.readline(), START_BUDGET_S)
        if not ready:
            raise RuntimeError("a sandbox worker failed to start")
        if "--seccomp" in argv and orjson.loads(ready).get("seccomp") != 2:
            proc.kill()  # never serve from a worker whose filter is not in place
            await proc.wait()
            raise RuntimeError("a sandbox worker started without its seccomp filter")
        return cls(proc)

    async def run(
        self,
        publication: Any,
        calls: Sequence[WorkerCall],
        budget_s: float,
        results: dict[str, Result],
        ms: dict[str, float] | None = None,
    ) -> None:
        """Fill `results` in call order; raise when a call overruns or the worker dies."""
        assert self.proc.stdin is not None and self.proc.stdout is not None
        request = {"publication": publication, "calls": [c.wire(self.known) for c in calls]}
        self.proc.stdin.write(orjson.dumps(request) + b"\n")
        await self.proc.stdin.drain()
        self.known.update(c.key for c in calls if c.kind == "code")
        for call in calls:
            wait = budget_s if call.kind == "code" else BUILTIN_BUDGET_S
            line = await asyncio.wait_for(self.proc.stdout.readline(), wait)
            if not line:
                raise EOFError("worker exited")
            answer = orjson.loads(line)
            results[call.sid] = (bool(answer["match"]), answer["error"])
            if ms is not None:
                ms[call.sid] = float(answer.get("ms") or 0.0)
        await asyncio.wait_for(self.proc.stdout.readline(), BUILTIN_BUDGET_S)  # {"done": true}

    async def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            self.proc.kill()
        await self.proc.wait()


class WorkerPool:
    """`size` workers started with `argv` (default: the settings' worker count, code
    profile, inside the OS boundary)."""

    def __init__(
        self, settings: FunctionSettings, argv: Sequence[str] | None = None, size: int = 0
    ) -> None:
        self.settings = settings
        self.argv = list(argv or command(settings, "code", bounded=True))
        self.size = size or settings.workers
        self.budget_s = max(0.5, settings.cpu_ms / 1000 * 5)  # wall clock per call
        self._idle: asyncio.Queue[WorkerProcess] | None = None
        self._workers: list[WorkerProcess] = []
        self.killed = 0
        self.ms: dict[str, float] = {}  # subscription id -> its last call's wall time

    async def _take(self) -> WorkerProcess:
        if self._idle is None:
            self._idle = asyncio.Queue()
            for _ in range(self.size):
                self._workers.append(await WorkerProcess.start(self.argv))
                self._idle.put_nowait(self._workers[-1])
        return await self._idle.get()

    async def _replace(self, worker: WorkerProcess) -> None:
        await worker.kill()
        self.killed += 1
        fresh = await WorkerProcess.start(self.argv)
        self._workers[self._workers.index(worker)] = fresh
        assert self._idle is not None
        self._idle.put_nowait(fresh)

    async def run(
        self, publication: Any, calls: Sequence[WorkerCall], keep: Keep | None = None
    ) -> dict[str, Result]:
        """Evaluate every call; a call that brings its worker down is that call's failure.
        `keep`, asked once a worker is free, drops calls cancelled while they waited."""
        results: dict[str, Result] = {}
        pending = list(calls)
        while pending:
            worker = await self._take()
            pending = [c for c in pending if keep is None or keep(c)]
            if not pending:
                self._idle.put_nowait(worker)  # type: ignore[union-attr]
                break
            try:
                await worker.run(publication, pending, self.budget_s, results, self.ms)
                self._idle.put_nowait(worker)  # type: ignore[union-attr]
                return results
            except (TimeoutError, EOFError, OSError, ValueError):
                done = sum(1 for c in pending if c.sid in results)
                results[pending[done].sid] = (False, "killed: time or memory limit exceeded")
                pending = pending[done + 1 :]
                await self._replace(worker)
        return results

    async def run_many(
        self, publication: Any, calls: Sequence[WorkerCall], keep: Keep | None = None
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
