"""The embedded store's write-ahead log, checkpointed beside its writer.

SQLite checkpoints its WAL in the commit that takes it past 1,000 pages: it copies them into
the database and syncs both files, milliseconds to tens of them on a busy disk. The embedded
store runs small commits on the event loop's own thread (`Store.apply_now`), where such a
commit would hold every connection of the broker meanwhile (a delivery's p99 at 100 msg/s
went from 9-16 to 22 ms). So its writer never checkpoints (`wal_autocheckpoint=0`), and this
thread does, on a connection of its own, every `EVERY_S`: in PASSIVE mode, which waits for
no reader or writer and makes none wait. Once a checkpoint has copied the whole log, the
writer's next transaction starts it again from its beginning, as after SQLite's own.
"""

from __future__ import annotations

import logging
import sqlite3
import threading
from collections.abc import Callable

log = logging.getLogger("tidings.store")

EVERY_S = 0.5  # at 1,000 small commits a second, about what SQLite's own 1,000 pages hold


class Checkpoints:
    def __init__(self, connect: Callable[[], sqlite3.Connection], every_s: float = EVERY_S) -> None:
        self._connect, self._every_s = connect, every_s
        self._stop = threading.Event()
        self.last: tuple[int, int, int] | None = None  # (busy, frames in the log, copied)
        self._thread = threading.Thread(target=self._run, name="tidings-checkpoints", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        conn = self._connect()
        try:
            while not self._stop.wait(self._every_s):
                try:
                    row = conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
                except sqlite3.Error:  # (a full disk, say): the next turn tries again
                    log.warning("checkpointing the store's WAL failed", exc_info=True)
                    continue
                self.last = (int(row[0]), int(row[1]), int(row[2]))
        finally:
            conn.close()

    def close(self) -> None:
        """Stop (the last connection's close checkpoints what is left, as it always does)."""
        self._stop.set()
        self._thread.join()
