"""Every subscriber's queue as a log over a `LogEngine` (issue #30's layout).

- **Publishing** appends each body once and the batch's fan-out as one reference record
  (arrays of subscriber numbers, sequence numbers and body ids), whatever the subscribers.
- **Leasing** reads the next references from memory (`Cursor`) and only the bodies from the
  engine (the recent ones from a cache of `cache_bytes`: a fan-out's body is read once, not
  per subscriber, and a queue a few seconds behind its publishers reads none).
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

Dedup keys, dead letters, retention and browsing are the log's user's (the broker's store:
`tidings.store.logqueues`), over `take`, `cursor` and `forget`.
"""

from __future__ import annotations

import threading
from array import array
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

from tidings.store.log.codec import Refs, decode_refs, decode_state, encode_refs, encode_state
from tidings.store.log.cursor import Cursor, Taken
from tidings.store.log.engine import LogEngine, Span, WriteBatch

_CHECKED_SEGMENTS = 8  # segments still kept looked at for dropping per commit, oldest first
_COMPACT_BODIES = 4096  # bodies' times and lengths dropped from the front at once, at least
# the recent bodies kept in memory, by their bytes and an entry's own (a count of 4,096 was
# 0.2 s of 1 -> 1 at 20,000 msg/s: a queue that fell that far behind read every body back)
CACHE_BYTES = 16 * 1024 * 1024
_ENTRY_BYTES = 128


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


class Post(NamedTuple):
    """A publication to append: its body once, the subscribers it goes to, a tag each (what
    the log's user says of that delivery) and its time (the log keeps both, never reads
    them)."""

    body: bytes
    subscribers: Sequence[str]
    tags: Sequence[int] = ()
    at: float = 0.0
    size: int = -1  # the length the log keeps for it (-1: the body's)


class Prepared(NamedTuple):
    """A group commit written, not yet applied to memory (`QueueLog.finish`)."""

    batch: WriteBatch
    staged: list[tuple[int, Segment, Refs]]


class QueueLog:
    """The log. Its methods hold its lock (a re-entrant one: a user running several of
    them as one step holds `lock` around them)."""

    def __init__(
        self,
        engine: LogEngine,
        segment_bodies: int = 4096,
        cache_bytes: int = CACHE_BYTES,
        eager: bool = False,
    ) -> None:
        self.engine = engine
        # eager: what is appended is leasable at once, before its commit (a user whose
        # engine writes in its own transaction, reading the log again if that fails)
        self._eager = eager
        self._segment_bodies = segment_bodies
        self._cache_bytes = cache_bytes
        self.lock = threading.RLock()
        self._reset()
        self._recover()

    def _reset(self) -> None:
        self._cache: OrderedDict[int, bytes] = OrderedDict()
        self._cached = 0  # the cache's bytes, as `_remember` counts them
        self._numbers: dict[str, int] = {}
        self._names: dict[int, str] = {}
        self._cursors: dict[int, Cursor] = {}
        self._dirty: set[int] = set()  # subscribers whose state changed since the last commit
        self._segments: list[Segment] = []
        self._staged = WriteBatch()
        self._staged_refs: list[tuple[int, Segment, Refs]] = []
        self._next_body = self._next_record = self._next_number = 1
        self._tombstone: int | None = None  # a forgotten subscriber's number kept named
        self._base = 1  # the body id of `_times[0]` and `_lengths[0]`
        self._times: array[float] = array("d")
        self._lengths: array[int] = array("i")

    def reload(self) -> None:
        """Forget everything in memory and read the log again (after a failed transaction
        of the log's user: what memory held may not be what was committed)."""
        with self.lock:
            self._reset()
            self._recover()

    # ------------------------------------------------------------------ writes, staged

    def publish(self, batch: Sequence[tuple[bytes, Iterable[str]]]) -> int:
        """Stage a batch of publications, each a body and its subscribers, as one record;
        answers the deliveries staged. Committed (and leasable) by the next `commit`."""
        return self.append([Post(body, list(subscribers)) for body, subscribers in batch])

    def append(self, posts: Sequence[Post]) -> int:
        """`publish` with each delivery's tag and each body's time."""
        with self.lock:
            segment = self._open_segment()
            refs = Refs(first_body=self._next_body, last_body=self._next_body + len(posts) - 1)
            for post in posts:
                body_id = self._next_body
                self._next_body += 1
                self._staged.bodies.append((body_id, post.body))
                refs.times.append(post.at)
                refs.lengths.append(post.size if post.size >= 0 else len(post.body))
                tags = post.tags or [0] * len(post.subscribers)
                for name, tag in zip(post.subscribers, tags, strict=True):
                    cursor = self._cursors[number := self._number(name)]
                    cursor.last_seq += 1  # a failed commit leaves a gap: floors step over it
                    refs.add(number, cursor.last_seq, body_id, tag)
            segment.bodies += len(posts)
            record = self._next_record
            self._next_record += 1
            self._staged.records.append((record, segment.number, encode_refs(refs)))
            self._staged_refs.append((record, segment, refs))
            if self._eager:
                self._remember(self._staged.bodies[-len(posts) :] if posts else [])
                self._place(refs)
            return len(refs)

    def may_take(self, subscriber: str, now: float) -> bool:
        """Whether a `take` at `now` may find something; True when that cannot be told at
        once (another thread holds the log: a commit is running)."""
        if not self.lock.acquire(blocking=False):
            return True
        try:
            number = self._numbers.get(subscriber)
            return number is None or self._cursors[number].may_take(now)
        finally:
            self.lock.release()

    def take(
        self,
        subscriber: str,
        n: int,
        visibility_s: float,
        now: float,
        max_attempts: int = 0,
        max_bytes: int | None = None,
    ) -> tuple[list[Taken], list[Taken]]:
        """Lease up to n ready deliveries (and take out those leased `max_attempts` times:
        the second list); their attempts are durable from the next `commit` on."""
        with self.lock:
            number = self._numbers.get(subscriber)
            if number is None:
                return [], []
            taken, dead = self._cursors[number].take(
                n, now + visibility_s, now, max_attempts, max_bytes, self.body_length
            )
            if taken or dead:
                self._dirty.add(number)
            return taken, dead

    def lease(self, subscriber: str, n: int, visibility_s: float, now: float) -> list[LogMessage]:
        """Up to n ready deliveries of the subscriber, in sequence order, with their bodies."""
        with self.lock:
            taken, _ = self.take(subscriber, n, visibility_s, now)
            bodies = self.read({t.body for t in taken})
            return [
                LogMessage(subscriber, t.seq, bodies[t.body], t.attempt, f"{t.seq}.{t.attempt}")
                for t in taken
            ]

    def ack(self, subscriber: str, receipts: Sequence[str]) -> int:
        """Acknowledge by receipts; answers how many were current (stale ones do nothing).
        Durable from the next `commit` on."""
        with self.lock:
            cursor = self.cursor(subscriber)
            if cursor is None:
                return 0
            acked = sum(cursor.ack(*_parse(r)) for r in receipts)
            if acked:
                self.touched(subscriber)
            return acked

    def nack(self, subscriber: str, receipts: Sequence[str], now: float, delay_s: float) -> int:
        """Hand leased deliveries back, ready at `now + delay_s` (in memory)."""
        with self.lock:
            cursor = self.cursor(subscriber)
            if cursor is None:
                return 0
            return sum(cursor.hand_back(*_parse(r), now + delay_s) for r in receipts)

    def number(self, name: str) -> int:
        """The subscriber's number in records (given now if it has none)."""
        with self.lock:
            return self._number(name)

    def touched(self, subscriber: str) -> None:
        """The subscriber's state changed (through its `cursor`): written at the next commit."""
        with self.lock:
            number = self._numbers.get(subscriber)
            if number is not None:
                self._dirty.add(number)

    def forget(self, subscriber: str) -> int | None:
        """Drop a subscriber's queue, cursor and number (a subscriber removed): its name
        and state go at the next commit, its references with their segments; how many
        deliveries were still queued (None: no such subscriber).

        Numbers are never given twice while a record may name them: the highest number
        given stays written, renamed to "" (a tombstone), until a higher one is given."""
        with self.lock:
            number = self._numbers.pop(subscriber, None)
            if number is None:
                return None
            del self._names[number]
            queued = self._cursors.pop(number).depth()
            self._dirty.discard(number)
            staged = self._staged.names
            staged[:] = [(n, name) for n, name in staged if n != number]
            if number == self._next_number - 1:
                staged.append((number, ""))
                self._retire_tombstone(number)
            else:
                self._staged.gone.append(number)
            return queued

    def commit(self) -> None:
        """The group commit: everything staged and every changed state in one transaction.
        If it fails, what it held is not committed (its publications and acks are to be
        answered as failed) and the log goes on from its last commit."""
        with self.lock:
            prepared = self.prepare()
            if prepared is not None:
                self.finish(prepared)

    def prepare(self) -> Prepared | None:
        """Write the group commit through the engine (`commit`'s first half: a user whose
        engine writes inside a transaction of its own calls `finish` once that committed)."""
        with self.lock:
            batch, self._staged = self._staged, WriteBatch()
            staged, self._staged_refs = self._staged_refs, []
            dirty, self._dirty = self._dirty, set()
            batch.states = [(n, encode_state(self._cursors[n].state())) for n in sorted(dirty)]
            batch.drops = self._droppable(staged)
            if not batch:
                return None
            try:
                self.engine.write(batch)
            except BaseException:
                self._staged.names[:0] = batch.names  # numbers given stay given
                self._staged.gone[:0] = batch.gone  # and forgotten ones forgotten
                self._dirty |= dirty
                raise
            return Prepared(batch, staged)

    def finish(self, prepared: Prepared) -> None:
        """What a written group commit changes in memory: its references become leasable."""
        with self.lock:
            batch, staged = prepared
            dropped = set(batch.drops)
            self._segments = [s for s in self._segments if s.span() not in dropped]
            if not self._eager:
                self._remember(batch.bodies)
            for record, segment, refs in staged:
                if not self._eager:
                    self._place(refs)
                segment.add(record, refs)
            self._trim_bodies()

    # ------------------------------------------------------------------ reads

    def cursor(self, subscriber: str) -> Cursor | None:
        number = self._numbers.get(subscriber)
        return None if number is None else self._cursors[number]

    def queues(self) -> list[tuple[str, Cursor]]:
        """Every subscriber's name and cursor."""
        with self.lock:
            return [(self._names[n], c) for n, c in self._cursors.items()]

    def read(self, ids: set[int]) -> dict[int, bytes]:
        """Bodies by id, the recent ones from memory."""
        with self.lock:
            return self._bodies(ids)

    def in_memory(self, body: int) -> bool:
        """Whether `read` takes this body from memory (this process wrote it), not the store."""
        return body in self._cache

    def body_time(self, body: int) -> float:
        return self._times[body - self._base]

    def body_length(self, body: int) -> int:
        return self._lengths[body - self._base]

    def depth(self, subscriber: str) -> int:
        """Deliveries not acknowledged (committed ones)."""
        with self.lock:
            cursor = self.cursor(subscriber)
            return 0 if cursor is None else cursor.depth()

    def segments(self) -> int:
        with self.lock:
            return len(self._segments)

    def close(self) -> None:
        self.engine.close()

    # ------------------------------------------------------------------ the parts

    def _number(self, name: str) -> int:
        number = self._numbers.get(name)
        if number is None:
            number = self._next_number
            self._next_number += 1
            self._numbers[name], self._names[number] = number, name
            self._cursors[number] = Cursor()
            self._staged.names.append((number, name))
            self._retire_tombstone(None)
        return number

    def _retire_tombstone(self, successor: int | None) -> None:
        """A higher number is written now: the tombstone before it goes."""
        if self._tombstone is not None and self._tombstone != successor:
            self._staged.gone.append(self._tombstone)
        self._tombstone = successor

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
            if all(_past(self._cursors.get(n), top) for n, top in s.tops.items())
        ]

    def _place(self, refs: Refs) -> None:
        self._note_bodies(refs)
        cursors, subscribers = self._cursors, refs.subscribers
        lengths, first = refs.lengths, refs.first_body
        if subscribers and subscribers.count(subscribers[0]) == len(subscribers):
            one = cursors.get(subscribers[0])  # one queue's (None: a subscriber forgotten)
            if one is not None:
                one.extend(refs.seqs, refs.bodies, refs.tags, _sizes(refs))
            return
        for number, seq, body, tag in zip(
            refs.subscribers, refs.seqs, refs.bodies, refs.tags, strict=True
        ):
            cursor = cursors.get(number)
            if cursor is not None:
                cursor.append(seq, body, tag, lengths[body - first])

    def _note_bodies(self, refs: Refs) -> None:
        """Keep the record's bodies' times and lengths, by body id from `_base`."""
        if refs.last_body < refs.first_body:
            return
        if not self._times:
            self._base = refs.first_body
        gap = refs.first_body - (self._base + len(self._times))
        if gap > 0:  # bodies of a failed commit: never referred to
            self._times.extend([0.0] * gap)
            self._lengths.extend([0] * gap)
        self._times.extend(refs.times)
        self._lengths.extend(refs.lengths)

    def _trim_bodies(self) -> None:
        """Drop the times and lengths of bodies older than every segment kept."""
        first = self._segments[0].first_body if self._segments else self._next_body
        drop = first - self._base
        if drop >= _COMPACT_BODIES or (drop > 0 and drop >= len(self._times)):
            del self._times[:drop]
            del self._lengths[:drop]
            self._base = first

    def _bodies(self, ids: set[int]) -> dict[int, bytes]:
        found = {i: self._cache[i] for i in ids if i in self._cache}
        missing = [i for i in ids if i not in found]
        if missing:
            found.update(self.engine.read_bodies(missing))
        return found

    def _remember(self, bodies: list[tuple[int, bytes]]) -> None:
        cache, cached = self._cache, self._cached
        for body_id, body in bodies:
            cache[body_id] = body
            cached += len(body) + _ENTRY_BYTES
        while cached > self._cache_bytes and cache:
            cached -= len(cache.popitem(last=False)[1]) + _ENTRY_BYTES
        self._cached = cached

    def _recover(self) -> None:
        stored = self.engine.recover()
        for number, name in stored.names:
            self._next_number = max(self._next_number, number + 1)
            if name:
                self._numbers[name], self._names[number] = number, name
            else:
                self._tombstone = number
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
        if not self._times:
            self._base = self._next_body

    def _note(self, record: int, number: int, refs: Refs) -> None:
        """Rebuild the segment bookkeeping from a recovered record."""
        if not self._segments or self._segments[-1].number != number:
            self._segments.append(Segment(number, refs.first_body, record))
        segment = self._segments[-1]
        segment.add(record, refs)
        segment.bodies = segment.last_body - segment.first_body + 1


def _sizes(refs: Refs) -> array[int]:
    """Each reference's body length (a body each, in order: the record's lengths as they
    are)."""
    bodies, lengths, first = refs.bodies, refs.lengths, refs.first_body
    if len(bodies) == len(lengths) and bodies[0] == first and bodies[-1] == refs.last_body:
        return lengths
    return array("i", (lengths[body - first] for body in bodies))


def _past(cursor: Cursor | None, top: int) -> bool:
    """Whether a subscriber is past `top` (a forgotten one is past everything)."""
    return cursor is None or cursor.floor >= top


def _parse(receipt: str) -> tuple[int, int]:
    seq, _, attempt = receipt.partition(".")
    try:
        return int(seq), int(attempt)
    except ValueError:
        return 0, 0
