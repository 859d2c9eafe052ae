"""What a log engine does: the few writes and reads the queue log needs, nothing more.

Four kinds of data: subscriber names (a number each, as records name them; a name written
again replaces the one before), bodies (an id each, appended once), reference records (an id
and the segment they belong to, appended once) and consumer states (one per subscriber,
rewritten). A subscriber forgotten (`gone`) loses its name and its state. `write` applies a
`WriteBatch` in one transaction: a group commit. A segment is a run of record ids and the
body ids those records brought; `drop` deletes both ranges at once, when every subscriber is
past them.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Protocol


@dataclass(frozen=True, slots=True)
class Span:
    """A segment to drop: its body ids and its record ids, first and last of each inclusive."""

    first_body: int
    last_body: int
    first_record: int
    last_record: int


@dataclass(slots=True)
class WriteBatch:
    """One group commit's writes, applied in one transaction (in this order)."""

    names: list[tuple[int, str]] = field(default_factory=list)
    bodies: list[tuple[int, bytes]] = field(default_factory=list)
    records: list[tuple[int, int, bytes]] = field(default_factory=list)  # id, segment, refs
    states: list[tuple[int, bytes]] = field(default_factory=list)  # subscriber, state
    drops: list[Span] = field(default_factory=list)
    gone: list[int] = field(default_factory=list)  # subscribers whose name and state go

    def __bool__(self) -> bool:
        parts = (self.names, self.bodies, self.records, self.states, self.drops, self.gone)
        return any(parts)


@dataclass(frozen=True, slots=True)
class Stored:
    """What recovery reads: every name and state, and the records still kept, oldest first
    (an iterator: a backlog's records are read once, not held)."""

    names: Sequence[tuple[int, str]]
    states: Sequence[tuple[int, bytes]]
    records: Iterator[tuple[int, int, bytes]]


class LogEngine(Protocol):
    def write(self, batch: WriteBatch) -> None:
        """Apply the batch in one transaction; committed when this returns."""
        ...

    def read_bodies(self, ids: Sequence[int]) -> dict[int, bytes]:
        """The bodies of the given ids (each distinct id once)."""
        ...

    def recover(self) -> Stored: ...

    def count_bodies(self) -> int: ...

    def count_records(self) -> int: ...

    def disk_bytes(self) -> int:
        """The bytes the engine's files (or tables and indexes) take."""
        ...

    def close(self) -> None: ...
