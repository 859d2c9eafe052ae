"""The broker's append-only event logs (publications, deliveries), read by the Spark pipeline.

Format and rotation are documented in docs/eventlog.md. A file is written under a name
beginning with `_inprogress-`, which Spark's file source ignores, and renamed when rotated,
so readers only ever see finished files. Files left in progress by a crash are finished at
the next start (a torn last line is quarantined by the reader).

The deliveries log, on an event loop, is written once per turn of the loop, not once per
call: a fan-out's leases and acks come from a hundred tasks resumed in one turn, and each
`write` + `flush` is a system call (2.7 us; broker CPU per delivery, issue #30). A crash
loses at most the lines of the turn it interrupts, as it lost the lines of a commit not yet
logged before. The publications log is written at once, before the publish is answered: with
`matching = "spark"` a 201 means the publication is in it (docs/guarantees.md).
"""

from __future__ import annotations

import asyncio
import os
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Protocol

import orjson

from tidings.model import Publication
from tidings.private import DIR_MODE, opener

INPROGRESS = "_inprogress-"

# One line of the deliveries log (docs/eventlog.md): its fields in this order, encoded as
# orjson encodes them, from bytes rather than a dict per delivery (a fan-out to a hundred
# subscribers made a hundred dicts, each encoded alone)
_DELIVERY = (
    b'{"publication_id":%b,"subscriber_id":%b,"subscription_ids":%b,"event":%b,"kind":%b,'
    b'"at":%b,"attempt":%d}\n'
)
_MESSAGE = b'{"publication_id":%b,"subscriber_id":%b,"subscription_ids":%b%b%d}\n'  # the same
_dumps = orjson.dumps
_KINDS = {kind: _dumps(kind) for kind in (None, "topic", "content", "function")}


class Fanned(Protocol):
    """A publication's deliveries as their lines name them (`tidings.store.base.Fanout`)."""

    @property
    def publication_id(self) -> str: ...
    @property
    def enqueued_at(self) -> float: ...
    @property
    def owners(self) -> Mapping[str, Sequence[str]]: ...


class Delivered(Protocol):
    """A message as its delivery lines name it (`tidings.store.base.Message`)."""

    @property
    def publication_id(self) -> str: ...
    @property
    def subscriber_id(self) -> str: ...
    @property
    def subscription_ids(self) -> Sequence[str]: ...
    @property
    def attempt(self) -> int: ...


def enqueued_lines(fanouts: Iterable[Fanned], kinds: Iterable[str | None]) -> bytes:
    """The `enqueued` lines of publications' deliveries: each owner (subscriber) of each
    fan-out with its matching subscription ids, and (`kinds`, in the same order) the kind of
    the first of them."""
    kind = iter(kinds)
    out = []
    for f in fanouts:
        pid, when = _dumps(f.publication_id), _dumps(f.enqueued_at)
        for owner, ids in f.owners.items():
            found = next(kind)
            named = _KINDS.get(found) or _dumps(found)
            out.append(_DELIVERY % (pid, _dumps(owner), _dumps(ids), b'"enqueued"', named, when, 0))
    return b"".join(out)


def message_lines(messages: Iterable[Delivered], event: str, at: float) -> bytes:
    """The lines of leased messages' `event` (`delivered`, `acked`) at `at`; kind unknown.
    A lease's or an ack's messages are one subscriber's, most often with the same matching
    subscriptions: those are encoded once for a run of messages that repeat them."""
    tail = b',"event":' + _dumps(event) + b',"kind":null,"at":' + _dumps(at) + b',"attempt":'
    sid: str | None = None
    ids: Sequence[str] | None = None
    sid_json = ids_json = b""
    out = []
    for m in messages:
        if m.subscriber_id != sid:
            sid, sid_json = m.subscriber_id, _dumps(m.subscriber_id)
        if m.subscription_ids != ids:
            ids, ids_json = m.subscription_ids, _dumps(m.subscription_ids)
        out.append(_MESSAGE % (_dumps(m.publication_id), sid_json, ids_json, tail, m.attempt))
    return b"".join(out)


@dataclass(frozen=True, slots=True)
class Retention:
    """How much of a log's finished files is kept: the newest, within both bounds."""

    max_age_s: float = 7 * 24 * 3600.0
    max_bytes: int = 1024**3


class RotatingLog:
    """JSON Lines appended to one directory, rotated by size and age; finished files beyond
    the retention are deleted at each rotation (the oldest first)."""

    def __init__(
        self,
        directory: Path,
        max_bytes: int,
        max_age_s: float,
        retention: Retention | None = None,
        *,
        per_turn: bool = False,
    ) -> None:
        self._dir = directory
        self._per_turn = per_turn  # lines written at the end of the loop's turn, not at once
        self._dir.mkdir(parents=True, exist_ok=True, mode=DIR_MODE)
        self._max_bytes, self._max_age_s = max_bytes, max_age_s
        self._retention = retention or Retention()
        self._lock = threading.Lock()
        self._file: IO[bytes] | None = None
        self._name = ""
        self._opened = 0.0
        self._seq = 0
        self._pending: list[bytes] = []  # lines waiting for the end of the loop's turn
        self._soon: asyncio.AbstractEventLoop | None = None  # the loop that will flush them
        finish_leftovers(directory)

    def write(self, records: Iterable[dict[str, Any]]) -> None:
        self.write_lines(b"".join(orjson.dumps(r) + b"\n" for r in records))

    def write_lines(self, data: bytes) -> None:
        """Append encoded JSON lines: at once; `per_turn`, at the end of this turn of the
        running event loop (at once outside one)."""
        if not data:
            return
        loop = _running_loop() if self._per_turn else None
        with self._lock:
            self._pending.append(data)
            if loop is None:
                self._flush()
            elif self._soon is not loop:
                loop.call_soon(self.flush)
                self._soon = loop

    def flush(self) -> None:
        """Write the pending lines (rotating the file once it reaches its size)."""
        with self._lock:
            self._flush()

    def tick(self) -> None:
        """Rotate a file that has grown old, so readers see it without waiting for size."""
        with self._lock:
            self._flush()
            if self._file is not None and time.time() - self._opened >= self._max_age_s:
                self._rotate()

    def close(self) -> None:
        with self._lock:
            self._flush()
            if self._file is not None:
                self._rotate()

    def _flush(self) -> None:
        self._soon = None
        if not self._pending:
            return
        data = self._pending[0] if len(self._pending) == 1 else b"".join(self._pending)
        self._pending.clear()
        out = self._current()
        out.write(data)
        out.flush()
        if out.tell() >= self._max_bytes:
            self._rotate()

    def _current(self) -> IO[bytes]:
        if self._file is None:
            self._seq += 1
            self._opened = time.time()
            self._name = f"{int(self._opened * 1000):013d}-{os.getpid()}-{self._seq:06d}.jsonl"
            path = self._dir / f"{INPROGRESS}{self._name}"
            self._file = open(path, "ab", opener=opener)  # noqa: SIM115
        return self._file

    def _rotate(self) -> None:
        assert self._file is not None
        self._file.close()
        os.replace(self._dir / f"{INPROGRESS}{self._name}", self._dir / self._name)
        self._file = None
        prune(self._dir, self._retention, time.time())


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


def prune(directory: Path, retention: Retention, now: float) -> list[Path]:
    """Delete the finished files older than the retention's age, then the oldest while the
    rest is larger than its size; the files deleted."""
    finished = sorted(p for p in directory.glob("*.jsonl") if not p.name.startswith(INPROGRESS))
    sizes = {p: p.stat().st_size for p in finished}
    total, gone = sum(sizes.values()), []
    for path in finished:  # names begin with their opening time: oldest first
        if now - path.stat().st_mtime <= retention.max_age_s and total <= retention.max_bytes:
            break
        path.unlink(missing_ok=True)
        total -= sizes[path]
        gone.append(path)
    return gone


def finish_leftovers(directory: Path) -> None:
    """Rename files a crashed writer left in progress; their last line may be torn."""
    for path in directory.glob(f"{INPROGRESS}*"):
        os.replace(path, directory / path.name[len(INPROGRESS) :])


class EventLog:
    """Both logs of one broker process."""

    def __init__(
        self,
        directory: Path,
        max_bytes: int,
        max_age_s: float,
        retention: Retention | None = None,
    ) -> None:
        self.publications = RotatingLog(directory / "publications", max_bytes, max_age_s, retention)
        self.deliveries = RotatingLog(
            directory / "deliveries", max_bytes, max_age_s, retention, per_turn=True
        )

    def published(self, publications: Iterable[Publication]) -> None:
        self.publications.write(p.to_json() for p in publications)

    def delivery_lines(self, lines: bytes) -> None:
        """Lines of the deliveries log, encoded (`enqueued_lines`, `message_lines`)."""
        self.deliveries.write_lines(lines)

    def tick(self) -> None:
        self.publications.tick()
        self.deliveries.tick()

    def close(self) -> None:
        self.publications.close()
        self.deliveries.close()
