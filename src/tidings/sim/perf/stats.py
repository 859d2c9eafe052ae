"""What a run measured: sends and receipts per second, latencies, losses and waste."""

from __future__ import annotations

import time
from collections import defaultdict
from dataclasses import dataclass

import numpy as np

PERCENTILES = (0, 50, 75, 95, 99)


@dataclass(frozen=True, slots=True)
class Second:
    """One line of the live report: the counts and latencies of one second of the run."""

    at_s: int
    sent: int
    received: int
    latency_ms: tuple[float, ...]  # min, median, 75th, 95th, 99th; empty when nothing arrived


class Recorder:
    """Filled by producers and consumers on the event loop (or via call_soon_threadsafe)."""

    def __init__(self) -> None:
        self.start_ns = time.time_ns()
        self.sent = 0
        self.expected = 0  # deliveries consumers want
        self.routed = 0  # deliveries a broker that cannot filter by content must make
        self.wasted = 0
        self.duplicates = 0
        self.last_receive_ns = self.start_ns
        self._seen: set[tuple[int, int, int]] = set()
        self._sent_in: defaultdict[int, int] = defaultdict(int)
        self._latencies_in: defaultdict[int, list[float]] = defaultdict(list)
        self._latencies: list[float] = []
        self._fresh: list[tuple[int, float]] = []  # (receipt ns, latency ms) not yet taken

    def _second(self, ns: int) -> int:
        return (ns - self.start_ns) // 1_000_000_000

    def on_sent(self, send_ns: int, wanted: int, routed: int) -> None:
        self.sent += 1
        self.expected += wanted
        self.routed += routed
        self._sent_in[self._second(send_ns)] += 1

    def on_received(self, consumer: int, producer: int, seq: int, send_ns: int, at_ns: int) -> None:
        key = (consumer, producer, seq)
        if key in self._seen:
            self.duplicates += 1
            return
        self._seen.add(key)
        receipt = (at_ns, (at_ns - send_ns) / 1e6)
        self.merge([receipt])
        self._fresh.append(receipt)

    def merge(self, receipts: list[tuple[int, float]]) -> None:
        """Receipts already deduplicated, here or by a consumer process."""
        for at_ns, latency_ms in receipts:
            self._latencies.append(latency_ms)
            self._latencies_in[self._second(at_ns)].append(latency_ms)
            self.last_receive_ns = max(self.last_receive_ns, at_ns)

    def take_fresh(self) -> list[tuple[int, float]]:
        """This process's own receipts since the last call (a consumer process sends them on)."""
        fresh, self._fresh = self._fresh, []
        return fresh

    def on_wasted(self) -> None:
        self.wasted += 1

    @property
    def received(self) -> int:
        return len(self._latencies)

    def second(self, at_s: int) -> Second:
        latencies = self._latencies_in.get(at_s, [])
        return Second(at_s, self._sent_in.get(at_s, 0), len(latencies), percentiles(latencies))

    def latencies(self) -> list[float]:
        return self._latencies


def percentiles(values: list[float]) -> tuple[float, ...]:
    if not values:
        return ()
    return tuple(float(v) for v in np.percentile(np.asarray(values), PERCENTILES))
