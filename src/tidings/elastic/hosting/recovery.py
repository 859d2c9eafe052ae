"""The deployment's recovery of lost members: when a member of the current views is lost
(its process died, or its coordinator session expired or was evicted), a recovery
(`Scaler.recover`) replaces it with an unassigned running operator or a new local one; a
lost access point is removed from the configuration. Several processes may watch one
deployment: only one runs a given recovery (`begin_scale` is a compare-and-set), the others
wait for its end and look again."""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any

from tidings.elastic.coordination.coordinator import Busy
from tidings.elastic.coordination.records import ClusterConfig, Member
from tidings.errors import ErrorCode

if TYPE_CHECKING:
    from tidings.elastic.hosting.deployment import Deployment

log = logging.getLogger("tidings.elastic")


class Recovery:
    """Looks at the membership at each change (`members_changed`) and runs the recoveries
    it calls for, one at a time, as a task of its own (`task`)."""

    def __init__(self, deployment: Deployment) -> None:
        self.deployment = deployment
        self.expected: set[str] = set()  # every member of the configuration it started with
        self.settle_s = 0.05  # from a change of the membership to a recovery
        self.task: asyncio.Task[None] | None = None
        self._alive: set[str] | None = None  # the membership, as the watch last saw it
        self._changed = False  # the membership changed since the task last looked

    def members_changed(self, members: set[str]) -> None:
        first, self._alive = self._alive is None, members
        if self.deployment.closing or (first and self.expected <= members):
            return  # (at the start, nothing to look up when every member it knows runs)
        self.look_again()

    def look_again(self) -> None:
        """A recovery looks at the membership (again, if one is under way)."""
        self._changed = True  # a recovery under way looks again before it ends
        if self.task is None or self.task.done():
            self.task = asyncio.get_running_loop().create_task(self._run())

    async def _run(self) -> None:
        """Until every member of the current views and every access point runs: a recovery
        at a time (after the scale in progress, which the loss ends)."""
        settle = True
        while not self.deployment.closing:
            self._changed = False
            try:
                async with self.deployment.turn:
                    if await self.once(settle) and not self._changed:
                        return
                    settle = False
            except Busy:  # another process (or scale) is first: after it, look again
                await self._until_idle()
            except Exception:
                log.exception("elastic: a recovery failed to run; trying again")
                await asyncio.sleep(1.0)

    async def once(self, settle: bool = False) -> bool:
        """One recovery, if one is needed; True when nothing is lost. `settle`: when
        something is lost, wait `settle_s` first and look again (the other members a
        process ran go with it, one at a time: one recovery replaces them all)."""
        d = self.deployment
        if settle and not await self._losses():
            return True
        if settle:
            await asyncio.sleep(self.settle_s)
        last = await d.coordinator.scale()
        if last is not None and not last.idle:
            raise Busy(ErrorCode.CONFLICT, detail="a scale is in progress")
        config = await d.coordinator.require_config()
        running = await d.coordinator.members()  # read after the configuration: fresh
        views = [*config.matchers.members, *config.exit_points.members]
        lost = [m for m in views if m not in running]
        lost_aps = [a for a in config.access_points if a not in running]
        # a recovery that failed leaves the access points paused: the next one resumes them
        paused = last is not None and last.kind == "recover" and last.phase == "failed"
        if not lost and not paused:
            if not lost_aps:
                return True
            log.warning("elastic: access point %s lost, removing it", ", ".join(lost_aps))
            report = await d.scaler.scale_access_points(remove=lost_aps)
            if report.outcome != "unchanged":  # else another process removed it first
                d.reports.append(report)
            return False
        log.warning("elastic: %s lost, recovering", ", ".join([*lost, *lost_aps]) or "nothing")
        started: list[str] = []
        try:
            matchers = await self._replace("matcher", config, lost, running, started)
            exit_points = await self._replace("exit_point", config, lost, running, started)
            report = await d.scaler.recover(
                [*lost, *lost_aps], matchers, exit_points, planned=config
            )
        except Busy:
            for member in started:  # replacements of a recovery another process runs
                await d.retire("matcher" if member in d.matchers else "exit_point", {member})
            raise
        d.reports.append(report)
        for member in lost:
            local: dict[str, Any] = d.matchers if member in d.matchers else d.exit_points
            op = local.pop(member, None)
            if op is not None:  # a local operator that failed: release what it holds
                try:
                    await op.stop(crash=True)
                    await op.coordinator.close()
                except Exception:
                    log.warning("elastic: lost operator %s not released", member, exc_info=True)
        return False

    async def _losses(self) -> bool:
        """Whether a member of the views, an access point, or a failed recovery's pause
        calls for a recovery."""
        coordinator = self.deployment.coordinator
        config = await coordinator.require_config()
        running = await coordinator.members()
        members = [*config.matchers.members, *config.exit_points.members, *config.access_points]
        last = await coordinator.scale()
        failed = last is not None and last.kind == "recover" and last.phase == "failed"
        return failed or any(m not in running for m in members)

    async def _until_idle(self) -> None:
        """Until no scale is in progress (another process's recovery, say)."""
        while not self.deployment.closing:
            last = await self.deployment.coordinator.scale()
            if last is None or last.idle:
                return
            await asyncio.sleep(0.05)

    async def _replace(
        self,
        role: str,
        config: ClusterConfig,
        lost: list[str],
        running: dict[str, Member],
        started: list[str],
    ) -> list[str]:
        """The survivors in their order, then a replacement per lost member: an unassigned
        running operator, else a new local one (added to `started`)."""
        members = config.matchers.members if role == "matcher" else config.exit_points.members
        keep = [m for m in members if m not in lost]
        assigned = {*config.matchers.members, *config.exit_points.members}
        idle = [m for m, info in sorted(running.items()) if info.role == role and m not in assigned]
        while len(keep) < len(members):
            if idle:
                keep.append(idle.pop(0))
                continue
            member = await self.deployment.start_operator(role)
            started.append(member)
            keep.append(member)
        return keep
