"""An elastic deployment run from one process: its access points, matchers and exit points
as asyncio tasks (each with its own sockets and coordinator session), the scaler, and the
commands `serve`, the admin call and the tests use (`scale`, `status`). Operators started
elsewhere (`tidings matcher`, `tidings exit-point`) join it through the coordinator.

It watches the membership: when a member of the current views is lost (its process died,
or its coordinator session expired), it runs a recovery (`recovery.Recovery`) with a
replacement for each lost member, an unassigned running operator or a new local one; lost
access points are removed from the configuration. Several processes may watch one
deployment: only one runs a given recovery, the others wait and look again. The other
processes' operators are watched through their connections, and one unreachable is evicted
(`evictions.Evictions`).

Access points: `start(join=True)` (or `Deployment(..., join=True)`) on a running cluster
starts only an access point, which joins `config.access_points` (a scale of kind
`access_points`, in its turn); `close` makes an access point that is not the last one leave
(new publications refused, the pending ones answered, then out of the configuration). The
last one closing is the whole deployment closing: its configuration stays behind, and the
next `start` takes it over (a cluster with no running access point is dead)."""

from __future__ import annotations

import asyncio
import logging
import tempfile
import uuid
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

from tidings.elastic.coordination.coordinator import Coordinator
from tidings.elastic.coordination.records import ClusterConfig, View
from tidings.elastic.coordination.warden import Warden
from tidings.elastic.hosting.autoscaler import Autoscaler, Policy
from tidings.elastic.hosting.evictions import Evictions
from tidings.elastic.hosting.recovery import Recovery
from tidings.elastic.operators.access_point import AccessPointOperator
from tidings.elastic.operators.exit_point import ExitPointOperator, Sink
from tidings.elastic.operators.matcher import MatcherOperator
from tidings.elastic.operators.operator import Operator
from tidings.elastic.protocol import wire
from tidings.elastic.protocol.scaling import Scaler, ScaleReport, in_turn
from tidings.elastic.tasks import cancelled
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
        join: bool = False,
        leave_timeout_s: float = 10.0,
        turn_timeout_s: float = 60.0,
        unreachable_s: float = 1.0,
    ) -> None:
        if matchers < 1 or exit_points < 1:
            raise TidingsError(
                ErrorCode.CONFIG_INVALID, field="matchers", detail="at least one of each operator"
            )
        self.zookeeper = zookeeper
        self.cluster = cluster or f"c{uuid.uuid4().hex[:10]}"
        self.sink_factory = sink_factory
        self._initial = (matchers, exit_points)
        self._transport, self._host = transport, host
        self._tmp: tempfile.TemporaryDirectory[str] | None = None
        self.access_point: AccessPointOperator | None = None
        self.matchers: dict[str, MatcherOperator] = {}
        self.exit_points: dict[str, ExitPointOperator] = {}
        self.coordinator = Coordinator(zookeeper, self.cluster)
        self.scaler = Scaler(self.coordinator)
        self.warden = Warden(self.scaler, self._taken_over)  # scales whose scaler died
        self._numbers = {"m": 0, "e": 0}
        self.reports: list[ScaleReport] = []
        self.turn = asyncio.Lock()  # one scale or recovery at a time from this process
        self._matcher_class = matcher_class  # tests put in one that pauses a scale
        self._exit_point_class = exit_point_class
        self._policy = autoscale  # None: no autoscaler (the default)
        self.autoscaler: Autoscaler | None = None
        self._leading: asyncio.Task[None] | None = None  # waiting to run the autoscaler
        self.closing = False
        self._closed = False
        self._join = join  # start(): join the cluster when it runs (else CONFLICT)
        self.joined = False  # this access point joined a running cluster (it did not create it)
        self.leave_timeout_s = leave_timeout_s  # on close: its pending publications answered
        self.turn_timeout_s = turn_timeout_s  # joining / leaving: waiting for a scale's end
        self.recovery = Recovery(self)
        # the other processes' operators, watched through connections of their own: one
        # unreachable for `unreachable_s` is evicted (0: left to its session's expiry)
        self.evictions = Evictions(
            self.coordinator, self._local, lambda: self.closing, unreachable_s
        )

    # ------------------------------------------------------------ life cycle

    def _start_autoscaler(self, policy: Policy) -> None:
        self.autoscaler = Autoscaler(self, policy)
        self.autoscaler.start()
        log.info("elastic: access point %s runs the autoscaler", self.ap.id)

    async def _lead_autoscaler(self, policy: Policy) -> None:
        """Once the process that runs the autoscaler has gone (its session with it), this
        one runs it."""
        await self.coordinator.lead("autoscaler")
        if not self.closing:
            self._start_autoscaler(policy)

    def _bind(self, member: str) -> str:
        if self._transport == "tcp":
            return f"tcp://{self._host}:*"
        if self._tmp is None:
            self._tmp = tempfile.TemporaryDirectory(prefix="tidings-elastic-")
        return f"ipc://{Path(self._tmp.name) / member}"

    def _name(self, kind: str) -> str:
        self._numbers[kind] += 1
        return f"{kind}{self._numbers[kind]}-{uuid.uuid4().hex[:6]}"

    async def start(self, join: bool | None = None) -> Deployment:
        """Create the cluster (matchers, exit points and an access point); or, `join`, add
        an access point to the cluster when it already runs. A cluster whose access points
        are all gone (its brokers stopped or died) is taken over, as if it did not exist.
        Without `join`, a running cluster is a CONFLICT."""
        join = self._join if join is None else join
        try:
            await self.coordinator.start()
            ap_id = f"ap-{uuid.uuid4().hex[:8]}"
            # registered before it creates or joins: a running cluster has a running one
            self.access_point = AccessPointOperator(
                ap_id, await self._session(), self._bind(ap_id), admit=lambda: self._admit(join)
            )
            await self.access_point.start()
            config = await self.coordinator.require_config()
            self.recovery.expected = {
                *config.matchers.members,
                *config.exit_points.members,
                *config.access_points,
            }
            if self._policy is not None:  # one process of the deployment runs it
                if await self.coordinator.lead("autoscaler", blocking=False):
                    self._start_autoscaler(self._policy)
                else:
                    self._leading = asyncio.get_running_loop().create_task(
                        self._lead_autoscaler(self._policy)
                    )
            self.coordinator.watch_members(self._members_changed)
            self.warden.start()
        except BaseException:
            await self.close()  # what it started (sockets, sessions, local operators)
            raise
        return self

    async def _admit(self, join: bool) -> None:
        """Between the access point's registration and its first read of the configuration:
        create the cluster, take over a dead one, or join a running one."""
        ap_id = self.ap.id
        while True:
            found = await self.coordinator.config()
            running = await self.coordinator.members()
            if found is not None and any(a in running for a in found.access_points):
                if not join:
                    raise TidingsError(
                        ErrorCode.CONFLICT,
                        detail=f"the elastic deployment {self.cluster!r} already runs; join "
                        "it (another broker on the same --zookeeper and --cluster joins as an "
                        "access point), or choose another --cluster",
                    )
                await self._join_as(ap_id, found)
                return
            if await self._create(ap_id, found):
                return
            # another process created or took it over meanwhile: look again

    async def _create(self, ap_id: str, dead: ClusterConfig | None) -> bool:
        """A new configuration with this access point and local operators; over `dead`
        (a cluster with no running access point) its view numbers go on, above the old
        ones. False if another process was quicker."""
        matchers, exit_points = self._initial
        m_ids = [self._name("m") for _ in range(matchers)]
        e_ids = [self._name("e") for _ in range(exit_points)]
        if dead is None:
            config = ClusterConfig(View(0, m_ids), View(0, e_ids), [ap_id])
            if not await self.coordinator.create_config(config):
                return False
        else:
            last = await self.coordinator.scale()
            ep_view = max(dead.exit_points.view, last.id if last else 0) + 1
            m_view = dead.matchers.view + 1
            config = ClusterConfig(View(m_view, m_ids), View(ep_view, e_ids), [ap_id])
            if not await self.coordinator.replace_config(dead, config):
                return False
            log.warning(
                "elastic: the deployment %r had no running access point: taken over", self.cluster
            )
            if last is not None and not last.idle:  # its scaler died with it
                await self.coordinator.set_phase(last, "aborted", reason="the deployment restarted")
        for eid in e_ids:
            await self._start_exit_point(eid)
        for mid in m_ids:
            await self._start_matcher(mid)
        return True

    async def _join_as(self, ap_id: str, config: ClusterConfig) -> None:
        """Once every member of the views runs (a recovery may be under way), add this
        access point to `config.access_points`, when no other scale runs."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.turn_timeout_s
        while True:
            running = await self.coordinator.members()
            views = [*config.matchers.members, *config.exit_points.members]
            if all(m in running for m in views):
                break
            if loop.time() > deadline:
                missing = ", ".join(m for m in views if m not in running)
                raise TidingsError(
                    ErrorCode.UNAVAILABLE,
                    detail=f"the elastic deployment {self.cluster!r} is not whole ({missing} "
                    f"not running) after {self.turn_timeout_s:g} s",
                )
            await asyncio.sleep(0.05)
            config = await self.coordinator.require_config()
        report = await in_turn(
            lambda: self.scaler.scale_access_points(add=[ap_id]), self.turn_timeout_s
        )
        self.reports.append(report)
        self.joined = True
        log.info("elastic: access point %s joined the deployment %r", ap_id, self.cluster)

    async def _session(self) -> Coordinator:
        coordinator = Coordinator(self.zookeeper, self.cluster)
        await coordinator.start()
        return coordinator

    async def _start_matcher(self, member: str) -> MatcherOperator:
        op = self._matcher_class(member, await self._session(), self._bind(member))
        await _started(op)
        self.matchers[member] = op
        return op

    async def _start_exit_point(self, member: str) -> ExitPointOperator:
        op = self._exit_point_class(
            member, await self._session(), self._bind(member), self.sink_factory()
        )
        await _started(op)
        self.exit_points[member] = op
        return op

    async def __aenter__(self) -> Deployment:
        return await self.start()  # which closes what it started if it fails

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        """Leave (when other access points remain) and stop the local operators. The last
        access point leaving is the whole deployment closing: its configuration stays, and
        the next `start` takes it over."""
        if self._closed:
            return
        self._closed = self.closing = True
        await self.warden.stop()
        await self.evictions.close()
        await cancelled(self._leading, "the autoscaler's lead")
        await cancelled(self.recovery.task, "a recovery")
        if self.autoscaler is not None:
            await self.autoscaler.stop()
        if self.access_point is not None and self.access_point.running:
            try:
                await self._leave(self.access_point)
            except Exception:  # the others' recovery removes it once it is gone
                log.exception("elastic: access point %s could not leave", self.access_point.id)
        if self.access_point is not None:
            await _stop(self.access_point)
        # at once: another process's recovery replaces them together, not one at a time
        operators: list[Operator] = [*self.matchers.values(), *self.exit_points.values()]
        await asyncio.gather(*(_stop(op) for op in operators))
        self.matchers.clear()
        self.exit_points.clear()
        try:
            await self.coordinator.close()
        except Exception:
            log.warning(
                "elastic: the deployment's coordinator session did not close", exc_info=True
            )
        if self._tmp is not None:
            self._tmp.cleanup()

    async def _leave(self, ap: AccessPointOperator) -> None:
        """Refuse new publications, wait (at most `leave_timeout_s`) until the pending ones
        are answered, and leave `config.access_points` (a scale of kind access_points). Not
        the last access point: that one closes the deployment, as before."""
        config = await self.coordinator.config()
        if config is None or not [a for a in config.access_points if a != ap.id]:
            return
        if ap.id not in config.access_points:
            return  # removed already (as lost)
        if not await ap.drain(self.leave_timeout_s):
            log.warning(
                "elastic: access point %s leaves with %d publications unanswered after %g s",
                ap.id,
                ap.backlog(),
                self.leave_timeout_s,
            )
        report = await in_turn(
            lambda: self.scaler.scale_access_points(remove=[ap.id]), self.turn_timeout_s
        )
        self.reports.append(report)
        log.info("elastic: access point %s left the deployment %r", ap.id, self.cluster)

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

    def know(self, subs: Iterable[Subscription]) -> None:
        """Subscriptions the matchers hold already (another access point routed them): not
        sent again, kept for a recovery (`AccessPointOperator.know`)."""
        self.ap.know([record_of(s) for s in subs if s.kind in ("topic", "content")])

    def unsubscribe(self, subscription_id: str) -> None:
        self.ap.unsubscribe(subscription_id)

    # ------------------------------------------------------------ scaling

    async def matcher_count(self) -> int:
        """Matchers in the current view (local or joined from elsewhere), as the coordinator
        has it: scales run from other processes count too."""
        return len((await self.coordinator.require_config()).matchers.members)

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
        async with self.turn:
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
                new.append(await self.start_operator(role))
        if role == "matcher":
            report = await self.scaler.scale_matchers(new)
        else:
            report = await self.scaler.scale_exit_points(new)
        if report.outcome == "done":
            await self.retire(role, set(current) - set(new))
        elif report.outcome == "aborted":
            await self.retire(role, set(new) - set(current))
        return report

    async def start_operator(self, role: str) -> str:
        """A new local matcher or exit point (unassigned until a scale takes it in)."""
        if role == "matcher":
            return (await self._start_matcher(self._name("m"))).id
        return (await self._start_exit_point(self._name("e"))).id

    async def retire(self, role: str, members: set[str]) -> None:
        """Stop the local operators that left the view (remote ones stay, unassigned)."""
        local: dict[str, Any] = self.matchers if role == "matcher" else self.exit_points
        for member in members:
            op = local.pop(member, None)
            if op is not None:
                await op.stop()
                await op.coordinator.close()

    # ------------------------------------------------------------ the membership

    def _local(self) -> set[str]:
        """This process's operators."""
        local = {*self.matchers, *self.exit_points}
        if self.access_point is not None:
            local.add(self.access_point.id)
        return local

    def _members_changed(self, members: set[str]) -> None:
        self.evictions.follow()
        self.recovery.members_changed(members)

    def _taken_over(self, report: ScaleReport) -> None:
        """A scale whose scaler died, finished here: a recovery it failed is run again."""
        self.reports.append(report)
        if report.outcome == "failed" and not self.closing:
            self.recovery.look_again()

    async def status(self) -> dict[str, Any]:
        found = await cluster_status(self.coordinator)
        found["last_scales"] = [r.to_json() for r in self.reports[-5:]]
        return found


async def _started(op: Operator) -> None:
    """Start an operator; one that fails to start (or is cancelled starting: the deployment
    closing under a recovery) releases its session, whose threads would keep the process
    from exiting."""
    try:
        await op.start()
    except BaseException:
        await asyncio.shield(_stop(op))
        raise


async def _stop(op: Operator) -> None:
    """Stop an operator and close its session; a failure of either is logged, not raised
    (the deployment's other operators stop too)."""
    try:
        await op.stop()
    except Exception:
        log.warning("elastic: operator %s did not stop cleanly", op.id, exc_info=True)
    finally:
        try:
            await op.coordinator.close()
        except Exception:
            log.warning("elastic: the session of operator %s did not close", op.id, exc_info=True)


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
        else {
            "id": scale.id,
            "kind": scale.kind,
            "phase": scale.phase,
            "reason": scale.reason,
            "scaler": None if scale.idle else await coordinator.scaler(),
        },
    }
