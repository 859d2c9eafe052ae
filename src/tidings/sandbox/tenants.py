"""Workers of one subscriber each: subscriber code never shares a process with another's.

A worker, once bound to a subscriber (a tenant), serves it for its whole life and is never
given to another: module-level state, patched modules, filled memory and compiled code stay
with their owner. A few spare workers wait, started fresh, so a subscriber's first call
binds one at once; a new spare starts in the background. At most `max_workers` full
workers' worth live (spares included; a lean one, below, counts `1 / LEAN_PER_FULL`): past it
the least recently used idle tenant's worker whose room suffices is killed, never reused.
A worker the kernel or the watchdog ended is forgotten; its tenant's next call binds
another.

A worker is *lean* (no library: about a tenth of a full one's start, which loads the library
and its models for about a second of CPU) unless its tenant's code may import the library
(`compile.needs_library`); spares are lean. A tenant bound to a lean worker whose new code
needs the library gets a full worker instead, its lean one killed.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from tidings.sandbox.cgroup import MemoryCgroups
from tidings.sandbox.compile import needs_library
from tidings.sandbox.cpu import tree_cpu_s
from tidings.sandbox.pool import (
    START_BUDGET_S,
    Result,
    Spawned,
    WorkerCall,
    WorkerDied,
    WorkerProcess,
    reap_all,
)

log = logging.getLogger("tidings.sandbox")
# a full worker holds about 150 MB (the library and its models), a lean one about 24 MB
LEAN_PER_FULL = 6
# what a start is expected to take before one was measured here (seconds): lean, full
FIRST_GUESS_S = {False: 0.4, True: 1.5}
Ran = tuple[dict[str, Result], list[WorkerCall]]  # results, the calls not reached


@dataclass(slots=True)
class Tenant:
    worker: WorkerProcess | None = None
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)


def need_library(calls: Sequence[WorkerCall]) -> bool:
    return any(c.kind == "code" and needs_library(c.source) for c in calls)


class TenantWorkers:
    def __init__(
        self,
        argv: Sequence[str],
        budget_s: float,
        max_workers: int,
        spares: int = 0,
        cgroups: MemoryCgroups | None = None,
        cpu_s: float | None = None,
    ) -> None:
        self.argv, self.cgroups = list(argv), cgroups
        self.lean_argv = [*argv, "--lean"]
        self.budget_s = budget_s  # the watchdog's wall clock per call
        self.cpu_s = cpu_s  # each call's CPU budget, watched from here (pool.cpu_cap_s)
        self.max_workers = max(1, max_workers)
        self.capacity = self.max_workers * LEAN_PER_FULL  # in lean workers' worth
        self.spares = min(spares, self.max_workers - 1)
        self._tenants: OrderedDict[str, Tenant] = OrderedDict()  # least recently used first
        self._spare: list[WorkerProcess] = []
        self._starting: set[asyncio.Task[None]] = set()  # spares being started
        self._making: set[asyncio.Future[Any]] = set()  # every start under way
        self._closed = False
        self._dying: list[WorkerProcess] = []
        self.spawned: Spawned = set()
        self.killed = 0  # workers the kernel or the watchdog ended
        self.evicted = 0  # idle tenants' workers killed to make room
        self.started = 0
        self.ms: dict[str, float] = {}  # subscription id -> its last call's CPU time (ms)
        self.start_s = dict(FIRST_GUESS_S)  # by fullness: a start's wall time, smoothed

    def weight(self) -> int:
        """The live workers in lean workers' worth (spares being started are lean)."""
        held = [t.worker for t in self._tenants.values() if t.worker is not None]
        return sum(map(_weight, [*held, *self._spare])) + len(self._starting)

    def used_cpu_s(self, owner: str) -> float | None:
        """The CPU time `owner`'s worker has used (None: it has none, or it is gone)."""
        tenant = self._tenants.get(owner)
        if tenant is None or tenant.worker is None:
            return None
        return tree_cpu_s(tenant.worker.proc.pid)

    def expected_s(self, owner: str, calls: Sequence[WorkerCall]) -> float:
        """What readying `owner` a worker for `calls` is expected to take: nothing when it
        holds one fit for them, else a start of the kind they need (spares are lean)."""
        full = need_library(calls)
        tenant = self._tenants.get(owner)
        worker = tenant.worker if tenant is not None else None
        if worker is not None and not worker.dead and not (full and worker.lean):
            return 0.0
        if not full and self._spare:
            return 0.0
        return self.start_s[full]

    def owner_of(self, worker: WorkerProcess) -> str | None:
        return next((o for o, t in self._tenants.items() if t.worker is worker), None)

    async def ready(self, owner: str, calls: Sequence[WorkerCall] = ()) -> str | None:
        """Bind `owner` a worker fit for `calls` if it has none (a spare, or one started
        now); None when it has one, else why it cannot."""
        full = need_library(calls)
        tenant = self._tenant(owner)
        async with tenant.lock:
            if tenant.worker is not None and full and tenant.worker.lean:
                worker, tenant.worker = tenant.worker, None
                await worker.kill()  # the library cannot be loaded into it now
            if tenant.worker is None:
                try:
                    tenant.worker = await self._bind(full)
                except (OSError, RuntimeError, TimeoutError) as exc:
                    return f"sandbox worker failed to start: {exc}"[:300]
        return None

    async def run(self, owner: str, publication: str, calls: Sequence[WorkerCall]) -> Ran:
        """Run `calls` (all `owner`'s) in its worker, one after another, until a call ends
        the worker: that call fails; the rest come back to be run again."""
        if (problem := await self.ready(owner, calls)) is not None:
            return {c.sid: (False, problem) for c in calls}, []
        tenant = self._tenant(owner)
        results: dict[str, Result] = {}
        async with tenant.lock:
            if tenant.worker is None or tenant.worker.dead:  # ended meanwhile: next turn
                tenant.worker = None
                return results, list(calls)
            try:
                await tenant.worker.run(
                    publication, calls, self.budget_s, results, self.ms, self.cpu_s
                )
            except asyncio.CancelledError:
                self._dying.append(tenant.worker)  # killed (pool.py), reaped at the close
                tenant.worker = None  # its next call binds another
                raise
            except WorkerDied as died:
                tenant.worker = None
                self.killed += 1
                done = sum(1 for c in calls if c.sid in results)
                results[calls[done].sid] = (False, died.error)
                return results, list(calls[done + 1 :])
        return results, []

    def _tenant(self, owner: str) -> Tenant:
        tenant = self._tenants.setdefault(owner, Tenant())
        self._tenants.move_to_end(owner)
        return tenant

    async def _bind(self, full: bool) -> WorkerProcess:
        await self._make_room(LEAN_PER_FULL if full else 1)
        fit = [w for w in self._spare if not full or not w.lean]
        if fit:
            self._spare.remove(fit[-1])
            worker = fit[-1]
        else:
            worker = await self._start(full)
        self._refill()
        return worker

    async def _start(self, full: bool = False) -> WorkerProcess:
        """A fresh worker. Its start is not cut short when its caller is cancelled (a
        process half made would outlive the runner): it becomes a spare instead."""
        self.started += 1
        task = asyncio.ensure_future(self._spawn(full))
        self._making.add(task)
        task.add_done_callback(self._making.discard)
        try:
            return await asyncio.shield(task)
        except asyncio.CancelledError:
            task.add_done_callback(self._orphaned)
            raise

    async def _spawn(self, full: bool) -> WorkerProcess:
        argv = self.argv if full else self.lean_argv
        began = time.monotonic()
        worker = await WorkerProcess.start(argv, self.cgroups, self.spawned)
        self.start_s[full] = 0.7 * self.start_s[full] + 0.3 * (time.monotonic() - began)
        worker.lean = not full
        return worker

    def _orphaned(self, task: asyncio.Future[WorkerProcess]) -> None:
        if task.cancelled() or task.exception() is not None:
            return
        (self._dying if self._closed else self._spare).append(task.result())

    async def _make_room(self, needed: int) -> None:
        """Kill idle tenants' workers until `needed` more fits: the least recently used of
        those whose room alone suffices first, so a full worker's start does not end a lean
        neighbour's worker (a sixth of the room) on its way to a full one's."""
        for alone in (True, False):
            for owner, tenant in list(self._tenants.items()):
                excess = self.weight() + needed - self.capacity
                if excess <= 0:
                    return
                worker = tenant.worker
                if worker is None or tenant.lock.locked():
                    continue
                if alone and _weight(worker) < excess:
                    continue
                tenant.worker = None
                del self._tenants[owner]
                self.evicted += 1
                await worker.kill()

    def _refill(self) -> None:
        while len(self._spare) + len(self._starting) < self.spares:
            if self.weight() + 1 > self.capacity:
                return
            task = asyncio.get_running_loop().create_task(self._spare_up())
            self._starting.add(task)
            task.add_done_callback(self._starting.discard)

    async def _spare_up(self) -> None:
        try:
            worker = await self._start()
        except (OSError, RuntimeError, TimeoutError) as exc:
            log.warning("a spare sandbox worker failed to start: %s", exc)
            return
        if self._closed:
            await worker.kill()
        else:
            self._spare.append(worker)

    async def aclose(self) -> None:
        self._closed = True
        starts = [*self._starting, *self._making]
        if starts:  # not cancelled: a process half made would be left behind
            await asyncio.wait(starts, timeout=START_BUDGET_S)
        workers = [t.worker for t in self._tenants.values() if t.worker is not None]
        for worker in [*workers, *self._spare, *self._dying]:
            await worker.kill()
        self._tenants.clear()
        self._spare.clear()
        await reap_all(self.spawned)  # what a cancellation left: killed, waited for


def _weight(worker: WorkerProcess) -> int:
    return 1 if worker.lean else LEAN_PER_FULL
