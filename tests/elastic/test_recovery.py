"""A lost matcher or exit point, in the middle of a scale or outside one, is replaced by a
recovery that sends again what was in flight: under a constant stream of publications and
subscription changes, nothing is lost, nothing is duplicated, every publisher's order holds."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from pathlib import Path

from tests.elastic.conftest import Recorder
from tests.elastic.stream import (
    STABLE,
    SilentMatcher,
    Stream,
    check,
    held_subscriptions,
    idle_matcher,
    stable_and_live,
)

from tidings.elastic.hosting.deployment import Deployment
from tidings.elastic.operators.exit_point import ExitPointOperator, StoreSink
from tidings.elastic.operators.matcher import MatcherOperator
from tidings.elastic.operators.matcher_scale import MatcherScale, ScaleProgress
from tidings.elastic.operators.operator import Operator
from tidings.elastic.protocol import wire
from tidings.elastic.protocol.scaling import ScaleReport
from tidings.store.base import Fanout, NewMessage
from tidings.store.sqlite import SQLiteStore


async def recovered(deployment: Deployment, before: int = 0) -> list[ScaleReport]:
    """The recoveries after the first `before` reports, once one has ended `done`."""
    while not any(r.kind == "recover" and r.outcome == "done" for r in deployment.reports[before:]):
        await asyncio.sleep(0.02)
    return [r for r in deployment.reports[before:] if r.kind == "recover"]


async def crash(op: Operator) -> None:
    """As a process that dies: what it holds and what it queued for its peers is gone."""
    await op.stop(crash=True)


async def test_a_matcher_lost_outside_a_scale_is_replaced_and_nothing_is_lost(
    zookeeper: str,
) -> None:
    recorder = Recorder()
    async with Deployment(zookeeper, recorder.sink, matchers=2) as deployment:
        stream = Stream(deployment)
        stream.subscribe_stable()
        lost: list[str] = []

        async def losing_a_matcher() -> None:
            await asyncio.sleep(0.3)  # subscriptions on both matchers, publications in flight
            victim = sorted(deployment.matchers)[0]
            lost.append(victim)
            await crash(deployment.matchers[victim])
            await recovered(deployment)
            await asyncio.sleep(0.3)  # the stream goes on through the new view

        await asyncio.wait_for(stream.run(losing_a_matcher), 120)
        (report,) = await recovered(deployment)
        assert report.outcome == "done"
        status = await deployment.status()
        assert lost[0] not in status["matchers"]["members"]
        assert len(status["matchers"]["members"]) == 2 and status["missing"] == []
        assert deployment.ap.counters["recovered_records"] > 0  # the lost slice, rebuilt
        check(stream, recorder.messages)
        assert held_subscriptions(deployment) == stable_and_live(stream)


async def test_an_exit_point_lost_outside_a_scale_is_replaced_and_nothing_is_lost(
    zookeeper: str,
) -> None:
    recorder = Recorder()
    async with Deployment(zookeeper, recorder.sink, matchers=2, exit_points=2) as deployment:
        stream = Stream(deployment)
        stream.subscribe_stable()

        async def losing_an_exit_point() -> None:
            await asyncio.sleep(0.3)
            await crash(deployment.exit_points[sorted(deployment.exit_points)[0]])
            await recovered(deployment)
            await asyncio.sleep(0.3)

        await asyncio.wait_for(stream.run(losing_an_exit_point), 120)
        assert [r.outcome for r in await recovered(deployment)] == ["done"]
        assert (await deployment.status())["missing"] == []
        check(stream, recorder.messages)


async def test_a_matcher_lost_after_change_fails_the_scale_and_the_recovery_loses_nothing(
    zookeeper: str,
) -> None:
    recorder = Recorder()
    SilentMatcher.changed = asyncio.Event()
    async with Deployment(zookeeper, recorder.sink) as deployment:
        silent = await idle_matcher(deployment, SilentMatcher, "silent")
        stream = Stream(deployment)
        stream.subscribe_stable()
        outcomes: list[str] = []

        async def scaling() -> None:
            async def kill_after_change() -> None:
                await SilentMatcher.changed.wait()
                await asyncio.sleep(0.1)  # publications of the new view reach it, unanswered
                await crash(silent)

            killer = asyncio.create_task(kill_after_change())
            before = len(deployment.reports)
            (report,) = await deployment.scale(matchers=2)  # the idle `silent` is taken
            await killer
            outcomes.append(report.outcome)
            assert "silent" in report.reason
            outcomes.extend(r.outcome for r in await recovered(deployment, before + 1))
            outcomes.append((await deployment.scale(matchers=1))[0].outcome)

        await asyncio.wait_for(stream.run(scaling), 120)
        assert outcomes == ["failed", "done", "done"]
        assert deployment.ap.counters["publications_resent"] > 0
        check(stream, recorder.messages)
        assert held_subscriptions(deployment) == stable_and_live(stream)
        await silent.coordinator.close()


class DyingOldExitPoint(ExitPointOperator):
    """An old exit point that, in an exit point scale, dies once both views hold
    publications after the cut instead of draining."""

    after_cut = asyncio.Event()

    async def _check_drained(self) -> None:
        if self._scales and self.backlog() >= 10:
            DyingOldExitPoint.after_cut.set()
        # never drained: it dies first


async def test_an_old_exit_point_dying_before_it_drains_aborts_the_scale_and_loses_nothing(
    zookeeper: str,
) -> None:
    recorder = Recorder()
    DyingOldExitPoint.after_cut = asyncio.Event()
    async with Deployment(
        zookeeper, recorder.sink, matchers=2, exit_point_class=DyingOldExitPoint
    ) as deployment:
        stream = Stream(deployment)
        stream.subscribe_stable()
        outcomes: list[str] = []

        async def scaling() -> None:
            (old,) = deployment.exit_points
            before = len(deployment.reports)
            scale = asyncio.create_task(deployment.scale(exit_points=2))
            await DyingOldExitPoint.after_cut.wait()
            await crash(deployment.exit_points[old])
            outcomes.append((await scale)[0].outcome)
            outcomes.extend(r.outcome for r in await recovered(deployment, before + 1))

        await asyncio.wait_for(stream.run(scaling), 120)
        assert outcomes == ["aborted", "done"]
        status = await deployment.status()
        assert status["missing"] == [] and old_gone(status, deployment)
        check(stream, recorder.messages)


def old_gone(status: dict[str, object], deployment: Deployment) -> bool:
    members = status["exit_points"]["members"]  # type: ignore[index]
    return len(members) == 1 and all(m in deployment.exit_points for m in members)


class CommitThenDie(ExitPointOperator):
    """Commits its deliveries into the store, then dies before the access point hears of
    them: the recovery sends those publications again."""

    armed = False

    async def _release(self) -> None:
        if not CommitThenDie.armed or self._lock.locked():
            await super()._release()
            return
        CommitThenDie.armed = False
        self.out.send = lambda peer, message: None  # type: ignore[method-assign]
        await super()._release()  # committed, the answer never leaves
        asyncio.get_running_loop().create_task(self.stop(crash=True))


async def test_publications_committed_by_an_exit_point_that_died_are_not_enqueued_twice(
    zookeeper: str, tmp_path: Path
) -> None:
    store = SQLiteStore(str(tmp_path / "queues.db"))
    CommitThenDie.armed = False
    try:
        async with Deployment(
            zookeeper,
            lambda: StoreSink(store),
            matchers=2,
            exit_point_class=CommitThenDie,  # alone: it commits fresh, and so would its successor
        ) as deployment:
            stream = Stream(deployment)
            stream.subscribe_stable()

            async def committing_then_dying() -> None:
                await asyncio.sleep(0.3)
                CommitThenDie.armed = True
                await recovered(deployment)
                await asyncio.sleep(0.3)

            await asyncio.wait_for(stream.run(committing_then_dying), 120)
            assert deployment.ap.counters["publications_resent"] > 0
            check(stream, queued(store, [*STABLE, *(f"c{k}" for k in range(5))]))
    finally:
        store.close()


def queued(store: SQLiteStore, subscribers: Sequence[str]) -> list[NewMessage]:
    """Every message in the subscribers' queues, in queue order."""
    out = []
    for subscriber in subscribers:
        for m in store.lease(subscriber, 100_000, 60.0, 10, now=time.time()):
            out.append(
                NewMessage(
                    m.subscriber_id,
                    m.publication_id,
                    m.publication_id,
                    m.subscription_ids,
                    m.raw,
                    m.enqueued_at,
                )
            )
    return out


class FailingOnce:
    """A store that fails one commit (a lost connection, a full disk) before it commits."""

    def __init__(self, recorder: Recorder, failures: list[int]) -> None:
        self.inner = recorder.sink()
        self.failures = failures

    async def deliver(self, fanouts: Sequence[Fanout], fresh: bool = True) -> None:
        if self.failures and len(self.recorder_messages()) >= self.failures[0]:
            self.failures.pop()
            raise OSError("the store went away")
        await self.inner.deliver(fanouts, fresh)

    def recorder_messages(self) -> list[NewMessage]:
        return self.inner.recorder.messages


async def test_an_exit_point_whose_store_fails_leaves_and_is_replaced_losing_nothing(
    zookeeper: str,
) -> None:
    recorder = Recorder()
    failures = [50]  # deliveries recorded before the failing commit
    async with Deployment(
        zookeeper, lambda: FailingOnce(recorder, failures), matchers=2
    ) as deployment:
        stream = Stream(deployment)
        stream.subscribe_stable()

        async def failing() -> None:
            await recovered(deployment)
            await asyncio.sleep(0.3)

        await asyncio.wait_for(stream.run(failing), 120)
        assert failures == []
        check(stream, recorder.messages)


class BrokenBuildScale(MatcherScale):
    async def _build(self, scale: ScaleProgress, records: list[wire.SubscriptionRecord]) -> None:
        raise RuntimeError("the index could not be built")


class BrokenBuild(MatcherOperator):
    """A new matcher whose state build fails (beside its inbox loop) in its first scale."""

    Scaling = BrokenBuildScale


async def test_a_step_that_fails_beside_the_inbox_loop_fails_the_operator_and_nothing_is_lost(
    zookeeper: str,
) -> None:
    recorder = Recorder()
    async with Deployment(zookeeper, recorder.sink) as deployment:
        broken = await idle_matcher(deployment, BrokenBuild, "broken")
        stream = Stream(deployment)
        stream.subscribe_stable()
        failures: list[BaseException] = []
        outcomes: list[str] = []

        async def scaling() -> None:
            scale = asyncio.create_task(deployment.scale(matchers=2))  # the idle `broken`
            ending = asyncio.ensure_future(broken.wait())
            done, _ = await asyncio.wait([ending], timeout=20)  # (no cancel: it ends by itself)
            failures.extend(e for d in done if (e := d.exception()) is not None)
            ending.cancel()
            outcomes.append((await scale)[0].outcome)  # once its leaving is noticed
            outcomes.append((await deployment.scale(matchers=2))[0].outcome)  # a new one

        await asyncio.wait_for(stream.run(scaling), 120)
        assert [str(f) for f in failures] == ["the index could not be built"]
        assert outcomes == ["aborted", "done"]
        assert broken.counters["errors"] == 1
        members = (await deployment.status())["matchers"]["members"]
        assert len(members) == 2 and "broken" not in members
        check(stream, recorder.messages)
        assert held_subscriptions(deployment) == stable_and_live(stream)
        await broken.stop(crash=True)  # (as its process would: it releases what it held)
        await broken.coordinator.close()


class MuteLeaverScale(MatcherScale):
    async def _send_state(
        self, scale: ScaleProgress, records: list[wire.SubscriptionRecord]
    ) -> None:
        if not MuteLeaver.mute:
            await super()._send_state(scale, records)


class MuteLeaver(MatcherOperator):
    """A matcher that, once `mute`, never sends its state in a scale."""

    mute = False
    Scaling = MuteLeaverScale


async def test_a_matcher_lost_before_it_sends_its_state_aborts_the_scale_and_the_wait_for_it(
    zookeeper: str,
) -> None:
    recorder = Recorder()
    MuteLeaver.mute = False
    async with Deployment(zookeeper, recorder.sink) as deployment:
        (survivor,) = deployment.matchers.values()
        mute = await idle_matcher(deployment, MuteLeaver, "mute")
        stream = Stream(deployment)
        stream.subscribe_stable()
        outcomes: list[str] = []

        async def scaling() -> None:
            outcomes.append((await deployment.scale(matchers=2))[0].outcome)  # takes `mute`
            await asyncio.sleep(0.2)
            MuteLeaver.mute = True
            before = len(deployment.reports)
            scale = asyncio.create_task(deployment.scale(matchers=1))  # `mute` leaves
            while survivor.scaling.current is None or survivor.scaling.current.own is None:
                await asyncio.sleep(0.005)  # its own share in hand, the other's awaited
            await crash(mute)
            outcomes.append((await scale)[0].outcome)
            outcomes.extend(r.outcome for r in await recovered(deployment, before + 1))

        await asyncio.wait_for(stream.run(scaling), 120)
        assert outcomes == ["done", "aborted", "done"]
        assert not [t for t in survivor._steps if t.get_name().endswith("-grow")]
        check(stream, recorder.messages)
        assert held_subscriptions(deployment) == stable_and_live(stream)
        await mute.coordinator.close()
