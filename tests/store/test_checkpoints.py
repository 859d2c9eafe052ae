"""The embedded store's write-ahead log is checkpointed by a thread beside its writer, never
in a commit (which may run on the event loop's thread)."""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

from tests.store.test_behaviour import T0, msg, subscriber

from tidings.store.checkpoints import Checkpoints
from tidings.store.loglayout import SQLiteLogStore


def test_the_writer_never_checkpoints_and_the_thread_beside_it_does(tmp_path: Path) -> None:
    store = SQLiteLogStore(str(tmp_path / "t.db"))
    assert store.checkpoints is not None
    assert store._conn.execute("PRAGMA wal_autocheckpoint").fetchone() == (0,)
    subscriber(store)
    for i in range(200):
        store.enqueue([msg(f"p{i}")])
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        last = store.checkpoints.last
        if last is not None and last[1] > 0 and last[1] == last[2]:
            break  # a checkpoint copied every frame the log held
        time.sleep(0.05)
    else:
        raise AssertionError(f"no complete checkpoint: {store.checkpoints.last}")
    store.close()
    reopened = SQLiteLogStore(str(tmp_path / "t.db"))
    assert reopened.depth("s1", T0).ready == 200
    reopened.close()


def test_closing_stops_the_thread(tmp_path: Path) -> None:
    path = tmp_path / "t.db"
    sqlite3.connect(path).execute("PRAGMA journal_mode=WAL").close()
    checkpoints = Checkpoints(lambda: sqlite3.connect(path, check_same_thread=False), 0.01)
    checkpoints.close()
    assert not checkpoints._thread.is_alive()


def test_a_store_in_memory_has_no_log_to_checkpoint() -> None:
    store = SQLiteLogStore(":memory:")
    assert store.checkpoints is None
    store.close()


def test_a_failed_checkpoint_is_tried_again_at_the_next_turn(tmp_path: Path) -> None:
    path = tmp_path / "t.db"
    sqlite3.connect(path).execute("PRAGMA journal_mode=WAL").close()

    class FailingOnce:  # a connection whose first checkpoint fails (a full disk, say)
        def __init__(self) -> None:
            self.conn, self.failed = sqlite3.connect(path, check_same_thread=False), False

        def execute(self, sql: str) -> sqlite3.Cursor:
            if not self.failed:
                self.failed = True
                raise sqlite3.OperationalError("disk I/O error")
            return self.conn.execute(sql)

        def close(self) -> None:
            self.conn.close()

    checkpoints = Checkpoints(FailingOnce, 0.01)  # type: ignore[arg-type]
    deadline = time.monotonic() + 5
    while checkpoints.last is None and time.monotonic() < deadline:
        time.sleep(0.01)
    checkpoints.close()
    assert checkpoints.last is not None
