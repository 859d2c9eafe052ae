"""Scales whose scaler died: every deployment process watches the coordinator's `scaler`
node, which the session running a scale holds from its `start` to its last phase. When it
goes while the scale is open (the scaler's process died, or its session expired), one of
the watching processes takes the scale over and finishes it (`Scaler.take_over`): without
this, the access points would buffer subscription changes for good and every later scale
and recovery would wait.

A process killed outright is noticed when its session expires (the coordinator's session
timeout, 10 s by default); one that exits closes its session and is noticed at once."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from tidings.elastic.coordination.coordinator import Busy
from tidings.elastic.protocol.scaling import Scaler, ScaleReport
from tidings.elastic.tasks import cancelled

log = logging.getLogger("tidings.elastic")


class Warden:
    def __init__(self, scaler: Scaler, on_report: Callable[[ScaleReport], None]) -> None:
        self.scaler = scaler
        self.on_report = on_report  # a scale it took over, finished
        self.retry_s = 1.0  # after a failure of its own (the coordinator unreachable, say)
        self._task: asyncio.Task[None] | None = None
        self._stopped = False

    def start(self) -> None:
        self.scaler.coordinator.watch_scaler(self._changed)

    def _changed(self, held: bool) -> None:
        if held or self._stopped or (self._task is not None and not self._task.done()):
            return
        self._task = asyncio.get_running_loop().create_task(self._take_over())

    async def _take_over(self) -> None:
        while not self._stopped:
            try:
                report = await self.scaler.take_over()
            except Busy:  # its scaler lives (a new scale), or another process was first
                return
            except Exception:
                log.exception("elastic: taking over a scale whose scaler stopped failed")
                await asyncio.sleep(self.retry_s)
                continue
            if report is not None:
                self.on_report(report)
            return

    async def stop(self) -> None:
        self._stopped = True
        await cancelled(self._task, "the warden's takeover")
