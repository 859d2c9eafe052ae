"""Instance price-performance: the RabbitMQ study's Score and Capacity (ch. 7).

Score = required throughput / monthly cost (eq. 7.1); Capacity = required throughput / the
instance's maximum measured throughput x 100 (eq. 7.2). For each required throughput, the
instances whose maximum reaches it qualify, ranked by Score: at one required throughput that is
cheapest first. The first three are the first, second and third choice; consecutive required
throughputs with the same choices merge into one band, as the study's tables 7.4-7.7 print them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from tidings.cost.prices import InstancePrices
from tidings.cost.throughputs import Throughput, maxima
from tidings.errors import invalid

STEP = 10_000.0  # the study starts at 10k msgs/s and adds 10k per row
CHOICES = 3


@dataclass(frozen=True, slots=True)
class Candidate:
    instance: str
    platform: str
    monthly: float
    maximum: float
    score: float
    capacity: float


@dataclass(frozen=True, slots=True)
class Row:
    """One required throughput and every instance that reaches it, best Score first."""

    required: float
    ranked: tuple[Candidate, ...]

    @property
    def choices(self) -> tuple[Candidate, ...]:
        return self.ranked[:CHOICES]


@dataclass(frozen=True, slots=True)
class Pick:
    """One choice across a band: the instance and its Capacity at the band's ends."""

    instance: str
    first_capacity: float
    last_capacity: float


@dataclass(frozen=True, slots=True)
class Band:
    low: float
    high: float
    picks: tuple[Pick, ...]


@dataclass(frozen=True, slots=True)
class Analysis:
    workload: str
    maxima: dict[str, float]
    rows: tuple[Row, ...]
    bands: tuple[Band, ...]


def score(required: float, monthly: float) -> float:
    return required / monthly


def capacity(required: float, maximum: float) -> float:
    return required / maximum * 100


def percent(value: float) -> int:
    """A Capacity as the study prints it: a whole percent, halves rounded up."""
    return math.floor(value + 0.5)


def candidates(required: float, found: dict[str, float], prices: InstancePrices) -> Row:
    """The instances whose maximum reaches `required`, best Score (cheapest) first."""
    ranked = [
        _candidate(name, top, required, prices) for name, top in found.items() if top >= required
    ]
    ranked.sort(key=lambda c: (-c.score, -c.maximum, c.instance))
    return Row(required, tuple(ranked))


def _candidate(name: str, top: float, required: float, prices: InstancePrices) -> Candidate:
    instance = prices.instances[name]
    return Candidate(
        name,
        instance.platform,
        instance.monthly,
        top,
        score(required, instance.monthly),
        capacity(required, top),
    )


def steps(found: dict[str, float], step: float = STEP) -> list[float]:
    """step, 2 x step, ... up to the largest maximum measured: the study's required rates."""
    if step <= 0:
        raise invalid("--step", "must be more than 0")
    count = int(max(found.values(), default=0.0) // step)
    return [step * k for k in range(1, count + 1)]


def bands(rows: tuple[Row, ...]) -> tuple[Band, ...]:
    """Merge consecutive rows whose choices name the same instances in the same order."""
    merged: list[list[Row]] = []
    for row in rows:
        if merged and _names(merged[-1][-1]) == _names(row):
            merged[-1].append(row)
        else:
            merged.append([row])
    return tuple(_band(group) for group in merged)


def _names(row: Row) -> tuple[str, ...]:
    return tuple(c.instance for c in row.choices)


def _band(group: list[Row]) -> Band:
    first, last = group[0], group[-1]
    picks = tuple(
        Pick(a.instance, a.capacity, b.capacity)
        for a, b in zip(first.choices, last.choices, strict=True)
    )
    return Band(first.required, last.required, picks)


def analyse(
    prices: InstancePrices,
    throughputs: tuple[Throughput, ...],
    required: list[float] | None = None,
    step: float = STEP,
    workloads: list[str] | None = None,
) -> list[Analysis]:
    """Choice tables per workload, for `required` rates or the study's 10k steps."""
    for t in throughputs:
        prices.get(t.instance, t.origin)
    if required is not None and any(r <= 0 or math.isnan(r) for r in required):
        raise invalid("--required", "every required throughput must be more than 0")
    found = maxima(throughputs)
    for name in workloads or []:
        if name not in found:
            raise invalid("--workload", f"no measurements for {name!r}; have {', '.join(found)}")
    chosen = workloads or list(found)
    return [_analysis(w, found[w], prices, required, step) for w in chosen]


def _analysis(
    workload: str,
    found: dict[str, float],
    prices: InstancePrices,
    required: list[float] | None,
    step: float,
) -> Analysis:
    rates = sorted(required) if required else steps(found, step)
    rows = tuple(candidates(r, found, prices) for r in rates)
    return Analysis(workload, found, rows, bands(rows))
