"""The segment-file engine's own promise: a commit torn by a crash is cut, whole, and the
commits before it stay."""

from __future__ import annotations

from pathlib import Path

from tidings.store.log import QueueLog
from tidings.store.log.files import FilesLog


def test_a_torn_last_frame_is_cut_and_the_commits_before_it_stay(tmp_path: Path) -> None:
    log = QueueLog(FilesLog(str(tmp_path)))
    for i in range(3):
        log.publish([(b'{"n":%d}' % i, ["a"])])
        log.commit()
    log.close()
    (segment,) = tmp_path.glob("*.seg")
    whole = segment.stat().st_size
    with segment.open("r+b") as f:
        f.truncate(whole - 5)  # the third commit's frame, half written
    with (tmp_path / "meta.log").open("ab") as f:
        f.write(b"\x10\x00")  # a frame header begun

    again = QueueLog(FilesLog(str(tmp_path)))
    assert [m.body for m in again.lease("a", 10, 30.0, 0.0)] == [b'{"n":0}', b'{"n":1}']
    again.commit()
    again.publish([(b'{"n":9}', ["a"])])
    again.commit()
    assert [m.body for m in again.lease("a", 10, 30.0, 0.0)] == [b'{"n":9}']
    again.close()
    third = QueueLog(FilesLog(str(tmp_path)))
    assert [m.seq for m in third.lease("a", 10, 30.0, 0.0)] == [1, 2, 3]
