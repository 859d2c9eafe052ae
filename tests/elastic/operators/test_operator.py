"""An operator's inbox loop: what runs beside it gets its turn even while frames keep
waiting in the inbox. An operator removed from the membership (evicted as unreachable, or
its session expired) stops and says why."""

from __future__ import annotations

import asyncio
import time

import pytest

from tidings.elastic.coordination.coordinator import Coordinator
from tidings.elastic.coordination.records import ClusterConfig, View
from tidings.elastic.operators.operator import Operator
from tidings.elastic.protocol import wire
from tidings.elastic.protocol.channels import Inbox, Outboxes, shared_context
from tidings.errors import ErrorCode, TidingsError


class Slow(Operator):
    """Handles a batch without awaiting anything; the first one takes long, and spawns a
    step that notes how many batches had been handled when it ran."""

    role = "matcher"

    def __init__(self) -> None:
        super().__init__("slow", None, "tcp://127.0.0.1:*")  # type: ignore[arg-type]
        self.batches = 0
        self.step_ran_after: int | None = None

    async def handle(self, batch: list[wire.Message]) -> None:
        self.batches += 1
        if self.batches == 1:
            self.spawn(self._step(), "step")
            time.sleep(0.3)  # (blocking: meanwhile every frame reaches the inbox)

    async def _step(self) -> None:
        self.step_ran_after = self.batches


async def test_a_spawned_step_runs_while_frames_keep_waiting_in_the_inbox() -> None:
    op = Slow()
    op.inbox = Inbox(shared_context(), op._bind)
    out = Outboxes(shared_context())
    out.know("slow", op.inbox.address)
    for seq in range(8 * 512):
        out.send("slow", wire.Committed("ep", [seq], [1]))
    out.send("slow", wire.Stop())
    await asyncio.wait_for(op._loop(), 30)
    assert op.batches >= 8  # (each batch holds at most 512 frames)
    assert op.step_ran_after == 1  # not once the inbox was empty
    out.close(linger=0)
    op.inbox.close()


class Idle(Operator):
    role = "matcher"

    async def handle(self, batch: list[wire.Message]) -> None:
        pass


async def started(zookeeper: str, cluster: str, name: str) -> Idle:
    coordinator = Coordinator(zookeeper, cluster)
    await coordinator.start()
    op = Idle(name, coordinator, "tcp://127.0.0.1:*")
    await op.start()
    return op


async def a_cluster(zookeeper: str, cluster: str) -> Coordinator:
    tool = Coordinator(zookeeper, cluster)
    await tool.start()
    await tool.create_config(ClusterConfig(View(1, ["m1"]), View(1, ["e1"]), []))
    return tool


async def test_an_evicted_operator_stops_and_says_why(zookeeper: str) -> None:
    tool = await a_cluster(zookeeper, "evicted")
    op = await started(zookeeper, "evicted", "m1")
    ((_, session),) = (await tool.sessions()).values()
    assert await tool.evict("m1", session)
    with pytest.raises(TidingsError) as caught:
        await asyncio.wait_for(op.wait(), 10)
    assert caught.value.code == ErrorCode.UNAVAILABLE
    assert "removed from the deployment" in caught.value.message
    await op.stop()
    await op.coordinator.close()
    await tool.close()


async def test_eviction_removes_only_the_node_of_the_session_it_names(zookeeper: str) -> None:
    tool = await a_cluster(zookeeper, "namesake")
    op = await started(zookeeper, "namesake", "m1")
    ((_, session),) = (await tool.sessions()).values()
    assert not await tool.evict("m1", session + 1)  # a namesake's session: left alone
    assert not await tool.evict("m2", session)  # (no such node)
    assert set(await tool.members()) == {"m1"} and op.running
    await op.stop()
    await op.coordinator.close()
    await tool.close()


class Failing(Idle):
    async def handle(self, batch: list[wire.Message]) -> None:
        raise ValueError("a batch it cannot handle")


async def test_an_operator_that_leaves_on_a_failure_is_not_taken_for_evicted(
    zookeeper: str,
) -> None:
    """It removes its own node (crash-only): its watch fires as it goes, and what `wait`
    raises is still its own failure. Here the watch's news comes before the removal's
    answer (a race that kazoo's threads decide; forced, so that it happens every time)."""
    tool = await a_cluster(zookeeper, "failing")
    coordinator = Coordinator(zookeeper, "failing")
    await coordinator.start()
    op = Failing("m1", coordinator, "tcp://127.0.0.1:*")
    await op.start()
    removal = coordinator.leave

    async def leave_with_the_news_first(member_id: str) -> None:
        await removal(member_id)
        op._gone()  # (as the watch's callback, before the removal's answer is handled)

    coordinator.leave = leave_with_the_news_first  # type: ignore[method-assign]
    out = Outboxes(shared_context())
    assert op.inbox is not None
    out.know("m1", op.inbox.address)
    out.send("m1", wire.Committed("ep", [1], [1]))
    with pytest.raises(ValueError, match="cannot handle"):
        await asyncio.wait_for(op.wait(), 10)
    await asyncio.sleep(0.2)  # (the watch's news, if it came late)
    assert op._failure is None and await tool.members() == {}
    out.close(linger=0)
    await op.stop()
    await coordinator.close()
    await tool.close()
