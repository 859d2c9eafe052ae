"""A scale whose scaler dies (its process killed, its coordinator session expired) is taken
over by a deployment process: rolled back before `change`, finished after it, and under a
constant stream of publications and subscription changes nothing is lost or duplicated and
every publisher's order holds. The dead scaler, should it come back, writes nothing more."""

from __future__ import annotations

import asyncio
import contextlib
import os
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import TypeVar

import pytest
from kazoo.client import KazooClient
from tests.elastic.conftest import Recorder
from tests.elastic.stream import (
    Stream,
    check,
    held_subscriptions,
    idle_matcher,
    stable_and_live,
)

from tidings.elastic.coordination.coordinator import Busy, Coordinator
from tidings.elastic.coordination.records import ClusterConfig, View
from tidings.elastic.hosting.deployment import Deployment
from tidings.elastic.operators.matcher import MatcherOperator
from tidings.elastic.operators.matcher_scale import MatcherScale, ScaleProgress
from tidings.elastic.protocol import wire
from tidings.elastic.protocol.scaling import Scaler, ScaleReport, scale_with_running

M = TypeVar("M", bound=MatcherOperator)


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


class HeldReadyScale(MatcherScale):
    async def _ready(self, scale: ScaleProgress) -> None:
        HeldReady.waiting.set()
        await HeldReady.release.wait()
        await super()._ready(scale)


class HeldReady(MatcherOperator):
    """A new matcher that has all its state but reports `ready` only once released."""

    release = asyncio.Event()
    waiting = asyncio.Event()
    Scaling = HeldReadyScale


class HeldDoneScale(MatcherScale):
    async def change(self, message: wire.ChangeMatcher) -> None:
        HeldDone.changed.set()
        await HeldDone.release.wait()
        await super().change(message)


class HeldDone(MatcherOperator):
    """A new matcher that, at `change`, reports `done` only once released."""

    release = asyncio.Event()
    changed = asyncio.Event()
    Scaling = HeldDoneScale


@contextlib.asynccontextmanager
async def held_scale(
    zookeeper: str, kind: type[M], scaling: Callable[[Deployment, Coordinator], Awaitable[None]]
) -> AsyncIterator[None]:
    """A deployment of one matcher and an idle one of `kind` (which holds the next scale)
    under the constant stream; `scaling(deployment, tool)` runs with `tool`, the session
    of a scaler process of its own (`tidings cluster scale`). Then: nothing lost,
    duplicated or reordered, and every subscription held (none left buffered)."""
    recorder = Recorder()
    async with Deployment(zookeeper, recorder.sink) as deployment:
        held = await idle_matcher(deployment, kind, "held")
        stream = Stream(deployment)
        stream.subscribe_stable()
        tool = Coordinator(zookeeper, deployment.cluster)
        await tool.start()
        try:
            await asyncio.wait_for(stream.run(lambda: scaling(deployment, tool)), 120)
            yield
            check(stream, recorder.messages)
            assert held_subscriptions(deployment, held) == stable_and_live(stream)
        finally:
            await tool.close()
            await held.stop()
            await held.coordinator.close()


async def test_a_matcher_scale_whose_scaler_dies_before_change_is_rolled_back_losing_nothing(
    zookeeper: str,
) -> None:
    HeldReady.release, HeldReady.waiting = asyncio.Event(), asyncio.Event()
    outcomes: list[str] = []

    async def scaling(deployment: Deployment, tool: Coordinator) -> None:
        scale = asyncio.create_task(scale_with_running(tool, 2, None))
        await HeldReady.waiting.wait()  # in `start`: subscription changes buffered
        await asyncio.sleep(0.1)
        scale.cancel()  # the process killed ...
        await expire(tool)  # ... and its session expired
        outcomes.append((await taken_over(deployment)).outcome)
        HeldReady.release.set()
        await asyncio.sleep(0.2)  # the stream goes on through the old view
        outcomes.append((await deployment.scale(matchers=2))[0].outcome)  # free again
        status = await deployment.status()
        assert status["scale"]["phase"] == "end" and status["scale"]["scaler"] is None

    async with held_scale(zookeeper, HeldReady, scaling):
        assert outcomes == ["aborted", "done"]


async def test_a_matcher_scale_whose_scaler_dies_after_change_is_finished_losing_nothing(
    zookeeper: str,
) -> None:
    HeldDone.release, HeldDone.changed = asyncio.Event(), asyncio.Event()
    outcomes: list[str] = []

    async def scaling(deployment: Deployment, tool: Coordinator) -> None:
        (first,) = deployment.matchers
        scale = asyncio.create_task(Scaler(tool).scale_matchers([first, "held"]))
        await HeldDone.changed.wait()  # past `change`: the new view is written
        scale.cancel()
        await expire(tool)
        await asyncio.sleep(0.2)
        HeldDone.release.set()  # the takeover waits for the barriers left
        outcomes.append((await taken_over(deployment)).outcome)
        await asyncio.sleep(0.2)  # the stream goes on through the new view
        outcomes.append((await deployment.scale(matchers=1))[0].outcome)

    async with held_scale(zookeeper, HeldDone, scaling):
        assert outcomes == ["done", "done"]
