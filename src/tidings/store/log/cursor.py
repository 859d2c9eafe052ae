"""One subscriber's queue in memory: its references above the ack floor, what is in flight.

References (sequence number, body id) are two arrays in sequence order from `head`, so a
backlog costs 16 bytes a delivery, not an object. `next` is the first never leased since the
start; below it, a reference is acknowledged (in `acked`), in flight (`leases`), or ready
again (`ready`: expired or handed back, ready once its time in `waiting` comes).
"""

from __future__ import annotations

import heapq
from array import array
from bisect import bisect_left

from tidings.store.log.codec import ConsumerState

_COMPACT_AT = 4096  # references dropped from the arrays' front at once, at least


class Cursor:
    def __init__(self, state: ConsumerState | None = None) -> None:
        state = state or ConsumerState(0)
        self.floor = state.floor
        self.acked: set[int] = set(state.acked)
        self.attempts: dict[int, int] = dict(state.attempts)
        self.seqs: array[int] = array("q")
        self.bodies: array[int] = array("q")
        self.head = 0
        self.next = 0
        self.last_seq = state.floor
        self.leases: dict[int, float] = {}  # seq -> leased until
        self.timeouts: list[tuple[float, int]] = []  # (leased until, seq), a heap
        self.waiting: list[tuple[float, int]] = []  # (ready at, seq), a heap
        self.ready: list[int] = []  # seqs ready again, a heap

    def state(self) -> ConsumerState:
        return ConsumerState(self.floor, tuple(self.acked), dict(self.attempts))

    def append(self, seq: int, body: int) -> None:
        """A reference committed (or recovered) at the queue's end."""
        if seq > self.floor and seq not in self.acked:
            self.seqs.append(seq)
            self.bodies.append(body)
        self.last_seq = max(self.last_seq, seq)

    def extend(self, seqs: array[int], bodies: array[int]) -> None:
        """References in sequence order, appended at once when none is acknowledged."""
        if seqs and seqs[0] > self.floor and not self.acked:
            self.seqs.extend(seqs)
            self.bodies.extend(bodies)
            self.last_seq = max(self.last_seq, seqs[-1])
        else:
            for seq, body in zip(seqs, bodies, strict=True):
                self.append(seq, body)

    def depth(self) -> int:
        """References not acknowledged."""
        return len(self.seqs) - self.head - len(self.acked)

    def take(self, n: int, until: float, now: float) -> list[tuple[int, int, int]]:
        """Lease up to n ready references in sequence order: (seq, body, attempt) each."""
        self._expire(now)
        taken: list[tuple[int, int, int]] = []
        while self.ready and len(taken) < n:
            seq = heapq.heappop(self.ready)
            if seq not in self.acked and seq > self.floor and seq not in self.leases:
                taken.append(self._lease(seq, self._body_of(seq), until))
        while self.next < len(self.seqs) and len(taken) < n:
            seq, body = self.seqs[self.next], self.bodies[self.next]
            self.next += 1
            if seq not in self.acked:
                taken.append(self._lease(seq, body, until))
        return taken

    def ack(self, seq: int, attempt: int) -> bool:
        """Acknowledge the lease `attempt` of `seq`; False for a stale or unknown one."""
        if seq <= self.floor or seq in self.acked or self.attempts.get(seq) != attempt:
            return False
        self.leases.pop(seq, None)
        del self.attempts[seq]
        self.acked.add(seq)
        self._advance()
        return True

    def hand_back(self, seq: int, attempt: int, ready_at: float) -> bool:
        """A nack: the leased `seq` is ready again at `ready_at`."""
        if self.attempts.get(seq) != attempt or self.leases.pop(seq, None) is None:
            return False
        heapq.heappush(self.waiting, (ready_at, seq))
        return True

    def _lease(self, seq: int, body: int, until: float) -> tuple[int, int, int]:
        attempt = self.attempts.get(seq, 0) + 1
        self.attempts[seq] = attempt
        self.leases[seq] = until
        heapq.heappush(self.timeouts, (until, seq))
        return seq, body, attempt

    def _expire(self, now: float) -> None:
        while self.timeouts and self.timeouts[0][0] <= now:
            until, seq = heapq.heappop(self.timeouts)
            if self.leases.get(seq) == until:
                del self.leases[seq]
                heapq.heappush(self.ready, seq)
        while self.waiting and self.waiting[0][0] <= now:
            heapq.heappush(self.ready, heapq.heappop(self.waiting)[1])

    def _body_of(self, seq: int) -> int:
        return self.bodies[bisect_left(self.seqs, seq, self.head)]

    def _advance(self) -> None:
        """Raise the floor over the acknowledged references at the front."""
        seqs, acked = self.seqs, self.acked
        while self.head < len(seqs) and seqs[self.head] in acked:
            acked.remove(seqs[self.head])
            self.floor = seqs[self.head]
            self.head += 1
        if self.head >= _COMPACT_AT and self.head * 2 >= len(seqs):
            del self.seqs[: self.head]
            del self.bodies[: self.head]
            self.next -= self.head
            self.head = 0
