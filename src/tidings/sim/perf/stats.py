"""What a run measured: sends and receipts per second, latencies, losses, duplicates, waste and
streams the broker closed. Receipts are kept in flat arrays (a few machine words each): at a
quarter of a million receipts a second the recorder must not be what a run measures."""

from __future__ import annotations

import time
from array import array
from collections import defaultdict
from dataclasses import dataclass

import numpy as np

PERCENTILES = (0, 50, 75, 95, 99)
Receipts = tuple[bytes, bytes]  # receipt times (int64 ns) and latencies (float64 ms), as bytes


@dataclass(frozen=True, slots=True)
class Second:
    """One line of the live report: the counts and latencies of one second of the run."""

    at_s: int
    sent: int
    received: int
    latency_ms: tuple[float, ...]  # min, median, 75th, 95th, 99th; empty when nothing arrived


def message_id(consumer: int, producer: int, seq: int) -> int:
    """One int per (consumer, message): seq below 2^32, producers below 2^16."""
    return (consumer << 48) | (producer << 32) | seq


class Recorder:
    """Filled by producers and consumers on the event loop, or merged from consumer processes."""

    def __init__(self) -> None:
        self.start_ns = time.time_ns()
        self.sent = 0
        self.expected = 0  # deliveries consumers want
        self.routed = 0  # deliveries a broker that cannot filter by content must make
        self.wasted = 0
        self.duplicates = 0
        self.closed = 0  # consumer streams the broker closed (the consumer opened them again)
        self.last_receive_ns = self.start_ns
        self._seen: set[int] = set()
        self._sent_in: defaultdict[int, int] = defaultdict(int)
        self._at = array("q")
        self._latency = array("d")
        self._handed = 0  # receipts before this index were taken by `take_fresh`
        self._bucketed = 0  # receipts before this index are in `_latencies_in`
        self._latencies_in: defaultdict[int, list[np.ndarray]] = defaultdict(list)

    def _second(self, ns: int) -> int:
        return (ns - self.start_ns) // 1_000_000_000

    def on_sent(self, send_ns: int, count: int, wanted: int, routed: int) -> None:
        """`count` messages sent at `send_ns`; `wanted`, `routed`: their deliveries in all."""
        self.sent += count
        self.expected += wanted
        self.routed += routed
        self._sent_in[self._second(send_ns)] += count

    def on_received(self, consumer: int, producer: int, seq: int, send_ns: int, at_ns: int) -> None:
        key = message_id(consumer, producer, seq)
        if key in self._seen:
            self.duplicates += 1
            return
        self._seen.add(key)
        self._at.append(at_ns)
        self._latency.append((at_ns - send_ns) / 1e6)
        if at_ns > self.last_receive_ns:
            self.last_receive_ns = at_ns

    def merge(self, receipts: Receipts) -> None:
        """Receipts already deduplicated by a consumer process."""
        at, latency = receipts
        self._at.frombytes(at)
        self._latency.frombytes(latency)
        if at:
            latest = int(np.frombuffer(at, dtype=np.int64).max())
            self.last_receive_ns = max(self.last_receive_ns, latest)

    def take_fresh(self) -> Receipts:
        """The receipts since the last call (a consumer process sends them on to its parent)."""
        start, self._handed = self._handed, len(self._at)
        return self._at[start:].tobytes(), self._latency[start:].tobytes()

    def on_wasted(self) -> None:
        self.wasted += 1

    @property
    def received(self) -> int:
        return len(self._at)

    def second(self, at_s: int) -> Second:
        self._bucket()
        chunks = self._latencies_in.get(at_s, [])
        latencies = np.concatenate(chunks) if chunks else np.empty(0)
        return Second(at_s, self._sent_in.get(at_s, 0), len(latencies), percentiles(latencies))

    def _bucket(self) -> None:
        """File the receipts that came since the last call under their second."""
        at = np.array(self._at[self._bucketed :], dtype=np.int64)
        latency = np.array(self._latency[self._bucketed :], dtype=np.float64)
        self._bucketed += len(at)
        seconds = (at - self.start_ns) // 1_000_000_000
        for second in np.unique(seconds):
            self._latencies_in[int(second)].append(latency[seconds == second])

    def latencies(self) -> np.ndarray:
        return np.array(self._latency, dtype=np.float64)


def percentiles(values: np.ndarray | list[float]) -> tuple[float, ...]:
    if len(values) == 0:
        return ()
    return tuple(float(v) for v in np.percentile(np.asarray(values), PERCENTILES))
