"""What every operator shares: an id, an inbox, outboxes to peers, a coordinator session,
one loop over its inbox, and the scale watch handed to that loop in order."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Coroutine, Iterable
from typing import Any

from tidings.elastic.coordination.coordinator import Coordinator
from tidings.elastic.coordination.records import Role, ScaleState
from tidings.elastic.protocol import wire
from tidings.elastic.protocol.channels import Inbox, Outboxes, shared_context
from tidings.errors import ErrorCode, TidingsError

log = logging.getLogger("tidings.elastic")


class Operator:
    role: Role

    def __init__(self, member_id: str, coordinator: Coordinator, bind: str) -> None:
        self.id = member_id
        self.coordinator = coordinator
        self._bind = bind
        self._context = shared_context()
        self.inbox: Inbox | None = None
        self.out = Outboxes(self._context)
        self._task: asyncio.Task[None] | None = None
        self._scale_events: asyncio.Queue[ScaleState | None] = asyncio.Queue()
        self._scale_task: asyncio.Task[None] | None = None
        self.started_at = time.monotonic()
        self.counters: dict[str, float] = {}
        self._steps: set[asyncio.Task[None]] = set()  # what `spawn` started, still running
        self.last_batch = 0  # frames in the inbox's last batch: a backlog when large
        self._failure: BaseException | None = None  # a spawned step's, which ended the loop
        self._leaving = False  # it removes its own node: that is no eviction

    def spawn(self, step: Coroutine[Any, Any, None], name: str) -> asyncio.Task[None]:
        """A step that runs beside the inbox loop (a scale's state, built or sent). If it
        fails, the operator fails as if its loop had: crash-only, as `_run` says."""
        task = asyncio.get_running_loop().create_task(step, name=f"{self.id}-{name}")
        self._steps.add(task)
        task.add_done_callback(self._step_done)
        return task

    def _step_done(self, task: asyncio.Task[None]) -> None:
        self._steps.discard(task)
        if task.cancelled() or (error := task.exception()) is None:
            return
        self.count("errors")
        log.error("%s failed in %s", self.id, task.get_name(), exc_info=error)
        self._fail(error)

    def _fail(self, error: BaseException) -> None:
        """End the loop and every step: `wait` raises `error`."""
        if self._failure is None and self._task is not None and not self._task.done():
            self._failure = error
            self._task.cancel()  # `_run` leaves the deployment on its way out
            for other in (self._scale_task, *self._steps):  # (no `ready` after it left)
                if other is not None:
                    other.cancel()

    def _gone(self) -> None:
        """Its node is gone while it runs: another process found it unreachable and evicted
        it (`PeerWatch`), or its session expired. The views no longer count on it (a
        recovery replaces it): it stops, crash-only, rather than run on outside them."""
        if self._leaving or not self.running:
            return
        log.warning("%s is no longer a member of the deployment: it stops", self.id)
        self._fail(
            TidingsError(
                ErrorCode.UNAVAILABLE,
                detail=f"operator {self.id} was removed from the deployment "
                "(unreachable, or its ZooKeeper session expired)",
            )
        )

    def count(self, name: str, by: float = 1.0) -> None:
        self.counters[name] = self.counters.get(name, 0.0) + by

    async def start(self) -> None:
        self.inbox = Inbox(self._context, self._bind)
        await self.coordinator.register(self.id, self.role, self.inbox.address)
        self.coordinator.watch_member(self.id, self._gone)
        await self.prepare()
        self._task = asyncio.get_running_loop().create_task(self._run(), name=f"{self.id}-inbox")
        self._scale_task = asyncio.get_running_loop().create_task(
            self._follow_scales(), name=f"{self.id}-scales"
        )
        self.coordinator.watch_scale(self._scale_events.put_nowait)

    async def prepare(self) -> None:
        """Read what the operator needs before its first message (the configuration)."""

    async def _run(self) -> None:
        try:
            await self._loop()
        except asyncio.CancelledError:
            if self._failure is not None:  # a spawned step failed: leave, as a failed batch does
                await self._leave()
            raise

    async def _loop(self) -> None:
        assert self.inbox is not None
        while True:
            batch = await self.inbox.receive()
            self.last_batch = len(batch)
            if any(isinstance(m, wire.Stop) for m in batch):
                await self.handle([m for m in batch if not isinstance(m, wire.Stop)])
                return
            try:
                await self.handle(batch)
            except Exception:
                self.count("errors")
                log.exception("%s failed on a batch of %d messages", self.id, len(batch))
                await self._leave()
                raise
            # The loop's turn for the rest (spawned steps, the coordinator's watches, the
            # process's other operators): with frames waiting, the inbox's receive answers at
            # once and never yields. An old matcher behind a backlog reported `done` 31 s
            # after its `change` (every step it had spawned waited), and the scale failed.
            await asyncio.sleep(0)

    async def _leave(self) -> None:
        """Crash-only: leave the deployment, whose recovery replaces this operator and sends
        again what it held (rather than a member that answers nothing)."""
        self._leaving = True
        try:
            await self.coordinator.leave(self.id)
        except Exception:  # its session's end removes it all the same
            log.warning("%s could not leave the deployment", self.id, exc_info=True)

    async def _follow_scales(self) -> None:
        while True:
            state = await self._scale_events.get()
            if state is not None:
                try:
                    await self.on_scale(state)
                except Exception:
                    self.count("errors")
                    log.exception("%s failed on scale %d (%s)", self.id, state.id, state.phase)

    async def handle(self, batch: list[wire.Message]) -> None:
        raise NotImplementedError

    async def on_scale(self, state: ScaleState) -> None:
        """A phase of a scale, told by the coordinator."""

    async def resolve(self, peers: Iterable[str], missing_ok: bool = False) -> None:
        """Look up the inbox addresses of peers not known yet (`missing_ok`: skip those
        that are not running, instead of raising UNAVAILABLE)."""
        for peer in peers:
            if not self.out.knows(peer):
                try:
                    self.out.know(peer, await self.coordinator.address_of(peer))
                except TidingsError:
                    if not missing_ok:
                        raise

    @property
    def running(self) -> bool:
        return self._task is not None and not self._task.done()

    async def stop(self, crash: bool = False) -> None:
        """End the loops, leave the membership, close the sockets. `crash`: as a process that
        dies, what is queued to peers is dropped instead of sent."""
        self._leaving = True
        for task in (self._task, self._scale_task, *self._steps):
            if task is not None:
                task.cancel()
                try:
                    await task
                except asyncio.CancelledError:
                    pass
                except Exception:  # (a step's failure was logged when it failed)
                    log.warning(
                        "%s: %s ended with an error", self.id, task.get_name(), exc_info=True
                    )
        try:
            await self.coordinator.leave(self.id)
        finally:
            self._close(crash)

    def _close(self, crash: bool) -> None:
        """Close the sockets (the context is the process's). `crash`: drop what is queued;
        otherwise it still goes out, for up to 2 s, behind the scenes."""
        self.out.close(linger=0 if crash else None)
        if self.inbox is not None:
            self.inbox.close()

    async def wait(self) -> None:
        """Until the inbox loop ends (a `Stop`, or a failure, which is raised)."""
        assert self._task is not None
        try:
            await self._task
        except asyncio.CancelledError:
            if self._failure is not None:
                raise self._failure from None
            raise
