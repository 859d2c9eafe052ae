"""The scaling protocols of E-SilboPS section 5, driven through the coordinator.

The scaler moves a scale from phase to phase when every operator concerned has reached the
barrier in between; the operators act on each phase as they see it (access points,
matchers and exit points react to the `scale` node; messages between them carry the rest).

Matcher scale: `start` (access points buffer subscription changes and send StartScale; each
old matcher snapshots and repartitions its subscriptions by the new selector and sends them
as AddMatcherState; each matcher reports `ready` once it has all its new state) -> `change`
(the new view is written; access points send Change-Matcher-On-Exit-Point to the old
matchers, Change-Matcher to all, switch selector and flush the buffered subscriptions,
`switched`; matchers forward the first to every exit point, which report `changed` when all
have come; matchers report `done` when every access point's Change-Matcher came) -> `end`.

Exit point scale: `start` (access points send the cut marker, `switched`; matchers route
each access point's later publications by the new exit point selector and forward the marker,
`done`; old exit points deliver up to the cut, `drained`) -> `release` (the new view is
written; new exit points deliver what they held) -> `end`.

A member that dies before `change` (matchers) or `release` (exit points) aborts the scale:
phase `aborted`, everyone returns to the old view, nothing was delivered by the new one.

Recovery (beyond the paper), when a member of the current views is lost, in or out of a
scale: `start` (access points hold publications and subscription changes, send StartScale,
and the lost matchers' share of the subscriptions they routed; `paused`, with the first and
last publication they had sent and not seen committed; matchers rebuild as in a scale,
`ready`) -> `change` (views without the lost members, replacements in their place; matchers
and exit points drop what they held of the old views, `adopted`) -> `resume` (access points
send every unanswered publication again, then the held ones and subscription changes,
`resumed`) -> `end`. Exit points enqueue what is sent again idempotently. A member lost during
a recovery fails it; the next one starts from where the access points paused. Lost access
points leave `config.access_points` at a recovery's `change`.

Access points (section 5.1, stateless): one joins or leaves by a scale of kind
`access_points` that goes from `start` straight to `end`, the new list written in the same
transaction; as every scale, never while another runs (`in_turn` retries). A protocol reads
the access points from the configuration once its scale has begun, so it waits for exactly
those. An access point lost in the middle of a scale aborts it (or fails it, after `change`).
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

import msgspec

from tidings.elastic.coordination.barriers import MemberLost
from tidings.elastic.coordination.coordinator import Busy, Coordinator
from tidings.elastic.coordination.records import ClusterConfig, Phase, ScaleState, View
from tidings.errors import ErrorCode, TidingsError

T = TypeVar("T")
log = logging.getLogger("tidings.elastic")


@dataclass
class ScaleReport:
    kind: str
    old: list[str]
    new: list[str]
    outcome: str = "done"  # done | aborted | failed | unchanged
    reason: str = ""
    phases: dict[str, float] = field(default_factory=dict)  # phase -> seconds it took

    def to_json(self) -> dict[str, object]:
        return {
            "kind": self.kind,
            "old": self.old,
            "new": self.new,
            "outcome": self.outcome,
            "reason": self.reason,
            "phases_s": {k: round(v, 4) for k, v in self.phases.items()},
        }


class Scaler:
    """Runs one scale at a time (the coordinator refuses a second: CONFLICT)."""

    def __init__(self, coordinator: Coordinator, after_change_timeout_s: float = 30.0) -> None:
        self.coordinator = coordinator
        self.after_change_timeout_s = after_change_timeout_s

    async def _check_members(self, wanted: Sequence[str], role: str) -> None:
        members = await self.coordinator.members()
        for member in wanted:
            found = members.get(member)
            if found is None or found.role != role:
                raise TidingsError(
                    ErrorCode.CONFLICT, detail=f"no running {role.replace('_', ' ')} {member!r}"
                )
        if len(set(wanted)) != len(wanted) or not wanted:
            raise TidingsError(
                ErrorCode.INVALID_FIELD, field="members", detail="give distinct members"
            )

    async def scale_matchers(self, new: Sequence[str]) -> ScaleReport:
        config = await self.coordinator.require_config()
        old = list(config.matchers.members)
        report = ScaleReport("matchers", old, list(new))
        if list(new) == old:
            report.outcome = "unchanged"
            return report
        await self._check_members(new, "matcher")
        view = config.matchers.view + 1
        state = await self.coordinator.begin_scale("matchers", view, old, list(new), expect=config)
        both = list(dict.fromkeys([*old, *new]))
        aps = frozenset(config.access_points)  # the matchers wait for each one's StartScale
        clock = time.perf_counter()
        try:
            await self.coordinator.wait_barrier(
                state.id, "ready", set(both), [*both, *aps], must_live=aps
            )
        except MemberLost as lost:
            await self.coordinator.set_phase(state, "aborted", reason=str(lost))
            report.outcome, report.reason = "aborted", str(lost)
            report.phases["start"] = time.perf_counter() - clock
            return report
        changed = msgspec.structs.replace(config, matchers=View(view, list(new)))
        report.phases["start"] = time.perf_counter() - clock
        state = await self.coordinator.set_phase(state, "change", changed)
        await self._finish_matchers(state, changed, report)
        return report

    async def _finish_matchers(
        self, state: ScaleState, changed: ClusterConfig, report: ScaleReport
    ) -> None:
        """From `change` to `end` (or `failed`), timed as the report's phase `change`."""
        clock = time.perf_counter()
        both = list(dict.fromkeys([*state.old, *state.new]))
        try:
            await asyncio.wait_for(
                self._after_change(state, changed.access_points, changed.exit_points.members, both),
                self.after_change_timeout_s,
            )
        except (MemberLost, TimeoutError) as lost:
            reason = str(lost) or f"no answer within {self.after_change_timeout_s} s of change"
            report.outcome, report.reason = "failed", reason
            await self.coordinator.set_phase(state, "failed", reason=reason)
            return
        report.phases["change"] = time.perf_counter() - clock
        await self.coordinator.set_phase(state, "end")

    async def _after_change(
        self, state: ScaleState, aps: list[str], eps: list[str], matchers: list[str]
    ) -> None:
        """Past `change` there is no way back: wait for everyone. A member lost (or silent
        past the timeout) now ends the scale `failed`: the coordinator is free again, the
        new view stays, and a recovery follows. (The exit points and matchers wait for every
        access point's markers: an access point lost fails the scale too.)"""
        live = frozenset(aps)
        await self.coordinator.wait_barrier(state.id, "switched", set(aps), aps)
        await self.coordinator.wait_barrier(
            state.id, "changed", set(eps), [*eps, *aps], must_live=live
        )
        await self.coordinator.wait_barrier(
            state.id, "done", set(matchers), [*matchers, *aps], must_live=live
        )

    async def scale_exit_points(self, new: Sequence[str]) -> ScaleReport:
        config = await self.coordinator.require_config()
        old = list(config.exit_points.members)
        report = ScaleReport("exit_points", old, list(new))
        if list(new) == old:
            report.outcome = "unchanged"
            return report
        await self._check_members(new, "exit_point")
        # a view number no earlier attempt used (an aborted one's partials may be in flight)
        last = await self.coordinator.scale()
        view = max(config.exit_points.view, last.id if last else 0) + 1
        state = await self.coordinator.begin_scale(
            "exit_points", view, old, list(new), expect=config
        )
        clock = time.perf_counter()
        aps, matchers = config.access_points, config.matchers.members
        both = list(dict.fromkeys([*old, *new]))
        # a new exit point lost, or an access point whose markers may never come: roll back
        live = frozenset([*new, *aps])
        try:
            await self.coordinator.wait_barrier(state.id, "switched", set(aps), aps)
            await self.coordinator.wait_barrier(
                state.id, "done", set(matchers), [*matchers, *both, *aps], must_live=live
            )
            await self.coordinator.wait_barrier(
                state.id, "drained", set(old), [*old, *new, *aps], must_live=live
            )
        except MemberLost as lost:
            await self.coordinator.set_phase(state, "aborted", reason=str(lost))
            report.outcome, report.reason = "aborted", str(lost)
            report.phases["start"] = time.perf_counter() - clock
            return report
        report.phases["start"] = time.perf_counter() - clock
        clock = time.perf_counter()
        changed = msgspec.structs.replace(config, exit_points=View(view, list(new)))
        state = await self.coordinator.set_phase(state, "release", changed)
        state = await self.coordinator.set_phase(state, "end")
        report.phases["release"] = time.perf_counter() - clock
        return report

    async def recover(
        self,
        lost: Sequence[str],
        matchers: Sequence[str],
        exit_points: Sequence[str],
        planned: ClusterConfig | None = None,
    ) -> ScaleReport:
        """Replace the `lost` members by the views `matchers` and `exit_points` (running
        members: the survivors, and replacements) and send again what was in flight. Lost
        access points among `lost` leave `config.access_points` at `change`: what they had
        not answered was never promised to anyone. `planned`: the configuration the views
        were worked out from (Busy if it has changed since)."""
        config = planned or await self.coordinator.require_config()
        report = ScaleReport(
            "recover",
            [*config.matchers.members, *config.exit_points.members],
            [*matchers, *exit_points],
        )
        last = await self.coordinator.scale()
        view = config.matchers.view + 1
        ep_view = max(config.exit_points.view, last.id if last else 0) + 1
        state = await self.coordinator.begin_scale(
            "recover",
            view,
            list(config.matchers.members),
            list(matchers),
            lost=list(lost),
            exit_points=list(exit_points),
            ep_view=ep_view,
            expect=config,
        )
        aps = [a for a in config.access_points if a not in lost]
        members = [*matchers, *exit_points]
        live = frozenset(aps)  # the matchers wait for each access point's share
        clock = time.perf_counter()
        try:
            await self.coordinator.wait_barrier(state.id, "paused", set(aps), aps)
            await self.coordinator.wait_barrier(
                state.id, "ready", set(matchers), [*members, *aps], must_live=live
            )
            paused = await self.coordinator.arrivals(state.id, "paused")
            since = {ap: msgspec.json.decode(data, type=list[int]) for ap, data in paused.items()}
            report.phases["start"] = time.perf_counter() - clock
            clock = time.perf_counter()
            changed = msgspec.structs.replace(
                config,
                matchers=View(view, list(matchers)),
                exit_points=View(ep_view, list(exit_points)),
                access_points=aps,
            )
            state = await self.coordinator.set_phase(state, "change", changed, since=since)
            await self.coordinator.wait_barrier(
                state.id, "adopted", set(members), [*members, *aps], must_live=live
            )
            report.phases["change"] = time.perf_counter() - clock
            clock = time.perf_counter()
            state = await self.coordinator.set_phase(state, "resume")
            await self.coordinator.wait_barrier(state.id, "resumed", set(aps), aps)
            report.phases["resume"] = time.perf_counter() - clock
        except MemberLost as again:
            await self.coordinator.set_phase(state, "failed", reason=str(again))
            report.outcome, report.reason = "failed", str(again)
            return report
        except asyncio.CancelledError:  # the deployment closes: another one takes it over
            try:
                await asyncio.shield(
                    self.coordinator.set_phase(state, "failed", reason="the scaler stopped")
                )
            except Exception:  # (its `scaler` node goes with the session: the warden's turn)
                log.warning("elastic: recovery %d not marked failed", state.id, exc_info=True)
            raise
        await self.coordinator.set_phase(state, "end")
        return report

    async def take_over(self) -> ScaleReport | None:
        """Finish the scale in progress whose scaler died (`Coordinator.take_over`; None when
        none is open, `Busy` while its scaler lives): where the scaler could still turn back,
        roll back as it would have for a member lost (`aborted`); a matcher scale past
        `change` waits for the barriers left and ends as the scaler would have (`end`, or
        `failed` and a recovery follows); an exit point scale at `release` ends; a recovery
        fails, and the next recovery resumes the access points it paused."""
        state = await self.coordinator.take_over()
        if state is None:
            return None
        reason = f"its scaler stopped in phase {state.phase}"
        report = ScaleReport(state.kind, list(state.old), list(state.new), reason=reason)
        if state.kind == "matchers" and state.phase == "change":
            await self._finish_matchers(state, await self.coordinator.require_config(), report)
        elif state.kind == "exit_points" and state.phase == "release":
            await self.coordinator.set_phase(state, "end")
        else:
            outcome: Phase = "failed" if state.kind == "recover" else "aborted"
            report.outcome = outcome
            await self.coordinator.set_phase(state, outcome, reason=reason)
        log.warning("elastic: scale %d taken over: %s, %s", state.id, reason, report.outcome)
        return report

    async def scale_access_points(
        self, add: Sequence[str] = (), remove: Sequence[str] = ()
    ) -> ScaleReport:
        """An access point joins (`add`: running ones) or leaves (`remove`): the new list
        is written at once, as a scale of its own (`start`, then `end` with the new
        configuration in the same transaction), so never in the middle of another scale.
        Busy (CONFLICT) while one runs: see `in_turn`."""
        config = await self.coordinator.require_config()
        old = list(config.access_points)
        new = [a for a in old if a not in remove]
        new += [a for a in dict.fromkeys(add) if a not in new and a not in remove]
        report = ScaleReport("access_points", old, new)
        if new == old:
            report.outcome = "unchanged"
            return report
        added = [a for a in add if a not in old]
        if added:
            await self._check_members(added, "access_point")
        clock = time.perf_counter()
        state = await self.coordinator.begin_scale(
            "access_points", config.matchers.view, old, new, expect=config
        )
        changed = msgspec.structs.replace(config, access_points=new)
        write = asyncio.ensure_future(self.coordinator.set_phase(state, "end", changed))
        try:
            await asyncio.shield(write)
        except asyncio.CancelledError:  # not left in `start` for good: the write goes on
            try:
                await write
            except Exception:
                log.warning(
                    "elastic: scale %d of the access points failed", state.id, exc_info=True
                )
            raise
        except Exception:
            try:
                await self.coordinator.set_phase(state, "aborted", reason="not written")
            except Exception:  # (the write's error is the one raised)
                log.warning("elastic: scale %d not marked aborted", state.id, exc_info=True)
            raise
        report.phases["end"] = time.perf_counter() - clock
        return report


async def in_turn(
    attempt: Callable[[], Awaitable[T]], timeout_s: float = 60.0, first_delay_s: float = 0.02
) -> T:
    """`attempt()` until it is not refused as `Busy` (another scale runs, or ran since the
    configuration was read), with a short randomised backoff; Busy still after
    `timeout_s`: the last refusal is raised."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    delay = first_delay_s
    while True:
        try:
            return await attempt()
        except Busy:
            if loop.time() + delay > deadline:
                raise
        await asyncio.sleep(delay * random.uniform(0.5, 1.5))
        delay = min(delay * 2, 0.5)


async def scale_with_running(
    coordinator: Coordinator, matchers: int | None, exit_points: int | None
) -> list[ScaleReport]:
    """Scale each layer to a number of instances with the operators already running: the
    first members stay, idle running operators are added (CONFLICT when too few run)."""
    scaler, reports = Scaler(coordinator), []
    for count, role in ((matchers, "matcher"), (exit_points, "exit_point")):
        if count is None:
            continue
        config = await coordinator.require_config()
        view = config.matchers if role == "matcher" else config.exit_points
        current = list(view.members)
        running = await coordinator.members()
        idle = sorted(m for m, info in running.items() if info.role == role and m not in current)
        new = current[:count] + idle[: max(0, count - len(current))]
        if len(new) < count:
            raise TidingsError(
                ErrorCode.CONFLICT,
                detail=f"{count} {role.replace('_', ' ')}s wanted, {len(new)} running: start "
                f"more with `tidings {role.replace('_', '-')}`",
            )
        if role == "matcher":
            reports.append(await scaler.scale_matchers(new))
        else:
            reports.append(await scaler.scale_exit_points(new))
    return reports
