"""One subscriber's queue in memory: its references above the ack floor, what is in flight.

References (sequence number, body id, tag, the body's size) are four arrays in sequence
order from `head`, so a backlog costs 24 bytes a delivery, not an object; every reference
above the floor is there, the acknowledged ones too (in `acked`: the sparse set). `next` is
the first never leased since the start; below it, a reference is acknowledged, in flight
(`leases`), or ready again (`ready`: expired or handed back, ready once its time in
`waiting` comes).
Settling a reference without a lease (a dead letter, a purge, an expiry) acknowledges it.
"""

from __future__ import annotations

import heapq
from array import array
from bisect import bisect_left
from collections.abc import Callable, Iterator
from functools import partial
from typing import NamedTuple

from tidings.store.log.codec import ConsumerState

_COMPACT_AT = 4096  # references dropped from the arrays' front at once, at least
_STALE_TIMEOUTS = 1024  # settled leases' timeout entries kept beyond twice the leases held


class Taken(NamedTuple):
    """A reference leased (or found dead: leased `max_attempts` times already)."""

    seq: int
    body: int
    tag: int
    attempt: int


# a lease's reference made at once, not through the named tuple's constructor (a Python
# call of its own a delivery)
_taken: Callable[[tuple[int, int, int, int]], Taken] = partial(tuple.__new__, Taken)


class Cursor:
    def __init__(self, state: ConsumerState | None = None) -> None:
        state = state or ConsumerState(0)
        self.floor = state.floor
        self.acked: set[int] = set(state.acked)
        self.attempts: dict[int, int] = dict(state.attempts)
        self.seqs: array[int] = array("q")
        self.bodies: array[int] = array("q")
        self.tags: array[int] = array("i")
        self.sizes: array[int] = array("i")
        self.size = 0  # the sizes from `head` on, acknowledged ones too (`queued_bytes`)
        self.head = 0
        self.next = 0
        self.last_seq = state.floor
        self.leases: dict[int, float] = {}  # seq -> leased until
        self.timeouts: list[tuple[float, int]] = []  # (leased until, seq), a heap
        self.waiting: list[tuple[float, int]] = []  # (ready at, seq), a heap
        self.ready: list[int] = []  # seqs ready again, a heap
        self.handed: set[int] = set()  # handed back (nacked) since their last lease

    def state(self) -> ConsumerState:
        return ConsumerState(self.floor, tuple(self.acked), dict(self.attempts))

    def append(self, seq: int, body: int, tag: int = 0, size: int = 0) -> None:
        """A reference committed (or recovered, perhaps acknowledged) at the queue's end."""
        if seq > self.floor:
            self.seqs.append(seq)
            self.bodies.append(body)
            self.tags.append(tag)
            self.sizes.append(size)
            self.size += size
        self.last_seq = max(self.last_seq, seq)

    def extend(
        self, seqs: array[int], bodies: array[int], tags: array[int], sizes: array[int]
    ) -> None:
        """References in sequence order, appended at once when all are above the floor."""
        if seqs and seqs[0] > self.floor:
            self.seqs.extend(seqs)
            self.bodies.extend(bodies)
            self.tags.extend(tags)
            self.sizes.extend(sizes)
            self.size += sum(sizes)
            self.last_seq = max(self.last_seq, seqs[-1])
        else:
            for seq, body, tag, size in zip(seqs, bodies, tags, sizes, strict=True):
                self.append(seq, body, tag, size)

    def depth(self) -> int:
        """References not acknowledged."""
        return len(self.seqs) - self.head - len(self.acked)

    def queued_bytes(self) -> int:
        """The sizes of the references not acknowledged (the sparse set is looked up)."""
        acked = sum(self.sizes[bisect_left(self.seqs, seq, self.head)] for seq in self.acked)
        return self.size - acked

    def hidden(self, now: float) -> int:
        """References not ready at `now`: leased, or handed back with a delay still running."""
        leased = sum(1 for until in self.leases.values() if until > now)
        return leased + sum(
            1 for at, seq in self.waiting if at > now and seq > self.floor and seq not in self.acked
        )

    def may_take(self, now: float) -> bool:
        """Whether `take` at `now` may find something: False when nothing is past `next`,
        ready again, or due (a lease run out, a delay ended). Read without changing
        anything, so a caller may look without the log's writer."""
        return (
            self.next < len(self.seqs)
            or bool(self.ready)
            or bool(self.timeouts and self.timeouts[0][0] <= now)
            or bool(self.waiting and self.waiting[0][0] <= now)
        )

    def take(
        self,
        n: int,
        until: float,
        now: float,
        max_attempts: int = 0,
        max_bytes: int | None = None,
        size: Callable[[int], int] | None = None,
    ) -> tuple[list[Taken], list[Taken]]:
        """Lease up to n ready references in sequence order; those leased `max_attempts`
        times already are taken out instead, as the second list (to be dead-lettered). With
        `max_bytes`, the bodies' `size`s come to at most that (the first always goes)."""
        self._expire(now)
        taken: list[Taken] = []
        dead: list[Taken] = []
        budget = max_bytes if max_bytes is not None and size is not None else None
        while len(taken) < n:
            found = self._next_ready()
            if found is None:
                break
            seq, index = found
            body = self.bodies[index]
            if max_attempts and self.attempts.get(seq, 0) >= max_attempts:
                dead.append(Taken(seq, body, self.tags[index], self.attempts[seq]))
                self.settle(seq)
                continue
            if budget is not None and size is not None:
                budget -= size(body)
                if taken and budget < 0:
                    self._put_back(seq, index)
                    break
            taken.append(self._lease(seq, body, self.tags[index], until))
        return taken, dead

    def ack(self, seq: int, attempt: int) -> bool:
        """Acknowledge the lease `attempt` of `seq`; False for a stale or unknown one."""
        if seq in self.handed or seq in self.acked or self.attempts.get(seq) != attempt:
            return False
        self.settle(seq)
        return True

    def holds(self, seq: int, attempt: int, now: float) -> bool:
        """Whether `attempt` is the current lease of `seq` at `now`."""
        return self.leases.get(seq, 0.0) > now and self.attempts.get(seq) == attempt

    def hand_back(self, seq: int, attempt: int, ready_at: float) -> bool:
        """A nack: the leased `seq` is ready again at `ready_at`."""
        if self.attempts.get(seq) != attempt or seq in self.handed or seq in self.acked:
            return False
        self.leases.pop(seq, None)
        self._drop_stale_timeouts()
        self.handed.add(seq)
        heapq.heappush(self.waiting, (ready_at, seq))
        return True

    def hasten(self, now: float) -> int:
        """Make what waits out a delay ready at `now`; how many."""
        moved = 0
        for at, seq in self.waiting:
            if seq not in self.acked and seq > self.floor:
                moved += at > now
                heapq.heappush(self.ready, seq)
        self.waiting.clear()
        return moved

    def settle(self, seq: int) -> None:
        """Take `seq` out of the queue for good (acknowledged, dead-lettered, purged)."""
        if self.leases.pop(seq, None) is not None:
            self._drop_stale_timeouts()
        self.attempts.pop(seq, None)
        self.handed.discard(seq)
        if seq > self.floor:
            self.acked.add(seq)
            self._advance()

    def entries(self, after: int = 0) -> Iterator[tuple[int, int, int]]:
        """(seq, body, tag) of every reference not acknowledged past `after`, in order."""
        start = max(self.head, bisect_left(self.seqs, after + 1, self.head))
        acked = self.acked
        for i in range(start, len(self.seqs)):
            seq = self.seqs[i]
            if seq not in acked:
                yield seq, self.bodies[i], self.tags[i]

    def leased_at(self, seq: int, now: float) -> bool:
        return self.leases.get(seq, 0.0) > now

    def ready_at(self, seq: int) -> float | None:
        """When a reference handed back with a delay is ready (None: not waiting)."""
        times = [at for at, s in self.waiting if s == seq]
        return max(times) if times else None

    def _next_ready(self) -> tuple[int, int] | None:
        """The next ready reference, (seq, index), taken off the ready heap or `next`."""
        while self.ready:
            seq = heapq.heappop(self.ready)
            if seq not in self.acked and seq > self.floor and seq not in self.leases:
                return seq, bisect_left(self.seqs, seq, self.head)
        while self.next < len(self.seqs):
            index = self.next
            self.next += 1
            if self.seqs[index] not in self.acked:
                return self.seqs[index], index
        return None

    def _put_back(self, seq: int, index: int) -> None:
        if index == self.next - 1 and seq not in self.attempts:
            self.next -= 1
        else:
            heapq.heappush(self.ready, seq)

    def _lease(self, seq: int, body: int, tag: int, until: float) -> Taken:
        attempt = self.attempts.get(seq, 0) + 1
        self.attempts[seq] = attempt
        self.leases[seq] = until
        self.handed.discard(seq)
        heapq.heappush(self.timeouts, (until, seq))
        return _taken((seq, body, tag, attempt))

    def _drop_stale_timeouts(self) -> None:
        """Rebuild the timeouts from the leases once most are stale (a lease settled before
        its time leaves its entry behind): they held every delivery of the last visibility
        timeout, 1.5 million entries (160 MB) for 50,000 deliveries a second of 30 s leases.
        Amortised: each rebuild follows as many settlements as it keeps entries."""
        if len(self.timeouts) > 2 * len(self.leases) + _STALE_TIMEOUTS:
            self.timeouts = [(until, seq) for seq, until in self.leases.items()]
            heapq.heapify(self.timeouts)

    def _expire(self, now: float) -> None:
        while self.timeouts and self.timeouts[0][0] <= now:
            until, seq = heapq.heappop(self.timeouts)
            if self.leases.get(seq) == until:
                del self.leases[seq]
                heapq.heappush(self.ready, seq)
        while self.waiting and self.waiting[0][0] <= now:
            heapq.heappush(self.ready, heapq.heappop(self.waiting)[1])

    def _advance(self) -> None:
        """Raise the floor over the acknowledged references at the front."""
        seqs, acked = self.seqs, self.acked
        while self.head < len(seqs) and seqs[self.head] in acked:
            acked.remove(seqs[self.head])
            self.floor = seqs[self.head]
            self.size -= self.sizes[self.head]
            self.head += 1
        if self.next < self.head:
            self.next = self.head
        if self.head >= _COMPACT_AT and self.head * 2 >= len(seqs):
            del self.seqs[: self.head]
            del self.bodies[: self.head]
            del self.tags[: self.head]
            del self.sizes[: self.head]
            self.next -= self.head
            self.head = 0
