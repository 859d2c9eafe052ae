"""Operators as separate processes: `tidings matcher` and `tidings exit-point` join a running
deployment, a scale takes them in, and deliveries reach the exit point process's store."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import orjson
from tests.elastic.conftest import Recorder
from tests.elastic.stream import Stream, check

from tidings.elastic.hosting.deployment import Deployment
from tidings.model import Publication, Subscriber, Subscription
from tidings.store import open_store

CLI = [sys.executable, "-m", "tidings.cli.main"]


@contextmanager
def operator(*args: str) -> Iterator[tuple[subprocess.Popen[bytes], str]]:
    """A `tidings matcher|exit-point` process, and the id it announced."""
    proc = subprocess.Popen([*CLI, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()  # one JSON line once it has joined
        if not line:
            raise AssertionError(proc.stderr.read().decode() if proc.stderr else "no output")
        yield proc, orjson.loads(line)["operator"]
    finally:
        proc.terminate()
        proc.wait(20)


async def joined(deployment: Deployment, ids: set[str]) -> None:
    ready = asyncio.Event()
    deployment.coordinator.watch_members(lambda members: ids <= members and ready.set())
    await ready.wait()


def test_matchers_and_an_exit_point_in_their_own_processes_join_and_deliver(
    zookeeper: str, tmp_path: Path
) -> None:
    store_url = f"sqlite:///{tmp_path / 'tidings.db'}"
    store = open_store(store_url)
    for who in ("alice", "bob", "carol", "dave"):
        store.add_subscriber(Subscriber(who, "x", 0.0))
    recorder = Recorder()

    async def scenario(ids: list[str], cluster: str, deployment: Deployment) -> list[dict]:
        await joined(deployment, set(ids))
        for n, who in enumerate(("alice", "bob", "carol", "dave")):
            deployment.subscribe(Subscription(f"s{n}", who, "topic", ("news/#",)))
        reports = await deployment.scale(matchers=3, exit_points=2)
        assert [r.outcome for r in reports] == ["done", "done"]
        assert set(ids) <= {
            *(await deployment.coordinator.require_config()).matchers.members,
            *(await deployment.coordinator.require_config()).exit_points.members,
        }
        pubs = [Publication(f"p{i}", float(i), {"i": i}, ("news/x",)) for i in range(20)]
        counts = await deployment.publish(pubs)
        assert counts == [4] * 20
        status = subprocess.run(
            [*CLI, "cluster", "status", "--zookeeper", zookeeper, "--cluster", cluster],
            capture_output=True,
            check=True,
        )
        return [orjson.loads(status.stdout)]

    async def main() -> list[dict]:
        deployment = Deployment(zookeeper, recorder.sink)
        async with deployment:
            common = ["--zookeeper", zookeeper, "--cluster", deployment.cluster]
            with (
                operator("matcher", *common) as (_, m1),
                operator("matcher", *common) as (_, m2),
                operator("exit-point", *common, "--store", store_url) as (_, e1),
            ):
                return await scenario([m1, m2, e1], deployment.cluster, deployment)

    [status] = asyncio.run(main())
    assert len(status["matchers"]["members"]) == 3
    assert len(status["exit_points"]["members"]) == 2
    in_store = {
        (m.subscriber_id, m.publication_id)
        for who in ("alice", "bob", "carol", "dave")
        for m in store.lease(who, 100, 30.0, 5, 1.0)
    }
    recorded = {(m.subscriber_id, m.publication_id) for m in recorder.messages}
    assert not in_store & recorded  # each subscriber is served by one exit point
    everything = {(w, f"p{i}") for w in ("alice", "bob", "carol", "dave") for i in range(20)}
    assert in_store | recorded == everything
    assert in_store  # the exit point process delivered its subscribers' share
    store.close()


def test_a_matcher_process_killed_under_a_stream_is_replaced_and_nothing_is_lost(
    zookeeper: str,
) -> None:
    """SIGKILL: no goodbye. Its session would hold its node for 40 s: the deployment's
    process sees its connection gone and evicts it (PeerWatch) well before."""
    recorder = Recorder()

    async def main() -> list[str]:
        async with Deployment(zookeeper, recorder.sink, transport="tcp") as deployment:
            common = ["--zookeeper", zookeeper, "--cluster", deployment.cluster]
            with operator("matcher", *common, "--session-timeout", "40") as (proc, remote):
                await joined(deployment, {remote})
                stream = Stream(deployment)
                stream.subscribe_stable()
                (scaled,) = await deployment.scale(matchers=2)  # the remote one is taken
                assert scaled.outcome == "done"

                async def recovered() -> None:
                    while not any(r.kind == "recover" for r in deployment.reports):
                        await asyncio.sleep(0.05)

                async def killing() -> None:
                    await asyncio.sleep(0.3)
                    proc.kill()
                    await asyncio.wait_for(recovered(), 20)  # (not the session's 40 s)
                    await asyncio.sleep(0.3)

                await asyncio.wait_for(stream.run(killing), 120)
                check(stream, recorder.messages)
                config = await deployment.coordinator.require_config()
                assert remote not in config.matchers.members
                return [r.outcome for r in deployment.reports if r.kind == "recover"]

    assert asyncio.run(main()) == ["done"]


def test_a_session_timeout_out_of_range_is_refused_with_exit_2() -> None:
    done = subprocess.run(
        [*CLI, "matcher", "--zookeeper", "127.0.0.1:1", "--session-timeout", "0"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert "--session-timeout" in done.stderr and "Traceback" not in done.stderr
