"""Workers of one subscriber each: subscriber code never shares a process with another's.

A worker, once bound to a subscriber (a tenant), serves it for its whole life and is never
given to another: module-level state, patched modules, filled memory and compiled code stay
with their owner. A few spare workers wait, started fresh, so a subscriber's first call
binds one at once; a new spare starts in the background. At most `max_workers` live (spares
included): past it the least recently used idle tenant's worker is killed, never reused.
A worker the kernel or the watchdog ended is forgotten; its tenant's next call binds
another.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field

from tidings.sandbox.cgroup import MemoryCgroups
from tidings.sandbox.pool import Result, WorkerCall, WorkerDied, WorkerProcess

log = logging.getLogger("tidings.sandbox")
Ran = tuple[dict[str, Result], list[WorkerCall]]  # results, the calls not reached


@dataclass(slots=True)
class Tenant:
    worker: WorkerProcess | None = None
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)


class TenantWorkers:
    def __init__(
        self,
        argv: Sequence[str],
        budget_s: float,
        max_workers: int,
        spares: int = 0,
        cgroups: MemoryCgroups | None = None,
    ) -> None:
        self.argv, self.cgroups = list(argv), cgroups
        self.budget_s = budget_s  # the watchdog's wall clock per call
        self.max_workers = max(1, max_workers)
        self.spares = min(spares, self.max_workers - 1)
        self._tenants: OrderedDict[str, Tenant] = OrderedDict()  # least recently used first
        self._spare: list[WorkerProcess] = []
        self._starting: set[asyncio.Task[None]] = set()
        self.killed = 0  # workers the kernel or the watchdog ended
        self.evicted = 0  # idle tenants' workers killed to make room
        self.started = 0
        self.ms: dict[str, float] = {}  # subscription id -> its last call's wall time

    def live(self) -> int:
        bound = sum(1 for t in self._tenants.values() if t.worker is not None)
        return bound + len(self._spare) + len(self._starting)

    def owner_of(self, worker: WorkerProcess) -> str | None:
        return next((o for o, t in self._tenants.items() if t.worker is worker), None)

    async def run(self, owner: str, publication: str, calls: Sequence[WorkerCall]) -> Ran:
        """Run `calls` (all `owner`'s) in its worker, one after another, until a call ends
        the worker: that call fails; the rest come back to be run again."""
        tenant = self._tenants.setdefault(owner, Tenant())
        self._tenants.move_to_end(owner)
        results: dict[str, Result] = {}
        async with tenant.lock:
            if tenant.worker is None:
                try:
                    tenant.worker = await self._bind()
                except (OSError, RuntimeError, TimeoutError) as exc:
                    error = f"sandbox worker failed to start: {exc}"[:300]
                    return {c.sid: (False, error) for c in calls}, []
            try:
                await tenant.worker.run(publication, calls, self.budget_s, results, self.ms)
            except WorkerDied as died:
                tenant.worker = None
                self.killed += 1
                done = sum(1 for c in calls if c.sid in results)
                results[calls[done].sid] = (False, died.error)
                return results, list(calls[done + 1 :])
        return results, []

    async def _bind(self) -> WorkerProcess:
        await self._make_room()
        worker = self._spare.pop() if self._spare else await self._start()
        self._refill()
        return worker

    async def _start(self) -> WorkerProcess:
        self.started += 1
        return await WorkerProcess.start(self.argv, self.cgroups)

    async def _make_room(self) -> None:
        """Kill least recently used idle tenants' workers until one more fits."""
        for owner, tenant in list(self._tenants.items()):
            if self.live() < self.max_workers:
                return
            if tenant.worker is not None and not tenant.lock.locked():
                worker, tenant.worker = tenant.worker, None
                del self._tenants[owner]
                self.evicted += 1
                await worker.kill()

    def _refill(self) -> None:
        while len(self._spare) + len(self._starting) < self.spares:
            if self.live() >= self.max_workers:
                return
            task = asyncio.get_running_loop().create_task(self._spare_up())
            self._starting.add(task)
            task.add_done_callback(self._starting.discard)

    async def _spare_up(self) -> None:
        try:
            self._spare.append(await self._start())
        except (OSError, RuntimeError, TimeoutError) as exc:
            log.warning("a spare sandbox worker failed to start: %s", exc)

    async def aclose(self) -> None:
        for task in list(self._starting):
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        workers = [t.worker for t in self._tenants.values() if t.worker is not None]
        for worker in [*workers, *self._spare]:
            await worker.kill()
        self._tenants.clear()
        self._spare.clear()
