"""The bytes of a reference record and of a consumer's state (machine byte order, arrays).

A reference record is a batch's fan-out: four arrays of one length, subscriber numbers
(int32), their sequence numbers and the body ids (int64) and a tag each (int32: what the
log's user says of a delivery, the broker's subscription ids): 24 bytes a delivery,
whatever the body; then each body's time (float64) and length (int32), so that recovery
knows them without reading a body. A consumer's state is its ack floor, the sparse set of
acknowledged sequence numbers above it and the attempts of the deliveries leased and not
acknowledged.
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
    tags: array[int] = field(default_factory=lambda: array("i"))
    times: array[float] = field(default_factory=lambda: array("d"))  # a body each
    lengths: array[int] = field(default_factory=lambda: array("i"))  # a body each

    def add(self, subscriber: int, seq: int, body: int, tag: int = 0) -> None:
        self.subscribers.append(subscriber)
        self.seqs.append(seq)
        self.bodies.append(body)
        self.tags.append(tag)

    def __len__(self) -> int:
        return len(self.seqs)


def encode_refs(refs: Refs) -> bytes:
    header = _HEADER.pack(len(refs), refs.first_body, refs.last_body)
    arrays = (refs.subscribers, refs.seqs, refs.bodies, refs.tags, refs.times, refs.lengths)
    return header + b"".join(a.tobytes() for a in arrays)


def decode_refs(data: bytes) -> Refs:
    n, first_body, last_body = _HEADER.unpack_from(data)
    m = len(data) - _HEADER.size - 24 * n  # the bodies' times and lengths: 12 bytes each
    view = memoryview(data)[_HEADER.size :]
    refs = Refs(first_body, last_body)
    at = 0
    for part, size in (
        (refs.subscribers, 4 * n),
        (refs.seqs, 8 * n),
        (refs.bodies, 8 * n),
        (refs.tags, 4 * n),
        (refs.times, 8 * m // 12),
        (refs.lengths, 4 * m // 12),
    ):
        part.frombytes(view[at : at + size])
        at += size
    return refs


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
