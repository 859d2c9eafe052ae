"""The event logs: JSON lines, finished files only, leftovers finished at start."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import orjson

from tidings.eventlog import (
    INPROGRESS,
    EventLog,
    Retention,
    RotatingLog,
    enqueued_lines,
    message_lines,
    prune,
)
from tidings.model import Publication
from tidings.store.base import Fanout, Message


def lines(directory: Path) -> list[dict[str, object]]:
    return [
        orjson.loads(line)
        for f in sorted(directory.glob("[!_]*.jsonl"))
        for line in f.read_bytes().splitlines()
    ]


def test_records_are_visible_only_once_their_file_is_rotated(tmp_path: Path) -> None:
    log = RotatingLog(tmp_path, max_bytes=10**6, max_age_s=3600)
    log.write([{"a": 1}])
    assert lines(tmp_path) == [] and len(list(tmp_path.glob("_inprogress-*"))) == 1
    log.close()
    assert lines(tmp_path) == [{"a": 1}]


def test_a_file_rotates_when_it_reaches_its_size(tmp_path: Path) -> None:
    log = RotatingLog(tmp_path, max_bytes=50, max_age_s=3600)
    for i in range(10):
        log.write([{"i": i, "pad": "x" * 20}])
    log.close()
    assert [r["i"] for r in lines(tmp_path)] == list(range(10))
    assert len(list(tmp_path.glob("*.jsonl"))) == 5  # two 30-byte records pass 50 bytes


def test_a_file_rotates_when_it_grows_old(tmp_path: Path) -> None:
    log = RotatingLog(tmp_path, max_bytes=10**6, max_age_s=0)
    log.write([{"a": 1}])
    log.tick()
    assert lines(tmp_path) == [{"a": 1}]


def test_a_file_left_in_progress_by_a_crash_is_finished_at_the_next_start(tmp_path: Path) -> None:
    (tmp_path / "_inprogress-0000000000001-1-000001.jsonl").write_bytes(b'{"a": 1}\n{"tor')
    RotatingLog(tmp_path, max_bytes=10**6, max_age_s=60)
    assert (tmp_path / "0000000000001-1-000001.jsonl").exists()


def test_publications_are_logged_as_their_json(tmp_path: Path) -> None:
    log = EventLog(tmp_path, 10**6, 60)
    pub = Publication("p1", 1.0, "d", ("t",), {"x": 1}, ())
    log.published([pub])
    log.delivery_lines(b'{"publication_id":"p1","event":"enqueued"}\n')
    log.close()
    assert lines(tmp_path / "publications") == [pub.to_json()]
    assert lines(tmp_path / "deliveries")[0]["event"] == "enqueued"


def test_finished_files_past_the_retention_are_deleted_oldest_first(tmp_path: Path) -> None:
    log = RotatingLog(tmp_path, max_bytes=10, max_age_s=3600, retention=Retention(3600, 25))
    for i in range(5):  # each write passes 10 bytes: one finished file each
        log.write([{"i": i, "pad": "x" * 8}])
    kept = sorted(p.name for p in tmp_path.glob("*.jsonl"))
    assert len(kept) == 1  # 23 bytes each: only the newest fits in 25
    assert b'"i":4' in (tmp_path / kept[0]).read_bytes()


def test_finished_files_older_than_the_retention_go_whatever_their_size(tmp_path: Path) -> None:
    old = tmp_path / "0000000000001-1-000001.jsonl"
    old.write_bytes(b"{}\n")
    os.utime(old, (1.0, 1.0))
    fresh = tmp_path / f"{INPROGRESS}0000000000002-1-000002.jsonl"
    fresh.write_bytes(b"{}\n")
    os.utime(fresh, (1.0, 1.0))  # a file being written is never pruned
    assert prune(tmp_path, Retention(max_age_s=60, max_bytes=10**9), now=1000.0) == [old]
    assert fresh.exists()


async def test_on_an_event_loop_a_turns_lines_are_written_at_its_end(tmp_path: Path) -> None:
    log = RotatingLog(tmp_path, max_bytes=10**6, max_age_s=3600, per_turn=True)
    log.write([{"a": 1}])
    log.write([{"a": 2}])
    assert list(tmp_path.iterdir()) == []  # nothing written yet: the turn is not over
    await asyncio.sleep(0)
    (inprogress,) = tmp_path.glob(f"{INPROGRESS}*")
    assert inprogress.read_bytes() == b'{"a":1}\n{"a":2}\n'
    log.write([{"a": 3}])
    log.close()  # what is pending is written before the file is finished
    assert lines(tmp_path) == [{"a": 1}, {"a": 2}, {"a": 3}]


async def test_a_publication_is_in_its_log_before_the_publish_is_answered(tmp_path: Path) -> None:
    log = EventLog(tmp_path, 10**6, 60)
    log.published([Publication("p1", 1.0, "d", ("t",), {}, ())])
    (inprogress,) = (tmp_path / "publications").glob(f"{INPROGRESS}*")
    assert b'"id":"p1"' in inprogress.read_bytes()  # no turn of the loop has ended yet
    log.close()


def delivery(pid: str, sid: str, ids: list[str], event: str, kind: str | None, at: float,
             attempt: int) -> bytes:  # fmt: skip
    """A deliveries log line as it was first written: a dict, encoded by orjson."""
    return orjson.dumps({
        "publication_id": pid, "subscriber_id": sid, "subscription_ids": ids, "event": event,
        "kind": kind, "at": at, "attempt": attempt,
    }) + b"\n"  # fmt: skip


def test_enqueued_lines_are_the_dicts_they_were_byte_for_byte() -> None:
    at = 1764280000.123456
    fanouts = [
        Fanout("p1", "p1", b"{}", at, {"s1": ["a", "b"], "s2": ("c",)}),
        Fanout("p2", "p2", b"{}", 1.0, {'q"uote': ["d\u00e9"]}),
    ]
    assert enqueued_lines(fanouts, ["topic", None, "content"]) == (
        delivery("p1", "s1", ["a", "b"], "enqueued", "topic", at, 0)
        + delivery("p1", "s2", ["c"], "enqueued", None, at, 0)
        + delivery("p2", 'q"uote', ["d\u00e9"], "enqueued", "content", 1.0, 0)
    )


def test_message_lines_are_the_dicts_they_were_byte_for_byte() -> None:
    shapes = [("s", ("x", "y")), ("s", ("x", "y")), ("s", ("z",)), ("t", ("z",)), ("s", ("z",))]
    messages = [
        Message(n, sid, f"p{n}", ids, b"{}", 0.0, n, f"r{n}", 30.0)
        for n, (sid, ids) in enumerate(shapes, 1)
    ]
    assert message_lines(messages, "acked", 5.0) == b"".join(
        delivery(f"p{n}", sid, list(ids), "acked", None, 5.0, n)
        for n, (sid, ids) in enumerate(shapes, 1)
    )
