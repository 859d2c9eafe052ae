"""The bytes of a reference record and of a consumer's state (machine byte order, arrays).

A reference record is a batch's fan-out: three arrays of one length, subscriber numbers
(int32), their sequence numbers and the body ids (int64): 20 bytes a delivery, whatever the
body. A consumer's state is its ack floor, the sparse set of acknowledged sequence numbers
above it and the attempts of the deliveries leased and not acknowledged.
"""

from __future__ import annotations

import struct
from array import array
from dataclasses import dataclass, field

_HEADER = struct.Struct("<Iqq")
_STATE = struct.Struct("<qII")


@dataclass(slots=True)
class Refs:
    """A record's entries: entry i puts body `bodies[i]` at `seqs[i]` of `subscribers[i]`;
    the record brought the bodies `first_body` to `last_body` (a body matching no one too)."""

    first_body: int = 0
    last_body: int = 0
    subscribers: array[int] = field(default_factory=lambda: array("i"))
    seqs: array[int] = field(default_factory=lambda: array("q"))
    bodies: array[int] = field(default_factory=lambda: array("q"))

    def add(self, subscriber: int, seq: int, body: int) -> None:
        self.subscribers.append(subscriber)
        self.seqs.append(seq)
        self.bodies.append(body)

    def __len__(self) -> int:
        return len(self.seqs)


def encode_refs(refs: Refs) -> bytes:
    header = _HEADER.pack(len(refs), refs.first_body, refs.last_body)
    arrays = (refs.subscribers, refs.seqs, refs.bodies)
    return header + b"".join(a.tobytes() for a in arrays)


def decode_refs(data: bytes) -> Refs:
    n, first_body, last_body = _HEADER.unpack_from(data)
    view = memoryview(data)[_HEADER.size :]
    subscribers, seqs, bodies = array("i"), array("q"), array("q")
    subscribers.frombytes(view[: 4 * n])
    seqs.frombytes(view[4 * n : 12 * n])
    bodies.frombytes(view[12 * n : 20 * n])
    return Refs(first_body, last_body, subscribers, seqs, bodies)


@dataclass(frozen=True, slots=True)
class ConsumerState:
    """What survives a crash of one subscriber's queue: everything at or below `floor` is
    acknowledged, and so is `acked` above it; `attempts` counts each lease not acknowledged."""

    floor: int
    acked: tuple[int, ...] = ()
    attempts: dict[int, int] = field(default_factory=dict)


def encode_state(state: ConsumerState) -> bytes:
    acked = array("q", state.acked)
    leased = array("q", state.attempts)
    counts = array("q", state.attempts.values())
    header = _STATE.pack(state.floor, len(acked), len(leased))
    return b"".join((header, acked.tobytes(), leased.tobytes(), counts.tobytes()))


def decode_state(data: bytes) -> ConsumerState:
    floor, n_acked, n_leased = _STATE.unpack_from(data)
    view = memoryview(data)[_STATE.size :]
    acked, leased, counts = array("q"), array("q"), array("q")
    acked.frombytes(view[: 8 * n_acked])
    leased.frombytes(view[8 * n_acked : 8 * (n_acked + n_leased)])
    counts.frombytes(view[8 * (n_acked + n_leased) : 8 * (n_acked + 2 * n_leased)])
    return ConsumerState(floor, tuple(acked), dict(zip(leased, counts, strict=True)))
