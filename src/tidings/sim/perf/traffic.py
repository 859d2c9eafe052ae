"""The workload every target runs: what is sent, to whom, and what each consumer wants.

A message body is ASCII: `send_ns:producer:seq:x:` in fixed widths (zero-padded: 19, 5, 10 and 5
digits), then padding to `size` bytes. The same bytes go to every target, so that no target pays
for an encoding the others do not; the fixed widths let a consumer read the header by slicing.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from tidings.errors import invalid

X_DOMAIN = 10_000  # content mode: each message carries an attribute x uniform in [0, X_DOMAIN)
MIN_SIZE = 48  # the header needs room: 19 + 1 + 5 + 1 + 10 + 1 + 5 + 1 digits and colons
HEADER = "{:019d}:{:05d}:{:010d}:{:05d}:"


@dataclass(frozen=True, slots=True)
class Workload:
    producers: int = 1
    consumers: int = 1
    topics: int = 1
    size: int = 1024
    rate: float = 0.0  # per producer, messages/s; 0 = as fast as the target takes them
    duration: float = 10.0
    confirm: bool = False
    persistent: bool = False
    inflight: int = 64  # sends outstanding per producer, for targets whose send is a round trip
    batch: int = 1  # messages per send: a batch request, or publishes pipelined in one write
    messages: int = 0  # per producer, then stop; 0 = until `duration` is over
    offline: bool = False  # consumers away while the producers send, then they drain the backlog
    selectivity: float | None = None  # content mode: fraction of messages each consumer wants
    drain: float = 5.0  # seconds to wait for stragglers once the producers stop
    # seconds between the consumers' subscribing and the first send: brokers behind a
    # balancer learn of a subscription made through another within about a second
    settle: float = 0.0
    seed: int = 1
    processes: int = 0  # 0: consumers in this process; N: in N processes of their own
    run_id: str = field(default_factory=lambda: f"{random.getrandbits(32):08x}")

    def __post_init__(self) -> None:
        _at_least("--producers", self.producers, 1)
        _at_least("--consumers", self.consumers, 0)
        _at_least("--topics", self.topics, 1)
        _at_least("--size", self.size, MIN_SIZE)
        _at_least("--rate", self.rate, 0)
        _at_least("--inflight", self.inflight, 1)
        _at_least("--batch", self.batch, 1)
        _at_least("--messages", self.messages, 0)
        _at_least("--drain", self.drain, 0)
        _at_least("--settle", self.settle, 0)
        _at_least("--processes", self.processes, 0)
        if self.duration <= 0:
            raise invalid("--duration", "must be more than 0 seconds")
        if self.selectivity is not None and not 0 < self.selectivity <= 1:
            raise invalid("--selectivity", "must be in (0, 1]")
        if self.selectivity is not None and self.topics != 1:
            raise invalid("--topics", "the content workload uses one topic")

    @property
    def content(self) -> bool:
        return self.selectivity is not None

    def topic_of_consumer(self, consumer: int) -> int:
        return consumer % self.topics

    def wanted(self, consumer: int) -> range:
        """The x values consumer `consumer` wants: all of them, or a window of the domain."""
        if self.selectivity is None:
            return range(X_DOMAIN)
        width = max(1, round(self.selectivity * X_DOMAIN))
        low = random.Random(self.seed * 7919 + consumer).randrange(X_DOMAIN - width + 1)
        return range(low, low + width)


def _at_least(name: str, value: float, least: float) -> None:
    if value < least:
        raise invalid(name, f"must be at least {least}, got {value}")


@dataclass(frozen=True, slots=True)
class BodyHeader:
    """The fixed-width head of every message body: when, by whom, which one, its attribute x."""

    send_ns: int
    producer: int
    seq: int
    x: int


def encode(header: BodyHeader, size: int) -> bytes:
    head = HEADER.format(header.send_ns, header.producer, header.seq, header.x).encode()
    return head + b"x" * (size - len(head))


def decode(body: bytes | str) -> BodyHeader:
    """The header of a body, read by position (int() takes ASCII bytes as well as text)."""
    return BodyHeader(int(body[0:19]), int(body[20:25]), int(body[26:36]), int(body[37:42]))
