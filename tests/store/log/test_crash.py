"""A kill -9 of a real process writing the log: after recovery in a fresh process, every
committed publication is there, no committed acknowledgement is undone, and the leases
committed before the kill count as attempts."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tidings.store.log import LogEngine, QueueLog
from tidings.store.log.files import FilesLog
from tidings.store.log.lmdb import LMDBLog
from tidings.store.log.sqlite import SQLiteLog

WRITER = """
import sys
from tidings.store.log import QueueLog
from tidings.store.log.files import FilesLog
from tidings.store.log.lmdb import LMDBLog
from tidings.store.log.sqlite import SQLiteLog

kind, path = sys.argv[1], sys.argv[2]
engines = {"sqlite": SQLiteLog, "lmdb": LMDBLog, "files": FilesLog}
engine = engines[kind](path)
log = QueueLog(engine, segment_bodies=16)
i = 0
while True:
    log.publish([(b'{"n":%d}' % i, ["a", "b"])])
    log.commit()
    print("published", i, flush=True)
    if i % 10 == 9:
        leased = log.lease("a", 6, 3600.0, 0.0)
        log.commit()
        print("leased", *[m.body.decode() for m in leased], flush=True)
        done = [leased[k] for k in (0, 2, 3) if k < len(leased)]
        log.ack("a", [m.receipt for m in done])
        log.commit()
        print("acked", *[m.body.decode() for m in done], flush=True)
    i += 1
"""


def open_engine(kind: str, path: Path) -> LogEngine:
    engines = {"sqlite": SQLiteLog, "lmdb": LMDBLog, "files": FilesLog}
    engine: LogEngine = engines[kind](str(path))
    return engine


def unanswered_acks(lines: list[list[str]]) -> set[bytes]:
    """The bodies of the last lease if the kill came before its "acked" line: their acks may
    or may not have been committed."""
    pending: set[bytes] = set()
    for word, *bodies in lines:
        if word == "leased":
            pending = {b.encode() for b in bodies}
        elif word == "acked":
            pending = set()
    return pending


@pytest.mark.parametrize("kind", ["sqlite", "lmdb", "files"])
def test_kill_9_loses_no_publication_and_undoes_no_ack(tmp_path: Path, kind: str) -> None:
    path = tmp_path / "log"
    env = os.environ | {"PYTHONPATH": os.pathsep.join(sys.path)}
    proc = subprocess.Popen(
        [sys.executable, "-c", WRITER, kind, str(path)], stdout=subprocess.PIPE, env=env
    )
    assert proc.stdout is not None
    head = b"".join(proc.stdout.readline() for _ in range(300))  # under way
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    # every line the writer printed before the kill (a commit's line comes after it returns;
    # a line the kill cut is left out)
    *whole, _cut = (head + proc.stdout.read()).decode().split("\n")
    lines = [line.split() for line in whole]

    published = {b'{"n":%s}' % n.encode() for word, n, *_ in lines if word == "published"}
    leased = {m.encode() for word, *ms in lines if word == "leased" for m in ms}
    acked = {m.encode() for word, *ms in lines if word == "acked" for m in ms}
    unanswered = unanswered_acks(lines)
    assert len(acked) > 20, "the writer did not get going before the kill"

    log = QueueLog(open_engine(kind, path), segment_bodies=16)
    a = log.lease("a", 10**6, 30.0, 0.0)
    b = log.lease("b", 10**6, 30.0, 0.0)
    log.close()
    assert {m.body for m in b} >= published  # every committed publication, once each
    assert len({m.body for m in b}) == len(b)
    assert not acked & {m.body for m in a}
    assert {m.body for m in a} >= published - acked - unanswered
    again = [m for m in a if m.body in leased]
    assert again and all(m.attempt == 2 for m in again)
