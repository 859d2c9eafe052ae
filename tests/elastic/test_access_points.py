"""Access point scaling (E-SilboPS section 5.1, stateless): an access point joins a running
deployment, leaves it once its pending publications are answered, or is lost and removed by
the recovery; brokers on one store share one deployment, each an access point."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
from tests.conftest import PG
from tests.elastic.conftest import Recorder
from tests.elastic.stream import PUBLISHERS, STABLE, Stream, check, held_subscriptions

from tidings.client import Client
from tidings.client.sync import SubscriberHandle
from tidings.config import load_settings
from tidings.elastic.coordination.coordinator import Busy
from tidings.elastic.hosting.deployment import Deployment
from tidings.elastic.protocol.scaling import ScaleReport
from tidings.errors import ErrorCode, TidingsError
from tidings.model import Publication
from tidings.server import EmbeddedServer


def publication(p: int, n: int) -> Publication:
    return Publication(
        f"pub-{p}-{n}",
        float(n),
        {"p": p, "n": n},
        (f"t/{p}",),
        {"publisher": p, "n": n, "even": n % 2 == 0},
    )


async def until(condition: object, step_s: float = 0.02) -> None:
    """Until `condition()` (maybe a coroutine function) holds; the caller bounds the wait."""
    while True:
        found = condition()  # type: ignore[operator]
        if asyncio.iscoroutine(found):
            found = await found
        if found:
            return
        await asyncio.sleep(step_s)


async def access_points(deployment: Deployment) -> list[str]:
    return list((await deployment.coordinator.require_config()).access_points)


async def scale_when_free(deployment: Deployment, **counts: int) -> list[ScaleReport]:
    """A scale, after any other process's scale (a recovery, say) has ended."""
    while True:
        try:
            return await deployment.scale(**counts)
        except Busy:
            await asyncio.sleep(0.05)


@contextlib.asynccontextmanager
async def joining(first: Deployment, recorder: Recorder) -> AsyncIterator[Deployment]:
    """A second deployment process on the same cluster: it joins as an access point."""
    second = Deployment(first.zookeeper, recorder.sink, cluster=first.cluster, join=True)
    try:
        await second.start()
        assert second.joined
        yield second
    finally:
        await second.close()


async def test_an_access_point_joins_under_a_stream_and_both_publish_through_scales(
    zookeeper: str,
) -> None:
    recorder = Recorder()
    async with Deployment(zookeeper, recorder.sink) as first:
        stream = Stream(first)
        stream.subscribe_stable()
        extra: list[asyncio.Task[None]] = []
        async with contextlib.AsyncExitStack() as stack:

            async def joining_then_scaling() -> None:
                # while the stream flows through the first access point
                second = await stack.enter_async_context(joining(first, recorder))
                assert not first.joined
                assert set(await access_points(first)) == {first.ap.id, second.ap.id}
                for p in (PUBLISHERS, PUBLISHERS + 1):
                    stream.via[p] = second
                    extra.append(asyncio.create_task(stream.publisher(p, 40)))
                extra.append(asyncio.create_task(stream.churn(second, "churn-b")))
                await until(lambda: stream.published[PUBLISHERS] >= 20)
                for counts in ({"matchers": 3}, {"exit_points": 2}):
                    reports = await first.scale(**counts)
                    assert [r.outcome for r in reports] == ["done"]
                await until(lambda: stream.published[PUBLISHERS] >= 60)

            try:
                await asyncio.wait_for(stream.run(joining_then_scaling), 120)
                await asyncio.wait_for(asyncio.gather(*extra), 60)
            finally:
                for task in extra:
                    task.cancel()
            await asyncio.wait_for(asyncio.gather(*stream.futures), 60)
            second = stream.via[PUBLISHERS]
            assert second.ap.counters["publications"] == sum(
                stream.published[p] for p in (PUBLISHERS, PUBLISHERS + 1)
            )
            check(stream, recorder.messages)  # the joined access point's publishers too
            stable = {s.id for subs, _ in STABLE.values() for s in subs}
            assert held_subscriptions(first) == stable | stream.live_churn
            status = await first.status()
            assert set(status["access_points"]) == {first.ap.id, second.ap.id}
            assert len(status["matchers"]["members"]) == 3
            assert len(status["exit_points"]["members"]) == 2
            assert status["missing"] == []


async def test_an_access_point_leaves_once_its_pending_publications_are_answered(
    zookeeper: str,
) -> None:
    recorder = Recorder()
    pending: list[asyncio.Future[int]] = []
    async with Deployment(zookeeper, recorder.sink, matchers=2) as first:
        stream = Stream(first)
        stream.subscribe_stable()
        async with joining(first, recorder) as second:

            async def leaving() -> None:
                p = PUBLISHERS
                stream.via[p] = second
                for n in range(50):  # at once: all 50 are pending when it starts to leave
                    pending.append(second.ap.publish_nowait(publication(p, n)))
                stream.published[p] = 50
                assert second.ap.backlog() == 50
                await second.close()  # the first access point's publishers go on meanwhile
                assert all(f.done() and not f.cancelled() for f in pending)
                assert sum(f.result() for f in pending) > 0  # answered: delivered
                (left,) = [r for r in second.reports if r.kind == "access_points"][-1:]
                assert (left.old, left.new) == ([first.ap.id, second.ap.id], [first.ap.id])
                assert await access_points(first) == [first.ap.id]
                before = len(recorder.messages)
                await until(lambda: len(recorder.messages) > before + 20)  # still flowing
                reports = await first.scale(matchers=3, exit_points=2)
                assert [r.outcome for r in reports] == ["done", "done"]

            await asyncio.wait_for(stream.run(leaving), 120)
            with pytest.raises(TidingsError) as refused:
                second.ap.publish_nowait(publication(PUBLISHERS, 50))
            assert refused.value.code == ErrorCode.UNAVAILABLE
        stream.futures += pending
        check(stream, recorder.messages)
        status = await first.status()
        assert status["access_points"] == [first.ap.id] and status["missing"] == []
        assert [r["kind"] for r in status["last_scales"]] == ["matchers", "exit_points"]


async def test_a_lost_access_point_is_removed_by_the_recovery_and_later_scales_run(
    zookeeper: str,
) -> None:
    recorder = Recorder()
    async with Deployment(zookeeper, recorder.sink, matchers=2) as first:
        stream = Stream(first)
        stream.subscribe_stable()
        outcomes: list[str] = []
        async with joining(first, recorder) as second:
            lost = second.ap.id

            async def losing_an_access_point() -> None:
                for n in range(30):  # some answered, some in flight when it dies
                    second.ap.publish_nowait(publication(PUBLISHERS, n))
                await asyncio.sleep(0)
                await second.ap.stop(crash=True)  # its broker killed: its member node goes
                await until(lambda: _without(first, lost))
                for counts in ({"matchers": 3}, {"exit_points": 2}, {"matchers": 1}):
                    outcomes.extend(r.outcome for r in await scale_when_free(first, **counts))

            await asyncio.wait_for(stream.run(losing_an_access_point), 120)
            removals = [
                r
                for r in [*first.reports, *second.reports]
                if r.kind == "access_points" and lost not in r.new
            ]
        assert outcomes == ["done", "done", "done"]
        assert [(r.new, r.outcome) for r in removals] == [([first.ap.id], "done")]
        check(stream, recorder.messages)  # the lost one's deliveries: in order, never twice
        status = await first.status()
        assert status["access_points"] == [first.ap.id] and status["missing"] == []


async def test_two_processes_watching_run_one_recovery_of_a_lost_matcher(
    zookeeper: str,
) -> None:
    """Both deployment processes see the matcher go and start a replacement; one begins the
    recovery, the other is refused (Busy), stops its replacement, waits and finds nothing
    left to do."""
    recorder = Recorder()
    async with Deployment(zookeeper, recorder.sink, matchers=2) as first:
        stream = Stream(first)
        stream.subscribe_stable()
        async with joining(first, recorder) as second:
            stream.via[PUBLISHERS] = second
            victim = sorted(first.matchers)[0]
            extra = asyncio.create_task(stream.publisher(PUBLISHERS, 40))

            async def losing_a_matcher() -> None:
                await until(lambda: stream.published[PUBLISHERS] >= 10)
                await first.matchers[victim].stop(crash=True)
                await until(lambda: _replaced(first, {victim}))

            try:
                await asyncio.wait_for(stream.run(losing_a_matcher), 120)
                await asyncio.wait_for(extra, 60)
            finally:
                extra.cancel()
            await asyncio.wait_for(asyncio.gather(*stream.futures), 60)
            await until(lambda: any(_recovered(r) for r in [*first.reports, *second.reports]))
            runs = [r for r in [*first.reports, *second.reports] if r.kind == "recover"]
            status = await first.status()
        assert [r.outcome for r in runs] == ["done"]
        check(stream, recorder.messages)
        assert status["unassigned"] == [] and status["missing"] == []
        assert len(status["matchers"]["members"]) == 2


async def _without(deployment: Deployment, ap: str) -> bool:
    """`ap` is out of the configuration and no scale runs."""
    scale = await deployment.coordinator.scale()
    return ap not in await access_points(deployment) and (scale is None or scale.idle)


async def test_an_access_point_lost_in_a_matcher_scale_aborts_it_and_is_removed(
    zookeeper: str,
) -> None:
    """The matchers wait for every access point's StartScale: one lost must not hold the
    scale for ever."""
    recorder = Recorder()
    async with Deployment(zookeeper, recorder.sink) as first:
        stream = Stream(first)
        stream.subscribe_stable()
        outcomes: list[str] = []
        async with joining(first, recorder) as second:
            second.ap.on_scale = _deaf  # type: ignore[method-assign]  # sends no StartScale

            async def scaling() -> None:
                scale = asyncio.create_task(first.scale(matchers=2))
                await until(_scale_started(first))
                await second.ap.stop(crash=True)
                (aborted,) = await scale
                assert second.ap.id in aborted.reason
                outcomes.append(aborted.outcome)
                await until(lambda: _without(first, second.ap.id))
                outcomes.extend(r.outcome for r in await scale_when_free(first, matchers=2))

            await asyncio.wait_for(stream.run(scaling), 120)
        assert outcomes == ["aborted", "done"]
        check(stream, recorder.messages)


async def _deaf(state: object) -> None:
    """An access point that does not act on any scale."""


def _scale_started(deployment: Deployment) -> object:
    async def started() -> bool:
        scale = await deployment.coordinator.scale()
        return scale is not None and scale.kind == "matchers" and not scale.idle

    return started


async def test_the_creator_leaving_hands_its_operators_over_to_the_other_access_point(
    zookeeper: str,
) -> None:
    """The process that created the deployment (and runs its matchers and exit points)
    closes while another access point remains: that one leaves first, then its operators
    stop, and the other process's recovery replaces them, losing nothing. Its access point
    knows every subscription (as a broker does, from the store)."""
    recorder = Recorder()
    first = await Deployment(zookeeper, recorder.sink, matchers=2, exit_points=2).start()
    try:
        async with joining(first, recorder) as second:
            stream = Stream(second)  # every publisher and subscription change through it
            for subs, _ in STABLE.values():
                for sub in subs:
                    first.subscribe(sub)
                second.know(subs)
            # held before the stream starts: they came through the other access point
            stable = {s.id for subs, _ in STABLE.values() for s in subs}
            await until(lambda: held_subscriptions(first) == stable)
            outcomes: list[str] = []

            async def the_creator_leaving() -> None:
                hosted = {*first.matchers, *first.exit_points}
                await first.close()
                await until(lambda: _replaced(second, hosted))
                await until(lambda: any(_recovered(r) for r in second.reports))
                outcomes.extend(r.outcome for r in second.reports if r.kind == "recover")
                before = sum(stream.published.values())
                await until(lambda: sum(stream.published.values()) > before + 30)
                outcomes.extend(r.outcome for r in await scale_when_free(second, matchers=3))

            await asyncio.wait_for(stream.run(the_creator_leaving), 120)
            assert outcomes[-2:] == ["done", "done"]
            check(stream, recorder.messages)
            assert held_subscriptions(second) == stable | stream.live_churn
            status = await second.status()
            assert status["access_points"] == [second.ap.id] and status["missing"] == []
            assert set(status["matchers"]["members"]) == set(second.matchers)
            assert set(status["exit_points"]["members"]) == set(second.exit_points)
    finally:
        await first.close()


def _recovered(report: ScaleReport) -> bool:
    return report.kind == "recover" and report.outcome == "done"


async def _replaced(deployment: Deployment, gone: set[str]) -> bool:
    """None of `gone` is in the views any more, and no scale runs."""
    config = await deployment.coordinator.require_config()
    views = {*config.matchers.members, *config.exit_points.members}
    scale = await deployment.coordinator.scale()
    return not views & gone and (scale is None or scale.idle)


async def test_a_deployment_whose_access_points_are_all_gone_is_taken_over(
    zookeeper: str,
) -> None:
    recorder = Recorder()
    cluster = f"c{uuid.uuid4().hex[:10]}"
    async with Deployment(zookeeper, recorder.sink, cluster=cluster) as first:
        old = await first.coordinator.require_config()
    # the configuration stays behind; nobody runs it
    async with Deployment(zookeeper, recorder.sink, cluster=cluster, join=True) as again:
        assert not again.joined
        config = await again.coordinator.require_config()
        assert config.access_points == [again.ap.id]
        assert config.matchers.view > old.matchers.view
        assert await again.publish([publication(0, 0)]) == [0]
        with pytest.raises(TidingsError) as conflict:
            async with Deployment(zookeeper, recorder.sink, cluster=cluster):
                pass
        assert conflict.value.code == ErrorCode.CONFLICT
        assert await access_points(again) == [again.ap.id]


# ------------------------------------------------------------------ brokers


def test_two_brokers_on_one_store_share_one_deployment_each_an_access_point(
    zookeeper: str, tmp_path: Path, schema: str
) -> None:
    settings = load_settings(
        {
            "store_url": f"{PG}?schema={schema}",
            "matching": "elastic",
            "elastic__zookeeper": zookeeper,
            "elastic__cluster": f"brokers-{uuid.uuid4().hex[:8]}",
            "admin_token": "secret",
        },
        env={},
    )
    admin = {"Authorization": "Bearer secret"}

    def took(handle: SubscriberHandle) -> list[int]:
        messages = handle.pull(10)
        if messages:
            handle.ack([m.receipt for m in messages])
        return [m.body["data"]["n"] for m in messages]

    a = EmbeddedServer(dataclasses.replace(settings, data_dir=tmp_path / "a"))
    b = EmbeddedServer(dataclasses.replace(settings, data_dir=tmp_path / "b"))
    with a, Client(a.url) as client_a:
        alice = client_a.register()
        alice.subscribe(topics=["news/#"])
        alice.subscribe(predicates=[{"key": "level", "op": ">", "value": 2}])
        creator = elastic_of(a)
        with b, Client(b.url) as client_b:
            joiner = elastic_of(b)
            assert joiner.joined and not creator.joined
            # it sent none of the subscriptions again, and knows them (for a recovery)
            assert len(joiner.ap.records) == 2
            assert not joiner.ap.out._sockets  # nothing sent to any matcher yet
            status = httpx.get(f"{b.url}/v1/admin/cluster", headers=admin).json()
            assert sorted(status["access_points"]) == sorted([creator.ap.id, joiner.ap.id])
            published = client_b.publish({"n": 1}, topics=["news/x"], attributes={"level": 3})
            assert published.deliveries == 1  # one subscriber (both its subscriptions match)
            made = client_b.register()
            made.subscribe(topics=["sport/#"])  # through broker b's access point
            bob = client_a.subscriber(made.id, made.token)
            assert client_a.publish({"n": 2}, topics=["sport/y"]).deliveries == 1
            assert took(alice) == [1]
            assert took(bob) == [2]
        # b has left: a runs alone again
        status = httpx.get(f"{a.url}/v1/admin/cluster", headers=admin).json()
        assert status["access_points"] == [creator.ap.id]
        assert client_a.publish({"n": 3}, topics=["news/z"]).deliveries == 1
        assert client_a.publish({"n": 4}, topics=["sport/z"]).deliveries == 1
        assert took(alice) == [3]
        assert took(bob) == [4]


def elastic_of(server: EmbeddedServer) -> Deployment:
    assert server.broker.elastic is not None
    return server.broker.elastic.running
