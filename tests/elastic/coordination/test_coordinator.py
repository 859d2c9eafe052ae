"""A coordinator's session with ZooKeeper: one that cannot start, or whose start is
cancelled, leaves no client running."""

from __future__ import annotations

import asyncio
import time

import pytest
from kazoo.protocol.states import KazooState

from tidings.elastic.coordination.coordinator import Coordinator
from tidings.errors import ErrorCode, TidingsError


async def settled(states: list[KazooState], state: KazooState, within_s: float) -> bool:
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        if states and states[-1] == state:
            return True
        await asyncio.sleep(0.02)
    return False


async def test_a_start_cancelled_while_it_connects_stops_its_client_once_connected(
    zookeeper: str,
) -> None:
    coordinator = Coordinator(zookeeper, "cancelled")
    states: list[KazooState] = []
    coordinator._zk.add_listener(states.append)
    starting = asyncio.create_task(coordinator.start())
    await asyncio.sleep(0)  # the connection is under way in its thread
    starting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await starting
    assert await settled(states, KazooState.LOST, within_s=15)
    assert KazooState.CONNECTED in states  # it did connect, and was stopped after
    assert not coordinator._zk.connected


async def test_a_zookeeper_that_does_not_answer_is_unavailable() -> None:
    coordinator = Coordinator("127.0.0.1:9", "nowhere", timeout_s=1.0)  # (discard port)
    with pytest.raises(TidingsError) as raised:
        await coordinator.start()
    assert raised.value.code is ErrorCode.UNAVAILABLE
    assert raised.value.field == "zookeeper"
    assert not coordinator._zk.connected
