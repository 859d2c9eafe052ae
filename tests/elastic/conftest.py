"""A ZooKeeper of the tests' own (a free port, a temporary directory), and the helpers the
elastic tests share: a sink that records every delivery in commit order."""

from __future__ import annotations

import gc
import os
import random
from collections.abc import Iterator, Sequence

import kazoo.protocol.connection
import kazoo.retry
import pytest

from tidings.errors import TidingsError
from tidings.store.base import Fanout, NewMessage


@pytest.fixture(autouse=True)
def collector_released() -> Iterator[None]:
    """Every hold of the garbage collector a test's matchers took is released by its end."""
    yield
    assert gc.isenabled(), "a matcher's hold of the garbage collector was never released"


@pytest.fixture(scope="session")
def zookeeper() -> Iterator[str]:
    """`host:port` of a ZooKeeper started for this test session; skipped (failed under
    CI=true) where it cannot start."""
    from tidings.elastic.coordination.zookeeper import local_zookeeper

    try:
        started = local_zookeeper()
        hosts = started.__enter__()
    except TidingsError as exc:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"ZooKeeper cannot start (required under CI): {exc.message}")
        pytest.skip(f"ZooKeeper cannot start: {exc.message}")
    try:
        with pytest.MonkeyPatch.context() as patch:
            # kazoo's connection threads draw from the global `random` at every wake-up
            # (ping jitter): during any later hypothesis draw that reads as the strategy
            # using it, and the test fails as flaky (CI: four matching and placement tests
            # once). Their own generator leaves the global one to hypothesis.
            patch.setattr(kazoo.protocol.connection, "random", random.Random())
            patch.setattr(kazoo.retry, "random", random.Random())
            yield hosts
    finally:
        _stop_leftover_clients()
        started.__exit__(None, None, None)


def _stop_leftover_clients() -> None:
    """A kazoo client still running when its ZooKeeper stops retries for ever, and kazoo's
    exit handler then waits for it: the test process hung at its exit once (a recovery's
    new operator, started as its deployment closed, kept its session). Stopped here."""
    from kazoo.client import KazooClient

    for client in [o for o in gc.get_objects() if type(o) is KazooClient]:  # (no proxies)
        if not client._stopped.is_set():
            client.stop()
            client.close()


class Recorder:
    """Every delivery of every exit point, in the order they were committed; as the store
    does, a delivery enqueued again (`fresh=False`) is skipped when it is already there."""

    def __init__(self) -> None:
        self.messages: list[NewMessage] = []
        self.keys: set[tuple[str, str]] = set()
        self.skipped = 0

    def sink(self) -> RecordingSink:
        return RecordingSink(self)


class RecordingSink:
    def __init__(self, recorder: Recorder) -> None:
        self.recorder = recorder

    async def deliver(self, fanouts: Sequence[Fanout], fresh: bool = True) -> None:
        recorder = self.recorder
        for m in (m for f in fanouts for m in f.messages()):
            key = (m.subscriber_id, m.dedup_key)
            if not fresh and key in recorder.keys:
                recorder.skipped += 1
                continue
            recorder.keys.add(key)
            recorder.messages.append(m)


@pytest.fixture
def recorder() -> Recorder:
    return Recorder()
