"""The coordinator against a real ZooKeeper: its session (one that cannot start, or whose
start is cancelled, leaves no client running), membership, the configuration, scale records
and their barriers, the `scaler` node and its takeover, leading a role, and what its errors
say. Each test has a cluster of its own."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable

import pytest
from kazoo.protocol.states import KazooState

from tidings.elastic.coordination.barriers import MemberLost
from tidings.elastic.coordination.coordinator import Busy, Coordinator, parse_hosts
from tidings.elastic.coordination.records import ClusterConfig, Member, ScaleState, View
from tidings.errors import ErrorCode, TidingsError

CONFIG = ClusterConfig(View(0, ["m1"]), View(0, ["e1"]), ["a1"])
Sessions = Callable[[], Awaitable[Coordinator]]


@pytest.fixture
async def sessions(zookeeper: str) -> AsyncIterator[Sessions]:
    """Sessions of one cluster of the test's own; every one still open is closed at the end."""
    cluster = f"test-{uuid.uuid4().hex[:8]}"
    opened: list[Coordinator] = []

    async def session() -> Coordinator:
        coordinator = Coordinator(zookeeper, cluster)
        await coordinator.start()
        opened.append(coordinator)
        return coordinator

    yield session
    for coordinator in opened:
        if coordinator._zk.connected:
            await coordinator.close()


async def eventually(check: Callable[[], bool], within_s: float = 10.0) -> None:
    async def poll() -> None:
        while not check():
            await asyncio.sleep(0.01)

    await asyncio.wait_for(poll(), within_s)


# ------------------------------------------------------------------ session


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


# ------------------------------------------------------------------ membership


async def test_a_registered_operator_is_a_member_with_its_role_and_address(
    sessions: Sessions,
) -> None:
    coordinator = await sessions()
    await coordinator.register("m1", "matcher", "ipc:///tmp/m1")
    assert await coordinator.members() == {"m1": Member("matcher", "ipc:///tmp/m1")}
    assert await coordinator.address_of("m1") == "ipc:///tmp/m1"
    held = await coordinator.sessions()
    assert held["m1"][1] == coordinator._zk.client_id[0]  # its node is this session's


async def test_a_second_operator_of_the_same_name_is_a_conflict_that_names_it(
    sessions: Sessions,
) -> None:
    first, second = await sessions(), await sessions()
    await first.register("m1", "matcher", "ipc:///tmp/m1")
    with pytest.raises(TidingsError) as raised:
        await second.register("m1", "exit_point", "ipc:///tmp/other")
    assert raised.value.code is ErrorCode.CONFLICT
    assert "'m1' is already running" in raised.value.message
    assert await second.address_of("m1") == "ipc:///tmp/m1"


async def test_the_address_of_an_operator_not_running_is_unavailable(sessions: Sessions) -> None:
    coordinator = await sessions()
    with pytest.raises(TidingsError) as raised:
        await coordinator.address_of("ghost")
    assert raised.value.code is ErrorCode.UNAVAILABLE
    assert "operator 'ghost' is not running" in raised.value.message


async def test_a_member_that_leaves_or_whose_session_ends_is_gone(sessions: Sessions) -> None:
    watcher, leaving, ending = await sessions(), await sessions(), await sessions()
    await leaving.register("a", "matcher", "ipc:///tmp/a")
    await ending.register("b", "exit_point", "ipc:///tmp/b")
    await leaving.leave("a")
    await leaving.leave("a")  # (twice, or never registered: nothing to say)
    await ending.close()  # its node is ephemeral
    assert await watcher.members() == {}


async def test_the_membership_watch_tells_now_and_at_every_change(sessions: Sessions) -> None:
    watcher, member = await sessions(), await sessions()
    seen: list[set[str]] = []
    watcher.watch_members(seen.append)
    await eventually(lambda: seen == [set()])
    await member.register("m1", "matcher", "ipc:///tmp/m1")
    await eventually(lambda: seen[-1] == {"m1"})
    await member.leave("m1")
    await eventually(lambda: seen[-1] == set())


async def test_an_eviction_removes_only_the_node_of_the_session_it_names(
    sessions: Sessions,
) -> None:
    evicter, member = await sessions(), await sessions()
    await member.register("m1", "matcher", "ipc:///tmp/m1")
    gone: list[bool] = []
    member.watch_member("m1", lambda: gone.append(True))
    session = (await evicter.sessions())["m1"][1]
    assert not await evicter.evict("m1", session + 1)  # a namesake's session: left alone
    assert "m1" in await evicter.members()
    assert await evicter.evict("m1", session)
    assert await evicter.members() == {}
    await eventually(lambda: gone == [True])  # the operator hears of it
    assert not await evicter.evict("m1", session)  # no node left to remove


# ------------------------------------------------------------------ configuration


async def test_no_configuration_yet_is_none_and_requiring_it_says_how_to_start_one(
    sessions: Sessions,
) -> None:
    coordinator = await sessions()
    assert await coordinator.config() is None
    with pytest.raises(TidingsError) as raised:
        await coordinator.require_config()
    assert raised.value.code is ErrorCode.UNAVAILABLE
    assert f"no elastic deployment {coordinator.cluster!r}" in raised.value.message
    assert "tidings serve --matching elastic" in raised.value.message


async def test_the_first_configuration_is_written_once(sessions: Sessions) -> None:
    first, second = await sessions(), await sessions()
    assert await first.create_config(CONFIG)
    other = ClusterConfig(View(1, ["m2"]), View(0, ["e1"]), ["a2"])
    assert not await second.create_config(other)
    assert await second.require_config() == CONFIG
    await second.set_config(other)
    assert await first.config() == other


async def test_replacing_the_configuration_is_a_compare_and_set(sessions: Sessions) -> None:
    coordinator = await sessions()
    new = ClusterConfig(View(0, ["m1"]), View(0, ["e1"]), ["a2"])
    assert not await coordinator.replace_config(CONFIG, new)  # none yet
    await coordinator.create_config(CONFIG)
    assert not await coordinator.replace_config(new, CONFIG)  # not what it is
    assert await coordinator.config() == CONFIG
    assert await coordinator.replace_config(CONFIG, new)
    assert await coordinator.config() == new


# ------------------------------------------------------------------ scales


async def test_scales_are_numbered_and_one_runs_at_a_time(sessions: Sessions) -> None:
    scaler, other = await sessions(), await sessions()
    await scaler.create_config(CONFIG)
    assert await scaler.scale() is None
    first = await scaler.begin_scale("matchers", 1, ["m1"], ["m1", "m2"])
    assert first == ScaleState(1, "matchers", "start", 1, ["m1"], ["m1", "m2"])
    assert await other.scale() == first
    with pytest.raises(Busy) as raised:
        await other.begin_scale("exit_points", 1, ["e1"], ["e1", "e2"])
    assert raised.value.code is ErrorCode.CONFLICT
    assert "a scale is already in progress" in raised.value.message
    ended = await scaler.set_phase(first, "end")
    assert ended.idle and (await other.scale()) == ended
    second = await other.begin_scale("exit_points", 1, ["e1"], ["e1", "e2"])
    assert (second.id, second.kind, second.phase) == (2, "exit_points", "start")


async def test_a_scale_planned_on_a_configuration_changed_since_is_refused(
    sessions: Sessions,
) -> None:
    coordinator = await sessions()
    await coordinator.create_config(CONFIG)
    await coordinator.set_config(ClusterConfig(View(1, ["m2"]), View(0, ["e1"]), ["a1"]))
    with pytest.raises(Busy) as raised:
        await coordinator.begin_scale("matchers", 2, ["m2"], ["m2", "m3"], expect=CONFIG)
    assert "the configuration changed since the scale was planned" in raised.value.message
    assert await coordinator.scale() is None  # nothing recorded


async def test_a_phase_and_its_configuration_are_written_together(sessions: Sessions) -> None:
    coordinator = await sessions()
    await coordinator.create_config(CONFIG)
    state = await coordinator.begin_scale("matchers", 1, ["m1"], ["m1", "m2"], expect=CONFIG)
    changed = ClusterConfig(View(1, ["m1", "m2"]), View(0, ["e1"]), ["a1"])
    state = await coordinator.set_phase(state, "change", changed, since={"a1": [3, 9]})
    assert (state.phase, state.since) == ("change", {"a1": [3, 9]})
    assert await coordinator.scale() == state
    assert await coordinator.config() == changed
    aborted = await coordinator.set_phase(state, "aborted", reason="a test")
    assert (await coordinator.scale()) == aborted and aborted.reason == "a test"


async def test_the_scaler_node_is_held_from_a_scales_start_to_its_last_phase(
    sessions: Sessions,
) -> None:
    scaler, watcher = await sessions(), await sessions()
    held: list[bool] = []
    watcher.watch_scaler(held.append)
    await eventually(lambda: held == [False])
    state = await scaler.begin_scale("matchers", 1, ["m1"], ["m2"])
    who = await watcher.scaler()
    assert who is not None and who.rsplit(":", 1)[1].isdigit()  # host:pid
    await eventually(lambda: held[-1] is True)
    await scaler.set_phase(state, "end")
    assert await watcher.scaler() is None
    await eventually(lambda: held[-1] is False)


async def test_a_scale_whose_scaler_lives_cannot_be_taken_over(sessions: Sessions) -> None:
    scaler, other = await sessions(), await sessions()
    assert await other.take_over() is None  # no scale at all
    state = await scaler.begin_scale("matchers", 1, ["m1"], ["m2"])
    with pytest.raises(Busy) as raised:
        await other.take_over()
    assert "the scale has a running scaler" in raised.value.message
    await scaler.set_phase(state, "end")
    assert await other.take_over() is None  # an ended scale is nobody's to take


async def test_a_scale_whose_scaler_died_is_taken_over_and_the_old_scaler_refused(
    sessions: Sessions,
) -> None:
    dying, taker, late = await sessions(), await sessions(), await sessions()
    state = await dying.begin_scale("matchers", 1, ["m1"], ["m2"])
    await dying.close()  # its `scaler` node goes with its session
    assert await taker.take_over() == state
    with pytest.raises(Busy):
        await late.take_over()  # the taker holds it now
    # the old scaler's session, back (a write that crossed the takeover): refused
    late._running[state.id] = 0
    with pytest.raises(Busy) as raised:
        await late.set_phase(state, "change")
    assert f"scale {state.id} was taken over by another process" in raised.value.message
    moved = await taker.set_phase(state, "change")
    assert await late.scale() == moved


async def test_the_scale_watch_tells_now_and_at_every_phase(sessions: Sessions) -> None:
    scaler, watcher = await sessions(), await sessions()
    seen: list[ScaleState | None] = []
    watcher.watch_scale(seen.append)
    await eventually(lambda: seen == [None])
    state = await scaler.begin_scale("matchers", 1, ["m1"], ["m2"])
    await eventually(lambda: seen[-1] == state)
    ended = await scaler.set_phase(state, "end")
    await eventually(lambda: seen[-1] == ended)


# ------------------------------------------------------------------ barriers


async def test_arrivals_at_a_barrier_are_kept_with_what_each_said(sessions: Sessions) -> None:
    coordinator = await sessions()
    assert await coordinator.arrived(1, "ready") == set()
    await coordinator.arrive(1, "ready", "m1", b"7")
    await coordinator.arrive(1, "ready", "m1", b"8")  # (arriving twice is arriving once)
    await coordinator.arrive(1, "ready", "m2")
    assert await coordinator.arrived(1, "ready") == {"m1", "m2"}
    assert await coordinator.arrivals(1, "ready") == {"m1": b"7", "m2": b""}
    assert await coordinator.arrived(1, "done") == set()  # barriers are apart


async def test_a_barrier_wait_ends_when_every_expected_member_has_arrived(
    sessions: Sessions,
) -> None:
    waiter, member = await sessions(), await sessions()
    waiting = asyncio.create_task(waiter.wait_barrier(3, "done", {"m1", "m2"}))
    await member.arrive(3, "done", "m1")
    await asyncio.sleep(0.2)
    assert not waiting.done()
    await member.arrive(3, "done", "m2")
    await asyncio.wait_for(waiting, 10)


async def test_a_watched_member_lost_before_it_arrives_ends_the_wait_naming_it(
    sessions: Sessions,
) -> None:
    waiter, m1, m2 = await sessions(), await sessions(), await sessions()
    await m1.register("m1", "matcher", "ipc:///tmp/m1")
    await m2.register("m2", "matcher", "ipc:///tmp/m2")
    await m1.arrive(4, "ready", "m1")
    waiting = asyncio.create_task(
        waiter.wait_barrier(4, "ready", {"m1", "m2"}, watched=["m1", "m2"])
    )
    await m1.close()  # arrived before it went: no loss for this barrier
    await asyncio.sleep(0.2)
    assert not waiting.done()
    await m2.close()
    with pytest.raises(MemberLost) as raised:
        await asyncio.wait_for(waiting, 10)
    assert (raised.value.members, raised.value.barrier) == (["m2"], "ready")
    assert str(raised.value) == "m2 left before ready"


async def test_a_member_that_must_live_ends_the_wait_even_once_it_has_arrived(
    sessions: Sessions,
) -> None:
    waiter, m1 = await sessions(), await sessions()
    await m1.register("m1", "matcher", "ipc:///tmp/m1")
    await m1.arrive(5, "adopted", "m1")
    waiting = asyncio.create_task(
        waiter.wait_barrier(5, "adopted", {"m1", "a1"}, ["m1"], must_live=frozenset({"m1"}))
    )
    await m1.close()
    with pytest.raises(MemberLost) as raised:
        await asyncio.wait_for(waiting, 10)
    assert raised.value.members == ["m1"]


# ------------------------------------------------------------------ leading a role


async def test_one_session_at_a_time_leads_a_role(sessions: Sessions) -> None:
    first, second = await sessions(), await sessions()
    assert await first.lead("autoscaler")
    assert not await second.lead("autoscaler", blocking=False)
    assert await second.lead("other-role", blocking=False)  # roles are apart
    waiting = asyncio.create_task(second.lead("autoscaler"))
    await asyncio.sleep(0.2)
    assert not waiting.done()
    await first.close()  # the lead goes with its session
    assert await asyncio.wait_for(waiting, 10)


async def test_a_cancelled_wait_to_lead_stops_contending(sessions: Sessions) -> None:
    first, second, third = await sessions(), await sessions(), await sessions()
    assert await first.lead("autoscaler")
    waiting = asyncio.create_task(second.lead("autoscaler"))
    await asyncio.sleep(0.2)
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting
    await first.close()
    assert await third.lead("autoscaler", blocking=False)  # the cancelled one is not ahead


# ------------------------------------------------------------------ hosts


def test_hosts_are_checked_and_a_bad_list_names_the_option() -> None:
    assert parse_hosts(" zk1:2181, zk2:2182 ,") == "zk1:2181,zk2:2182"
    for bad in ("zk1", "zk1:", ":2181", "zk1:99999", "zk1:port"):
        with pytest.raises(TidingsError) as raised:
            parse_hosts(bad)
        assert raised.value.code is ErrorCode.CONFIG_INVALID
        assert raised.value.field == "zookeeper"
        assert f"--zookeeper {bad!r}: expected HOST:PORT" in raised.value.message
    with pytest.raises(TidingsError, match="--zookeeper is empty"):
        parse_hosts(" , ")
