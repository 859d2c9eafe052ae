"""What only the SQLite file backend promises: state survives closing and reopening."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from tidings.errors import ErrorCode, TidingsError
from tidings.model import Subscriber
from tidings.store import open_store
from tidings.store.base import NewMessage


def test_a_reopened_file_keeps_subscribers_and_queued_messages(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/deep/dir/t.db"
    first = open_store(url)
    first.add_subscriber(Subscriber("s1", "h", 1.0))
    first.enqueue([NewMessage("s1", "p1", "p1", ("x",), {"a": 1}, 1.0)])
    first.close()
    second = open_store(url)
    assert second.get_subscriber("s1") is not None
    assert [m.body for m in second.lease("s1", 5, 30, 5, 2.0)] == [{"a": 1}]
    second.close()


@pytest.mark.parametrize("url", ["mysql://x", "sqlite:///x.db?synchronous=sometimes", "nope"])
def test_an_unusable_store_url_is_a_configuration_error(url: str) -> None:
    with pytest.raises(TidingsError) as caught:
        open_store(url)
    assert (caught.value.code, caught.value.field) == (ErrorCode.CONFIG_INVALID, "store_url")


def test_a_read_does_not_wait_for_a_writer_holding_its_transaction(tmp_path: Path) -> None:
    store = open_store(f"sqlite:///{tmp_path}/t.db")
    store.add_subscriber(Subscriber("s1", "h", 1.0))
    inside, release = threading.Event(), threading.Event()

    def slow_writer(cur: object) -> None:
        store.enqueue_op([NewMessage("s1", "p1", "p1", ("x",), {}, 1.0)])(cur)
        inside.set()
        release.wait(10)

    writer = threading.Thread(target=store.batch, args=([slow_writer],))
    writer.start()
    inside.wait(10)
    seen_meanwhile = store.depth("s1", 2.0).ready  # a writer-locked read would block here
    release.set()
    writer.join()
    assert (seen_meanwhile, store.depth("s1", 2.0).ready) == (0, 1)
    store.close()
