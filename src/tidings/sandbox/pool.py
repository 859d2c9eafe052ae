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
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from tidings.config import FunctionSettings


@dataclass(frozen=True, slots=True)
class Call:
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
BUILTIN_BUDGET_S = 15.0  # wall clock for one of the library's functions (vision is slow)
START_BUDGET_S = 60.0  # a new worker loads the library and its models first


class Worker:
    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self.proc = proc
        self.known: set[str] = set()

    @classmethod
    async def start(cls, settings: FunctionSettings) -> Worker:
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "tidings.sandbox.worker",
            str(settings.memory_mib),
            str(settings.cpu_ms),
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.DEVNULL,
            limit=2**20,
        )
        assert proc.stdout is not None
        ready = await asyncio.wait_for(proc.stdout.readline(), START_BUDGET_S)
        if not ready:
            raise RuntimeError("a sandbox worker failed to start")
        return cls(proc)

    async def run(
        self, publication: Any, calls: Sequence[Call], budget_s: float, results: dict[str, Result]
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
        await asyncio.wait_for(self.proc.stdout.readline(), BUILTIN_BUDGET_S)  # {"done": true}

    async def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            self.proc.kill()
        await self.proc.wait()


class WorkerPool:
    def __init__(self, settings: FunctionSettings) -> None:
        self.settings = settings
        self.budget_s = max(0.5, settings.cpu_ms / 1000 * 5)  # wall clock per call
        self._idle: asyncio.Queue[Worker] | None = None
        self._workers: list[Worker] = []
        self.killed = 0

    async def _take(self) -> Worker:
        if self._idle is None:
            self._idle = asyncio.Queue()
            for _ in range(self.settings.workers):
                self._workers.append(await Worker.start(self.settings))
                self._idle.put_nowait(self._workers[-1])
        return await self._idle.get()

    async def _replace(self, worker: Worker) -> None:
        await worker.kill()
        self.killed += 1
        fresh = await Worker.start(self.settings)
        self._workers[self._workers.index(worker)] = fresh
        assert self._idle is not None
        self._idle.put_nowait(fresh)

    async def run(self, publication: Any, calls: Sequence[Call]) -> dict[str, Result]:
        """Evaluate every call; a call that brings its worker down is that call's failure."""
        results: dict[str, Result] = {}
        pending = list(calls)
        while pending:
            worker = await self._take()
            try:
                await worker.run(publication, pending, self.budget_s, results)
                self._idle.put_nowait(worker)  # type: ignore[union-attr]
                return results
            except (TimeoutError, EOFError, OSError, ValueError):
                done = sum(1 for c in pending if c.sid in results)
                results[pending[done].sid] = (False, "killed: time or memory limit exceeded")
                pending = pending[done + 1 :]
                await self._replace(worker)
        return results

    async def run_many(self, publication: Any, calls: Sequence[Call]) -> dict[str, Result]:
        """Spread the calls over the workers."""
        n = max(1, min(self.settings.workers, len(calls)))
        parts = await asyncio.gather(*(self.run(publication, calls[i::n]) for i in range(n)))
        return {k: v for part in parts for k, v in part.items()}

    async def aclose(self) -> None:
        for worker in self._workers:
            await worker.kill()
