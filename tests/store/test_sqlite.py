"""What only the SQLite file backend promises: state survives closing and reopening."""

from __future__ import annotations

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
