"""The log on segment files of its own: a file per segment, appended with framed group
commits, and a meta file of names and consumer states.

- A segment file (`<segment>.seg`) holds the frames of the commits that wrote into that
  segment: its bodies and records. Dropping the segment is unlinking the file.
- The meta file (`meta.log`) holds a frame per commit with the names and states it changed
  and the subscribers it forgot; the last state of a subscriber wins. Past `META_COMPACT_AT`
  bytes it is rewritten as a snapshot (a new file renamed over the old: a crash leaves one or
  the other, whole).
- A frame is its length, its CRC32 and its payload: recovery stops a file at the first frame
  that is short or whose checksum fails (a torn tail of a commit that never returned), and
  cuts it there.
- A commit appends to the segment files first, then to the meta file, then unlinks dropped
  segments: a crash between leaves records whose commit never returned (their publications
  were not answered, and may still be delivered: at least once), never a state without them.
- `sync=False` (the default) leaves a commit in the OS's page cache when it returns, which a
  crash of the process keeps (as SQLite's `synchronous=NORMAL`); `sync=True` fsyncs the
  files a commit wrote before it returns (one fsync per file per group commit).

Bodies are read back with `pread` through an index in memory: body id -> (segment, offset,
length), about 150 bytes of Python objects a body kept. `recover` opens the segments, so the
log calls it before any write.
"""

from __future__ import annotations

import os
import struct
import zlib
from collections.abc import Iterator, Sequence
from pathlib import Path

from tidings.store.log.engine import Stored, WriteBatch

_FRAME = struct.Struct("<II")  # payload length, crc32
_ITEM = struct.Struct("<qI")  # key, value length
_COUNT = struct.Struct("<I")
_REFS_HEADER = struct.Struct("<Iqq")  # codec's: count, first body, last body
META_COMPACT_AT = 8 << 20


def _items(items: Sequence[tuple[int, bytes]]) -> list[bytes]:
    parts = [_COUNT.pack(len(items))]
    for key, value in items:
        parts += (_ITEM.pack(key, len(value)), value)
    return parts


def _read_items(data: bytes, at: int) -> tuple[list[tuple[int, int, int]], int]:
    """(key, offset of the value in data, length) each, and where the items end."""
    (n,) = _COUNT.unpack_from(data, at)
    at += _COUNT.size
    found = []
    for _ in range(n):
        key, length = _ITEM.unpack_from(data, at)
        at += _ITEM.size
        found.append((key, at, length))
        at += length
    return found, at


def _frames(path: Path) -> Iterator[tuple[int, bytes]]:
    """(offset of the payload, payload) of each whole frame; cuts the file at a torn one."""
    data = path.read_bytes()
    at = 0
    while at + _FRAME.size <= len(data):
        length, crc = _FRAME.unpack_from(data, at)
        payload = data[at + _FRAME.size : at + _FRAME.size + length]
        if len(payload) < length or zlib.crc32(payload) != crc:
            break
        yield at + _FRAME.size, payload
        at += _FRAME.size + length
    if at < len(data):
        os.truncate(path, at)


class FilesLog:
    def __init__(self, path: str, sync: bool = False) -> None:
        self._dir = Path(path)
        self._dir.mkdir(parents=True, exist_ok=True)
        self._sync = sync
        self._files: dict[int, int] = {}  # segment -> fd, open for reading and appending
        self._sizes: dict[int, int] = {}
        self._records: dict[int, tuple[int, int]] = {}  # segment -> first, last record id
        self._index: dict[int, tuple[int, int, int]] = {}  # body -> segment, offset, length
        self._bodies_of: dict[int, list[int]] = {}  # segment -> its body ids
        self._record_count: dict[int, int] = {}
        self._recovered = False
        self._names: dict[int, str] = {}
        self._states: dict[int, bytes] = {}
        self._read_meta()
        self._meta = os.open(self._dir / "meta.log", os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o600)

    # ------------------------------------------------------------------ writes

    def write(self, batch: WriteBatch) -> None:
        assert self._recovered, "recover() opens the segments: the log calls it first"
        for segment, (bodies, records) in self._by_segment(batch).items():
            self._append_segment(segment, bodies, records)
        if batch.names or batch.states or batch.gone:
            names = [(n, name.encode()) for n, name in batch.names]
            gone = [(n, b"") for n in batch.gone]
            self._append(self._meta, b"".join(_items(names) + _items(batch.states) + _items(gone)))
            self._names.update(batch.names)
            self._states.update(batch.states)
            self._forget(batch.gone)
            if os.fstat(self._meta).st_size > META_COMPACT_AT:
                self._compact_meta()
        for span in batch.drops:
            for segment, (first, last) in list(self._records.items()):
                if span.first_record <= first and last <= span.last_record:
                    self._unlink(segment)

    def _by_segment(
        self, batch: WriteBatch
    ) -> dict[int, tuple[list[tuple[int, bytes]], list[tuple[int, bytes]]]]:
        """Each record, and each body by the record that brought it, under its segment."""
        parts: dict[int, tuple[list[tuple[int, bytes]], list[tuple[int, bytes]]]] = {}
        ranges = []
        for record, segment, refs in batch.records:
            _, first, last = _REFS_HEADER.unpack_from(refs)
            ranges.append((first, last, segment))
            parts.setdefault(segment, ([], []))[1].append((record, refs))
        for body_id, body in batch.bodies:
            segment = next(s for first, last, s in ranges if first <= body_id <= last)
            parts[segment][0].append((body_id, body))
        return parts

    def _append_segment(
        self, segment: int, bodies: list[tuple[int, bytes]], records: list[tuple[int, bytes]]
    ) -> None:
        fd = self._files.get(segment)
        if fd is None:
            flags = os.O_RDWR | os.O_CREAT | os.O_APPEND
            fd = self._files[segment] = os.open(self._dir / f"{segment:012d}.seg", flags, 0o600)
            self._sizes[segment] = 0
        payload = b"".join(_items(bodies) + _items(records))
        start = self._sizes[segment] + _FRAME.size
        self._append(fd, payload)
        self._sizes[segment] += _FRAME.size + len(payload)
        self._note_segment(segment, start, payload)

    def _append(self, fd: int, payload: bytes) -> None:
        os.write(fd, _FRAME.pack(len(payload), zlib.crc32(payload)) + payload)
        if self._sync:
            os.fsync(fd)

    def _note_segment(self, segment: int, start: int, payload: bytes) -> list[int]:
        """Index a frame's bodies; answers its record ids."""
        bodies, at = _read_items(payload, 0)
        records, _ = _read_items(payload, at)
        for body_id, offset, length in bodies:
            self._index[body_id] = (segment, start + offset, length)
        self._bodies_of.setdefault(segment, []).extend(b for b, _, _ in bodies)
        ids = [record for record, _, _ in records]
        self._record_count[segment] = self._record_count.get(segment, 0) + len(ids)
        if ids:
            first, last = self._records.get(segment, (ids[0], ids[-1]))
            self._records[segment] = (min(first, ids[0]), max(last, ids[-1]))
        return ids

    def _unlink(self, segment: int) -> None:
        os.close(self._files.pop(segment))
        del self._sizes[segment], self._records[segment], self._record_count[segment]
        os.unlink(self._dir / f"{segment:012d}.seg")
        for body_id in self._bodies_of.pop(segment, ()):
            del self._index[body_id]

    def _compact_meta(self) -> None:
        names = [(n, name.encode()) for n, name in self._names.items()]
        payload = b"".join(_items(names) + _items(list(self._states.items())))
        fresh = self._dir / "meta.new"
        with open(fresh, "wb") as out:
            out.write(_FRAME.pack(len(payload), zlib.crc32(payload)) + payload)
            out.flush()
            os.fsync(out.fileno())
        os.replace(fresh, self._dir / "meta.log")
        os.close(self._meta)
        self._meta = os.open(self._dir / "meta.log", os.O_RDWR | os.O_APPEND)

    # ------------------------------------------------------------------ reads

    def read_bodies(self, ids: Sequence[int]) -> dict[int, bytes]:
        found = {}
        for body_id in ids:
            where = self._index.get(body_id)
            if where is not None:
                segment, offset, length = where
                found[body_id] = os.pread(self._files[segment], length, offset)
        return found

    def _read_meta(self) -> None:
        path = self._dir / "meta.log"
        if not path.exists():
            return
        for _, payload in _frames(path):
            names, at = _read_items(payload, 0)
            states, at = _read_items(payload, at)
            for number, offset, length in names:
                self._names[number] = payload[offset : offset + length].decode()
            for number, offset, length in states:
                self._states[number] = payload[offset : offset + length]
            if at < len(payload):  # (a snapshot has no list of the forgotten)
                self._forget([number for number, _, _ in _read_items(payload, at)[0]])

    def _forget(self, numbers: Sequence[int]) -> None:
        for number in numbers:
            self._names.pop(number, None)
            self._states.pop(number, None)

    def recover(self) -> Stored:
        self._recovered = True
        return Stored(sorted(self._names.items()), sorted(self._states.items()), self._scan())

    def _scan(self) -> Iterator[tuple[int, int, bytes]]:
        for path in sorted(self._dir.glob("*.seg")):
            segment = int(path.stem)
            frames = list(_frames(path))
            self._files[segment] = os.open(path, os.O_RDWR | os.O_APPEND)
            self._sizes[segment] = os.path.getsize(path)
            for start, payload in frames:
                self._note_segment(segment, start, payload)
                records, _ = _read_items(payload, _read_items(payload, 0)[1])
                for record, offset, length in records:
                    yield record, segment, payload[offset : offset + length]

    # ------------------------------------------------------------------ the figures

    def count_bodies(self) -> int:
        return len(self._index)

    def count_records(self) -> int:
        return sum(self._record_count.values())

    def disk_bytes(self) -> int:
        return sum(p.stat().st_size for p in self._dir.iterdir())

    def close(self) -> None:
        for fd in self._files.values():
            os.close(fd)
        self._files.clear()
        os.close(self._meta)
