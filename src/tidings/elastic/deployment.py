"""An elastic deployment run from one process: its access points, matchers and exit points
as asyncio tasks (each with its own sockets and coordinator session), the scaler, and the
commands `serve`, the admin call and the tests use (`scale`, `status`). Operators started
elsewhere (`tidings matcher`, `tidings exit-point`) join it through the coordinator.

It watches the membership: when a member of the current views is lost (its process died,
or its coordinator session expired), it runs a recovery (`Scaler.recover`) with a
replacement for each lost member, an unassigned running operator or a new local one."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import tempfile
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from tidings.elastic import wire
from tidings.elastic.access_point import AccessPointOperator
from tidings.elastic.autoscaler import Autoscaler, Policy
from tidings.elastic.coordinator import ClusterConfig, Coordinator, View
from tidings.elastic.exit_point import ExitPointOperator, Sink
from tidings.elastic.matcher import MatcherOperator
from tidings.elastic.operator import Operator
from tidings.elastic.scaling import Scaler, ScaleReport
from tidings.errors import ErrorCode, TidingsError
from tidings.model import Publication, Subscription

log = logging.getLogger("tidings.elastic")


def record_of(sub: Subscription) -> wire.SubscriptionRecord:
    return wire.SubscriptionRecord(
        sub.id, sub.subscriber_id, list(sub.topics), wire.wire_predicates(sub.predicates)
    )


class Deployment:
    """`async with Deployment(zk, sink_factory, matchers=3) as d: await d.publish(pubs)`."""

    def __init__(
        self,
        zookeeper: str,
        sink_factory: Callable[[], Sink],
        *,
        cluster: str | None = None,
        matchers: int = 1,
        exit_points: int = 1,
        transport: str = "ipc",
        host: str = "127.0.0.1",
        matcher_class: type[MatcherOperator] = MatcherOperator,
        exit_point_class: type[ExitPointOperator] = ExitPointOperator,
        autoscale: Policy | None = None,
    ) -> None:
        if matchers < 1 or exit_points < 1:
            raise TidingsError(
                ErrorCode.CONFIG_INVALID, field="matchers", detail="at least one of each operator"
            )
        self.zookeeper = zookeeper
        self.cluster = cluster or f"c{uuid.uuid4().hex[:10]}"
        self.sink_factory = sink_factory
        self._initial = (matchers, exit_points)
        self._matcher_view = matchers
        self._transport, self._host = transport, host
        self._tmp: tempfile.TemporaryDirectory[str] | None = None
        self.access_point: AccessPointOperator | None = None
        self.matchers: dict[str, MatcherOperator] = {}
        self.exit_points: dict[str, ExitPointOperator] = {}
        self.coordinator = Coordinator(zookeeper, self.cluster)
        self.scaler = Scaler(self.coordinator)
        self._numbers = {"m": 0, "e": 0}
        self.reports: list[ScaleReport] = []
        self._scaling = asyncio.Lock()
        self._matcher_class = matcher_class  # tests put in one that pauses a scale
        self._exit_point_class = exit_point_class
        self._policy = autoscale  # None: no autoscaler (the default)
        self.autoscaler: Autoscaler | None = None
        self._alive: set[str] = set()
        self._recovering: asyncio.Task[None] | None = None
        self._closing = False

    # ------------------------------------------------------------ life cycle

    def _bind(self, member: str) -> str:
        if self._transport == "tcp":
            return f"tcp://{self._host}:*"
        if self._tmp is None:
            self._tmp = tempfile.TemporaryDirectory(prefix="tidings-elastic-")
        return f"ipc://{Path(self._tmp.name) / member}"

    def _name(self, kind: str) -> str:
        self._numbers[kind] += 1
        return f"{kind}{self._numbers[kind]}-{uuid.uuid4().hex[:6]}"

    async def start(self) -> Deployment:
        await self.coordinator.start()
        found = await self.coordinator.config()
        if found is not None:
            raise TidingsError(
                ErrorCode.CONFLICT,
                detail=f"the elastic deployment {self.cluster!r} already runs; join it with "
                "`tidings matcher` / `tidings exit-point`, or choose another --cluster",
            )
        matchers, exit_points = self._initial
        m_ids = [self._name("m") for _ in range(matchers)]
        e_ids = [self._name("e") for _ in range(exit_points)]
        ap_id = f"ap-{uuid.uuid4().hex[:8]}"
        config = ClusterConfig(View(0, m_ids), View(0, e_ids), [ap_id])
        if not await self.coordinator.create_config(config):
            raise TidingsError(ErrorCode.CONFLICT, detail=f"{self.cluster!r} already exists")
        for eid in e_ids:
            await self._start_exit_point(eid)
        for mid in m_ids:
            await self._start_matcher(mid)
        self.access_point = AccessPointOperator(ap_id, await self._session(), self._bind(ap_id))
        await self.access_point.start()
        if self._policy is not None:
            self.autoscaler = Autoscaler(self, self._policy)
            self.autoscaler.start()
        self.coordinator.watch_members(self._members_changed)
        return self

    async def _session(self) -> Coordinator:
        coordinator = Coordinator(self.zookeeper, self.cluster)
        await coordinator.start()
        return coordinator

    async def _start_matcher(self, member: str) -> MatcherOperator:
        op = self._matcher_class(member, await self._session(), self._bind(member))
        await op.start()
        self.matchers[member] = op
        return op

    async def _start_exit_point(self, member: str) -> ExitPointOperator:
        op = self._exit_point_class(
            member, await self._session(), self._bind(member), self.sink_factory()
        )
        await op.start()
        self.exit_points[member] = op
        return op

    async def __aenter__(self) -> Deployment:
        try:
            return await self.start()
        except BaseException:
            await self.close()
            raise

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        self._closing = True
        if self._recovering is not None:
            self._recovering.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._recovering
        if self.autoscaler is not None:
            await self.autoscaler.stop()
        operators: list[Operator] = []
        if self.access_point is not None:
            operators.append(self.access_point)
        operators += [*self.matchers.values(), *self.exit_points.values()]
        for op in operators:
            with contextlib.suppress(Exception):
                await op.stop()
                await op.coordinator.close()
        self.matchers.clear()
        self.exit_points.clear()
        with contextlib.suppress(Exception):
            await self.coordinator.close()
        if self._tmp is not None:
            self._tmp.cleanup()

    # ------------------------------------------------------------ the broker's side

    @property
    def ap(self) -> AccessPointOperator:
        if self.access_point is None:
            raise RuntimeError("the deployment has not started")
        return self.access_point

    async def publish(self, pubs: Sequence[Publication]) -> list[int]:
        return await self.ap.publish(pubs)

    def subscribe(self, sub: Subscription) -> None:
        if sub.kind in ("topic", "content"):
            self.ap.subscribe(record_of(sub))

    def unsubscribe(self, subscription_id: str) -> None:
        self.ap.unsubscribe(subscription_id)

    # ------------------------------------------------------------ scaling

    def matcher_count(self) -> int:
        """Matchers in the current view (local or joined from elsewhere)."""
        return self._matcher_view

    def signals(self) -> tuple[list[float], int]:
        """The autoscaler's: publish-to-commit times since the last call, and the backlog."""
        return self.ap.take_latencies(), self.ap.backlog()

    async def scale(
        self, matchers: int | None = None, exit_points: int | None = None
    ) -> list[ScaleReport]:
        """Scale each layer to the given number of instances (matchers first), starting
        local operators for what is missing and stopping those that left. Operators that
        joined from elsewhere and wait unassigned are used before new local ones."""
        for count, name in ((matchers, "matchers"), (exit_points, "exit_points")):
            if count is not None and not 1 <= count <= 64:
                raise TidingsError(
                    ErrorCode.INVALID_FIELD, field=name, detail=f"{name} must be 1 to 64"
                )
        reports = []
        async with self._scaling:
            if matchers is not None:
                reports.append(await self._scale_layer("matcher", matchers))
            if exit_points is not None:
                reports.append(await self._scale_layer("exit_point", exit_points))
        self.reports += reports
        return reports

    async def _scale_layer(self, role: str, count: int) -> ScaleReport:
        config = await self.coordinator.require_config()
        view = config.matchers if role == "matcher" else config.exit_points
        current = list(view.members)
        if count <= len(current):
            new = current[:count]
        else:
            members = await self.coordinator.members()
            idle = [
                m for m, info in sorted(members.items()) if info.role == role and m not in current
            ]
            new = current + idle[: count - len(current)]
            while len(new) < count:
                if role == "matcher":
                    new.append((await self._start_matcher(self._name("m"))).id)
                else:
                    new.append((await self._start_exit_point(self._name("e"))).id)
        if role == "matcher":
            report = await self.scaler.scale_matchers(new)
        else:
            report = await self.scaler.scale_exit_points(new)
        if report.outcome in ("done", "failed") and role == "matcher":
            self._matcher_view = len(new)  # failed: past `change`, the new view stands
        if report.outcome == "done":
            await self._retire(role, set(current) - set(new))
        elif report.outcome == "aborted":
            await self._retire(role, set(new) - set(current))
        return report

    async def _retire(self, role: str, members: set[str]) -> None:
        """Stop the local operators that left the view (remote ones stay, unassigned)."""
        local: dict[str, Any] = self.matchers if role == "matcher" else self.exit_points
        for member in members:
            op = local.pop(member, None)
            if op is not None:
                await op.stop()
                await op.coordinator.close()

    # ------------------------------------------------------------ recovery

    def _members_changed(self, members: set[str]) -> None:
        self._alive = members
        if self._closing:
            return
        if self._recovering is None or self._recovering.done():
            self._recovering = asyncio.get_running_loop().create_task(self._recover())

    async def _recover(self) -> None:
        """Until every member of the current views runs: a recovery at a time (after the
        scale in progress, which the loss ends)."""
        failures = 0
        while True:
            async with self._scaling:
                config = await self.coordinator.require_config()
                views = [*config.matchers.members, *config.exit_points.members]
                lost = [m for m in views if m not in self._alive]
                if not lost:
                    return
                log.warning("elastic: %s lost, recovering", ", ".join(lost))
                matchers = await self._replace("matcher", config.matchers.members, lost)
                exit_points = await self._replace("exit_point", config.exit_points.members, lost)
                report = await self.scaler.recover(lost, matchers, exit_points)
                self.reports.append(report)
                for member in lost:
                    local: dict[str, Any] = (
                        self.matchers if member in self.matchers else self.exit_points
                    )
                    op = local.pop(member, None)
                    if op is not None:  # a local operator that failed: release what it holds
                        with contextlib.suppress(Exception):
                            await op.stop(crash=True)
                            await op.coordinator.close()
                if report.outcome == "done":
                    self._matcher_view = len(matchers)
                    failures = 0
                else:  # another loss meanwhile: again, not at once
                    failures += 1
            if failures:
                await asyncio.sleep(min(0.1 * 2**failures, 5.0))

    async def _replace(self, role: str, members: list[str], lost: list[str]) -> list[str]:
        """The survivors in their order, then a replacement per lost member: an unassigned
        running operator, else a new local one."""
        keep = [m for m in members if m not in lost]
        running = await self.coordinator.members()
        config = await self.coordinator.require_config()
        assigned = {*config.matchers.members, *config.exit_points.members}
        idle = [m for m, info in sorted(running.items()) if info.role == role and m not in assigned]
        while len(keep) < len(members):
            if idle:
                keep.append(idle.pop(0))
            elif role == "matcher":
                keep.append((await self._start_matcher(self._name("m"))).id)
            else:
                keep.append((await self._start_exit_point(self._name("e"))).id)
        return keep

    async def status(self) -> dict[str, Any]:
        found = await cluster_status(self.coordinator)
        found["last_scales"] = [r.to_json() for r in self.reports[-5:]]
        return found


async def cluster_status(coordinator: Coordinator) -> dict[str, Any]:
    """The views, the running operators (and which are unassigned), the scale in progress."""
    config = await coordinator.require_config()
    members = await coordinator.members()
    scale = await coordinator.scale()
    assigned = {*config.matchers.members, *config.exit_points.members, *config.access_points}
    return {
        "cluster": coordinator.cluster,
        "zookeeper": coordinator.hosts,
        "matchers": {"view": config.matchers.view, "members": config.matchers.members},
        "exit_points": {"view": config.exit_points.view, "members": config.exit_points.members},
        "access_points": config.access_points,
        "running": {m: info.role for m, info in sorted(members.items())},
        "unassigned": sorted(set(members) - assigned),
        "missing": sorted(assigned - set(members)),
        "scale": None
        if scale is None
        else {"id": scale.id, "kind": scale.kind, "phase": scale.phase, "reason": scale.reason},
    }
