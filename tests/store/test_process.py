"""A store in a process of its own (`?process=1`): what crosses the boundary, and what
happens when either side dies. Its answers are the store's: the behaviour suite runs over it
as `sqlite-process` (tests/store/conftest.py)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tidings.errors import ErrorCode, TidingsError
from tidings.model import Subscriber
from tidings.store import check_store_url, open_store
from tidings.store.process import ProcessStore, StoreGone


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    with open(f"/proc/{pid}/stat") as stat:  # a zombie is gone too
        return stat.read().rsplit(")", 1)[1].split()[0] == "Z"


def wait_gone(pid: int, within_s: float = 30.0) -> bool:
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        if _gone(pid):
            return True
        time.sleep(0.05)
    return False


def test_the_store_runs_in_another_process_and_answers_its_calls(tmp_path: Path) -> None:
    store = open_store(f"sqlite:///{tmp_path}/t.db?process=1")
    try:
        assert isinstance(store, ProcessStore) and store.pid not in (None, os.getpid())
        store.add_subscriber(Subscriber("s1", "h", 1.0))
        assert store.get_subscriber("s1") == Subscriber("s1", "h", 1.0)
        assert store.count_subscribers() == 1
    finally:
        store.close()
    again = open_store(f"sqlite:///{tmp_path}/t.db")  # the same file, opened here
    try:
        assert again.count_subscribers() == 1
    finally:
        again.close()


def test_only_the_stores_calls_cross_the_boundary(tmp_path: Path) -> None:
    store = open_store(f"sqlite:///{tmp_path}/t.db?process=1")
    try:
        with pytest.raises(AttributeError, match="not a Store call"):
            store.queues  # type: ignore[attr-defined]  # noqa: B018
    finally:
        store.close()


def test_after_the_stores_process_dies_every_call_fails_loudly(tmp_path: Path) -> None:
    store = open_store(f"sqlite:///{tmp_path}/t.db?process=1")
    assert isinstance(store, ProcessStore) and store.pid is not None
    os.kill(store.pid, signal.SIGKILL)
    assert wait_gone(store.pid)
    with pytest.raises(StoreGone, match="ended"):
        store.count_subscribers()
    store.close()


def test_the_stores_process_closes_the_store_and_ends_when_the_broker_is_killed(
    tmp_path: Path,
) -> None:
    script = (
        "import sys, time\n"
        "from tidings.store import open_store\n"
        f"s = open_store('sqlite:///{tmp_path}/t.db?process=1')\n"
        "print(s.pid, flush=True)\n"
        "time.sleep(600)\n"
    )
    broker = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE)
    assert broker.stdout is not None
    child = int(broker.stdout.readline())
    broker.kill()
    broker.wait()
    assert wait_gone(child)
    reopened = open_store(f"sqlite:///{tmp_path}/t.db")  # its owner's lock is free again
    reopened.close()


@pytest.mark.parametrize(
    "url",
    [
        "postgresql://postgres@127.0.0.1:5432/test?process=1",
        "sqlite:///x.db?process=yes",
    ],
)
def test_process_is_refused_where_it_cannot_hold(url: str) -> None:
    with pytest.raises(TidingsError) as raised:
        check_store_url(url)
    assert raised.value.code is ErrorCode.CONFIG_INVALID and raised.value.field == "store_url"


def test_a_store_that_cannot_open_raises_its_error_in_the_broker(tmp_path: Path) -> None:
    held = open_store(f"sqlite:///{tmp_path}/t.db")  # the log's owner: nobody else may open it
    try:
        with pytest.raises(TidingsError, match="another process has it open"):
            open_store(f"sqlite:///{tmp_path}/t.db?process=1")
    finally:
        held.close()
