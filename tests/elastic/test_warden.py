"""A scale whose scaler dies (its process killed, its coordinator session expired) is taken
over by a deployment process: rolled back before `change`, finished after it, and under a
constant stream of publications and subscription changes nothing is lost or duplicated and
every publisher's order holds. The dead scaler, should it come back, writes nothing more."""

from __future__ import annotations

import asyncio
import os
import uuid

import pytest
from kazoo.client import KazooClient
from tests.elastic.conftest import Recorder
from tests.elastic.stream import Stream, check, idle_matcher, stable_and_live

from tidings.elastic import wire
from tidings.elastic.coordinator import Busy, ClusterConfig, Coordinator, View
from tidings.elastic.deployment import Deployment
from tidings.elastic.matcher import MatcherOperator, _MatcherScale
from tidings.elastic.scaling import Scaler, ScaleReport, scale_with_running


async def expire(coordinator: Coordinator) -> None:
    """As ZooKeeper does to the session of a process killed outright: its ephemeral nodes go
    (a second client on the same session, closed, ends it; kazoo then starts a new one)."""
    session_id, password = coordinator._zk.client_id
    clone = KazooClient(hosts=coordinator.hosts, client_id=(session_id, password))
    await asyncio.to_thread(clone.start)
    await asyncio.to_thread(clone.stop)
    await asyncio.to_thread(clone.close)


async def taken_over(deployment: Deployment) -> ScaleReport:
    while not [r for r in deployment.reports if "scaler stopped" in r.reason]:
        await asyncio.sleep(0.02)
    (report,) = [r for r in deployment.reports if "scaler stopped" in r.reason]
    return report


async def test_a_scale_holds_the_scaler_node_to_its_end_and_a_dead_scaler_writes_nothing(
    zookeeper: str,
) -> None:
    cluster = f"c{uuid.uuid4().hex[:10]}"
    first, second = Coordinator(zookeeper, cluster), Coordinator(zookeeper, cluster)
    await first.start()
    await second.start()
    try:
        config = ClusterConfig(View(0, ["m1"]), View(0, ["e1"]), ["ap1"])
        assert await first.create_config(config)
        state = await first.begin_scale("matchers", 1, ["m1"], ["m1", "m2"], expect=config)
        assert (await second.scaler() or "").endswith(f":{os.getpid()}")
        with pytest.raises(Busy):
            await second.take_over()  # its scaler lives

        await expire(first)
        while await second.scaler() is not None:
            await asyncio.sleep(0.01)
        taken = await second.take_over()
        assert taken == state and await second.scaler() is not None
        while not first._zk.connected:  # (kazoo starts a new session)
            await asyncio.sleep(0.01)
        with pytest.raises(Busy, match="taken over"):
            await first.set_phase(state, "change", config)  # back, too late
        assert (await second.scale()) == state  # (its phase unchanged)

        await second.set_phase(state, "aborted", reason="test")
        assert await second.scaler() is None  # gone with the last phase
        assert await second.take_over() is None  # nothing open
        again = await first.begin_scale("matchers", 1, ["m1"], ["m1", "m2"], expect=config)
        assert again.id == state.id + 1
        await first.set_phase(again, "end")
        assert await first.scaler() is None
    finally:
        await first.close()
        await second.close()


class HeldReady(MatcherOperator):
    """A new matcher that has all its state but reports `ready` only once released."""

    release = asyncio.Event()
    waiting = asyncio.Event()

    async def _ready(self, scale: _MatcherScale) -> None:
        HeldReady.waiting.set()
        await HeldReady.release.wait()
        await super()._ready(scale)


class HeldDone(MatcherOperator):
    """A new matcher that, at `change`, reports `done` only once released."""

    release = asyncio.Event()
    changed = asyncio.Event()

    async def _change(self, message: wire.ChangeMatcher) -> None:
        HeldDone.changed.set()
        await HeldDone.release.wait()
        await super()._change(message)


async def test_a_matcher_scale_whose_scaler_dies_before_change_is_rolled_back_losing_nothing(
    zookeeper: str,
) -> None:
    recorder = Recorder()
    HeldReady.release, HeldReady.waiting = asyncio.Event(), asyncio.Event()
    async with Deployment(zookeeper, recorder.sink) as deployment:
        held = await idle_matcher(deployment, HeldReady, "held")
        stream = Stream(deployment)
        stream.subscribe_stable()
        outcomes: list[str] = []

        async def scaling() -> None:
            # `tidings cluster scale --matchers 2`, as a process of its own
            tool = Coordinator(zookeeper, deployment.cluster)
            await tool.start()
            scale = asyncio.create_task(scale_with_running(tool, 2, None))
            await HeldReady.waiting.wait()  # in `start`: subscription changes buffered
            await asyncio.sleep(0.1)
            scale.cancel()  # the process killed ...
            await expire(tool)  # ... and its session expired
            report = await taken_over(deployment)
            outcomes.append(report.outcome)
            HeldReady.release.set()
            await tool.close()
            await asyncio.sleep(0.2)  # the stream goes on through the old view
            outcomes.append((await deployment.scale(matchers=2))[0].outcome)  # free again

        await asyncio.wait_for(stream.run(scaling), 120)
        assert outcomes == ["aborted", "done"]
        status = await deployment.status()
        assert status["scale"]["phase"] == "end" and status["scale"]["scaler"] is None
        check(stream, recorder.messages)
        assert _held(deployment, held) == stable_and_live(stream)  # none buffered for good
        await held.stop()
        await held.coordinator.close()


async def test_a_matcher_scale_whose_scaler_dies_after_change_is_finished_losing_nothing(
    zookeeper: str,
) -> None:
    recorder = Recorder()
    HeldDone.release, HeldDone.changed = asyncio.Event(), asyncio.Event()
    async with Deployment(zookeeper, recorder.sink) as deployment:
        held = await idle_matcher(deployment, HeldDone, "held")
        stream = Stream(deployment)
        stream.subscribe_stable()
        outcomes: list[str] = []

        async def scaling() -> None:
            tool = Coordinator(zookeeper, deployment.cluster)
            await tool.start()
            scaler = Scaler(tool)
            scale = asyncio.create_task(scaler.scale_matchers([_first(deployment), "held"]))
            await HeldDone.changed.wait()  # past `change`: the new view is written
            scale.cancel()
            await expire(tool)
            await asyncio.sleep(0.2)
            HeldDone.release.set()  # the takeover waits for the barriers left
            report = await taken_over(deployment)
            outcomes.append(report.outcome)
            await tool.close()
            await asyncio.sleep(0.2)  # the stream goes on through the new view
            outcomes.append((await deployment.scale(matchers=1))[0].outcome)

        await asyncio.wait_for(stream.run(scaling), 120)
        assert outcomes == ["done", "done"]
        check(stream, recorder.messages)
        assert _held(deployment, held) == stable_and_live(stream)
        await held.stop()
        await held.coordinator.close()


def _first(deployment: Deployment) -> str:
    (member,) = deployment.matchers
    return member


def _held(deployment: Deployment, *others: MatcherOperator) -> set[str]:
    """Every subscription id the matchers of the current view hold, local or not."""
    held: set[str] = set()
    for op in [*deployment.matchers.values(), *others]:
        if op.slices and op.running:
            held |= set(op.slices[max(op.slices)].records)
    return held
