"""Counters and a timing summary, rendered in the Prometheus text format."""

from __future__ import annotations

import bisect
from collections import defaultdict
from dataclasses import dataclass, field

BUCKETS_S = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.1, 1.0)


@dataclass
class Histogram:
    counts: list[int] = field(default_factory=lambda: [0] * (len(BUCKETS_S) + 1))
    total: float = 0.0
    n: int = 0

    def observe(self, seconds: float) -> None:
        self.counts[bisect.bisect_left(BUCKETS_S, seconds)] += 1
        self.total += seconds
        self.n += 1

    def render(self, name: str) -> list[str]:
        lines, running = [f"# TYPE {name} histogram"], 0
        for bound, count in zip(BUCKETS_S, self.counts, strict=False):
            running += count
            lines.append(f'{name}_bucket{{le="{bound}"}} {running}')
        lines.append(f'{name}_bucket{{le="+Inf"}} {self.n}')
        return [*lines, f"{name}_sum {self.total}", f"{name}_count {self.n}"]


class Metrics:
    def __init__(self) -> None:
        self.counters: dict[str, float] = defaultdict(float)
        self.matching = Histogram()

    def inc(self, name: str, by: float = 1.0) -> None:
        self.counters[name] += by

    def render(self, gauges: dict[str, float]) -> str:
        lines: list[str] = []
        for name, value in sorted(self.counters.items()):
            lines += [f"# TYPE tidings_{name} counter", f"tidings_{name} {value:g}"]
        for name, value in sorted(gauges.items()):
            lines += [f"# TYPE tidings_{name} gauge", f"tidings_{name} {value:g}"]
        lines += self.matching.render("tidings_matching_seconds")
        return "\n".join(lines) + "\n"
