"""Every subscriber's queue as a log over a `LogEngine` (issue #30's layout).

- **Publishing** appends each body once and the batch's fan-out as one reference record
  (arrays of subscriber numbers, sequence numbers and body ids), whatever the subscribers.
- **Leasing** reads the next references from memory (`Cursor`) and only the bodies from the
  engine (the recent ones from a small cache: a fan-out's body is read once, not per
  subscriber).
- **Acknowledging** raises the subscriber's ack floor, or adds to its sparse set above it.
- **`commit`** is the group commit: the staged bodies and records, and the state of every
  subscriber changed since the last commit (floor, sparse set, attempts), in one transaction.
  A publication is leasable, and an ack or a lease's attempt durable, once committed: the
  caller answers its publisher, acknowledger or subscriber after `commit` returns.
- **Segments**: a segment is a run of records and their bodies (`segment_bodies` bodies at
  most); it is dropped once every subscriber's floor is past its references.
- **Recovery** (opening) reads the names and states, then the kept records once, oldest
  first, and rebuilds each cursor; a lease in flight at a crash is ready again at once, its
  attempt counted (the attempt was committed before the lease was handed out).

Not here yet (the broker wiring, the next step): dedup keys, dead letters after
`max_attempts`, retention, nack delays across a crash.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

from tidings.store.log.codec import Refs, decode_refs, decode_state, encode_refs, encode_state
from tidings.store.log.cursor import Cursor
from tidings.store.log.engine import LogEngine, Span, WriteBatch

_CHECKED_SEGMENTS = 8  # segments still kept looked at for dropping per commit, oldest first


class LogMessage(NamedTuple):
    """A leased delivery: `receipt` acknowledges this lease of it, and no other."""

    subscriber: str
    seq: int
    body: bytes
    attempt: int
    receipt: str


@dataclass(slots=True)
class Segment:
    number: int
    first_body: int
    first_record: int
    last_body: int = 0
    last_record: int = 0
    bodies: int = 0
    tops: dict[int, int] = field(default_factory=dict)  # subscriber -> its last seq here

    def span(self) -> Span:
        return Span(self.first_body, self.last_body, self.first_record, self.last_record)

    def add(self, record: int, refs: Refs) -> None:
        """A record committed (or recovered) into this segment."""
        self.last_record = max(self.last_record, record)
        self.last_body = max(self.last_body, refs.last_body)
        for subscriber, seq in zip(refs.subscribers, refs.seqs, strict=True):
            self.tops[subscriber] = seq


class QueueLog:
    def __init__(
        self, engine: LogEngine, segment_bodies: int = 4096, cache_bodies: int = 4096
    ) -> None:
        self.engine = engine
        self._segment_bodies = segment_bodies
        self._cache: OrderedDict[int, bytes] = OrderedDict()
        self._cache_size = cache_bodies
        self._lock = threading.Lock()
        self._numbers: dict[str, int] = {}
        self._names: dict[int, str] = {}
        self._cursors: dict[int, Cursor] = {}
        self._dirty: set[int] = set()  # subscribers whose state changed since the last commit
        self._segments: list[Segment] = []
        self._staged = WriteBatch()
        self._staged_refs: list[tuple[int, Segment, Refs]] = []
        self._next_body = self._next_record = 1
        self._recover()

    # ------------------------------------------------------------------ writes, staged

    def publish(self, batch: Sequence[tuple[bytes, Iterable[str]]]) -> int:
        """Stage a batch of publications, each a body and its subscribers, as one record;
        answers the deliveries staged. Committed (and leasable) by the next `commit`."""
        with self._lock:
            segment = self._open_segment()
            refs = Refs(first_body=self._next_body, last_body=self._next_body + len(batch) - 1)
            for body, subscribers in batch:
                body_id = self._next_body
                self._next_body += 1
                self._staged.bodies.append((body_id, body))
                for name in subscribers:
                    cursor = self._cursors[number := self._number(name)]
                    cursor.last_seq += 1  # a failed commit leaves a gap: floors step over it
                    refs.add(number, cursor.last_seq, body_id)
            segment.bodies += len(batch)
            record = self._next_record
            self._next_record += 1
            self._staged.records.append((record, segment.number, encode_refs(refs)))
            self._staged_refs.append((record, segment, refs))
            return len(refs)

    def lease(self, subscriber: str, n: int, visibility_s: float, now: float) -> list[LogMessage]:
        """Up to n ready deliveries of the subscriber, in sequence order; their attempts are
        durable from the next `commit` on."""
        with self._lock:
            number = self._numbers.get(subscriber)
            if number is None:
                return []
            taken = self._cursors[number].take(n, now + visibility_s, now)
            if taken:
                self._dirty.add(number)
            bodies = self._bodies({body for _, body, _ in taken})
            return [
                LogMessage(subscriber, seq, bodies[body], attempt, f"{seq}.{attempt}")
                for seq, body, attempt in taken
            ]

    def ack(self, subscriber: str, receipts: Sequence[str]) -> int:
        """Acknowledge by receipts; answers how many were current (stale ones do nothing).
        Durable from the next `commit` on."""
        with self._lock:
            number = self._numbers.get(subscriber)
            if number is None:
                return 0
            acked = sum(self._cursors[number].ack(*_parse(r)) for r in receipts)
            if acked:
                self._dirty.add(number)
            return acked

    def nack(self, subscriber: str, receipts: Sequence[str], now: float, delay_s: float) -> int:
        """Hand leased deliveries back, ready at `now + delay_s` (in memory)."""
        with self._lock:
            cursor = self._cursor_of(subscriber)
            if cursor is None:
                return 0
            return sum(cursor.hand_back(*_parse(r), now + delay_s) for r in receipts)

    def commit(self) -> None:
        """The group commit: everything staged and every changed state in one transaction.
        If it fails, what it held is not committed (its publications and acks are to be
        answered as failed) and the log goes on from its last commit."""
        with self._lock:
            batch, self._staged = self._staged, WriteBatch()
            staged, self._staged_refs = self._staged_refs, []
            dirty, self._dirty = self._dirty, set()
            batch.states = [(n, encode_state(self._cursors[n].state())) for n in sorted(dirty)]
            batch.drops = self._droppable(staged)
            if not batch:
                return
            try:
                self.engine.write(batch)
            except BaseException:
                self._staged.names[:0] = batch.names  # numbers given stay given
                self._dirty |= dirty
                raise
            dropped = set(batch.drops)
            self._segments = [s for s in self._segments if s.span() not in dropped]
            self._remember(batch.bodies)
            for record, segment, refs in staged:
                self._place(refs)
                segment.add(record, refs)

    # ------------------------------------------------------------------ reads

    def depth(self, subscriber: str) -> int:
        """Deliveries not acknowledged (committed ones)."""
        with self._lock:
            cursor = self._cursor_of(subscriber)
            return 0 if cursor is None else cursor.depth()

    def segments(self) -> int:
        with self._lock:
            return len(self._segments)

    def close(self) -> None:
        self.engine.close()

    # ------------------------------------------------------------------ the parts

    def _number(self, name: str) -> int:
        number = self._numbers.get(name)
        if number is None:
            number = len(self._numbers) + 1
            self._numbers[name], self._names[number] = number, name
            self._cursors[number] = Cursor()
            self._staged.names.append((number, name))
        return number

    def _cursor_of(self, subscriber: str) -> Cursor | None:
        number = self._numbers.get(subscriber)
        return None if number is None else self._cursors[number]

    def _open_segment(self) -> Segment:
        last = self._segments[-1] if self._segments else None
        if last is None or last.bodies >= self._segment_bodies:
            number = last.number + 1 if last else 1
            last = Segment(number, self._next_body, self._next_record)
            self._segments.append(last)
        return last

    def _droppable(self, staged: list[tuple[int, Segment, Refs]]) -> list[Span]:
        """The closed segments every subscriber is past (a few, oldest first); never one
        that this commit writes into (its staged references are not in its `tops` yet)."""
        writing = {segment.number for _, segment, _ in staged}
        closed = [s for s in self._segments[:-1] if s.number not in writing]
        return [
            s.span()
            for s in closed[:_CHECKED_SEGMENTS]
            if all(self._cursors[n].floor >= top for n, top in s.tops.items())
        ]

    def _place(self, refs: Refs) -> None:
        cursors, subscribers = self._cursors, refs.subscribers
        if subscribers and subscribers.count(subscribers[0]) == len(subscribers):
            cursors[subscribers[0]].extend(refs.seqs, refs.bodies)  # a batch to one queue
            return
        for number, seq, body in zip(refs.subscribers, refs.seqs, refs.bodies, strict=True):
            cursors[number].append(seq, body)

    def _bodies(self, ids: set[int]) -> dict[int, bytes]:
        found = {i: self._cache[i] for i in ids if i in self._cache}
        missing = [i for i in ids if i not in found]
        if missing:
            found.update(self.engine.read_bodies(missing))
        return found

    def _remember(self, bodies: list[tuple[int, bytes]]) -> None:
        cache = self._cache
        for body_id, body in bodies[-self._cache_size :]:
            cache[body_id] = body
        while len(cache) > self._cache_size:
            cache.popitem(last=False)

    def _recover(self) -> None:
        stored = self.engine.recover()
        for number, name in stored.names:
            self._numbers[name], self._names[number] = number, name
        states = {number: decode_state(data) for number, data in stored.states}
        for number in self._names:
            self._cursors[number] = Cursor(states.get(number))
        for record, segment, data in stored.records:
            refs = decode_refs(data)
            self._place(refs)
            self._note(record, segment, refs)
        if self._segments:
            self._next_body = self._segments[-1].last_body + 1
            self._next_record = self._segments[-1].last_record + 1

    def _note(self, record: int, number: int, refs: Refs) -> None:
        """Rebuild the segment bookkeeping from a recovered record."""
        if not self._segments or self._segments[-1].number != number:
            self._segments.append(Segment(number, refs.first_body, record))
        segment = self._segments[-1]
        segment.add(record, refs)
        segment.bodies = segment.last_body - segment.first_body + 1


def _parse(receipt: str) -> tuple[int, int]:
    seq, _, attempt = receipt.partition(".")
    try:
        return int(seq), int(attempt)
    except ValueError:
        return 0, 0
