"""MultiPub's model (Gascon-Samson, Kienzle, Kemme, ICDCS 2017, equations 1-6): pure.

One topic: clients with one-way latencies `L` (clients x regions) and `LR` (regions x regions),
per-region prices `alpha` (per byte to another region) and `beta` (per byte to the internet),
publishers with the sizes of the messages they sent in an observation interval, subscribers, and
the constraint "`ratio` % of deliveries within `max_ms`". A configuration is a set of regions
and a mode. Everything here evaluates one configuration; `solver` searches them all.

Two readings the paper leaves open are fixed here (and in docs/placement.md): equation 2's
first hop is `L[P, R^P]` (the text: the publisher sends to its closest region; the printed
equation says `L[P, R^S]`), and costs within `COST_TOLERANCE` of each other are equal, so
that the order of a floating-point sum never decides a tie.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from fractions import Fraction
from typing import Any

import numpy as np
import numpy.typing as npt

Floats = npt.NDArray[np.float64]
Ints = npt.NDArray[np.int64]

COST_TOLERANCE = 1e-9  # relative: two costs this close are the same cost


class Mode(StrEnum):
    """Direct: publishers send to every selected region. Routed: to the closest, which forwards."""

    DIRECT = "direct"
    ROUTED = "routed"


@dataclass(frozen=True, slots=True)
class Instance:
    """One topic's placement problem. Arrays are float64 (latencies in ms, prices per byte)."""

    L: Floats  # clients x regions, one-way ms
    LR: Floats  # regions x regions, one-way ms, zero diagonal
    alpha: Floats  # per byte, region -> another region
    beta: Floats  # per byte, region -> a client
    publishers: Ints  # client index of each publisher
    sizes: tuple[Floats, ...]  # per publisher, its messages' sizes in bytes
    subscribers: Ints  # client index of each subscriber
    ratio: float  # percent of deliveries that must be within max_ms
    max_ms: float
    modes: tuple[Mode, ...] = (Mode.DIRECT, Mode.ROUTED)
    names: tuple[str, ...] = ()
    counts: Ints = field(init=False)  # messages per publisher
    volumes: Floats = field(init=False)  # bytes per publisher

    def __post_init__(self) -> None:
        counts = np.array([len(s) for s in self.sizes], dtype=np.int64)
        volumes = np.array([float(np.sum(s)) for s in self.sizes], dtype=np.float64)
        object.__setattr__(self, "counts", counts)
        object.__setattr__(self, "volumes", volumes)

    @property
    def regions(self) -> int:
        return int(self.L.shape[1])

    @property
    def deliveries(self) -> int:
        """|D|: every message of every publisher, once per subscriber."""
        return int(self.counts.sum()) * len(self.subscribers)

    @property
    def needed(self) -> int:
        """Equation 5: the rank n of the delivery time that must be within max_ms."""
        return rank(self.ratio, self.deliveries)


@dataclass(frozen=True, slots=True, order=True)
class Configuration:
    """Selected regions (ascending indices) and the mode; a single region is always direct."""

    regions: tuple[int, ...]
    mode: Mode

    @property
    def mask(self) -> int:
        return sum(1 << r for r in self.regions)


@dataclass(frozen=True, slots=True)
class Evaluation:
    """One configuration's delivery-time percentile (equation 6) and cost (equations 3, 4)."""

    configuration: Configuration
    percentile_ms: float
    cost: float
    meets: bool


@dataclass(frozen=True, slots=True)
class Choice:
    """The chosen configuration, how it scores, and how many configurations were candidates."""

    evaluation: Evaluation
    configurations: int

    def to_json(self, seconds: float) -> dict[str, Any]:
        """The one JSON object `tidings placement solve` prints (and each topic's row)."""
        e = self.evaluation
        return {
            "regions": list(e.configuration.regions),
            "mode": e.configuration.mode.value,
            "percentile_ms": e.percentile_ms,
            "cost": e.cost,
            "meets": e.meets,
            "configurations": self.configurations,
            "seconds": round(seconds, 6),
        }


def rank(ratio: float, deliveries: int) -> int:
    """n = ceil(ratio / 100 * |D|), in exact decimal arithmetic (95 % of 100 is 95, not 96)."""
    if deliveries == 0:
        return 0
    return max(1, math.ceil(Fraction(str(ratio)) * deliveries / 100))


def configurations(regions: int, modes: Sequence[Mode]) -> list[Configuration]:
    """Every candidate: each non-empty set of regions, direct or routed when it has two or more.

    With both modes there are 2 * (2^N - 1) - N; restricting to one mode keeps the N
    single-region configurations (one hop, nothing to forward: both modes at once).
    """
    found: list[Configuration] = []
    for mask in range(1, 1 << regions):
        chosen = tuple(r for r in range(regions) if mask >> r & 1)
        if len(chosen) == 1:
            found.append(Configuration(chosen, Mode.DIRECT))
            continue
        found.extend(Configuration(chosen, mode) for mode in Mode if mode in modes)
    return found


def configuration_count(regions: int, modes: Sequence[Mode]) -> int:
    """len(configurations(regions, modes)), without listing them."""
    sets = (1 << regions) - 1
    return sets + (sets - regions) * (len(set(modes)) - 1) if modes else 0


def closest(latencies: Floats, regions: Sequence[int]) -> Ints:
    """Per row, the selected region with the least latency; ties go to the lowest index."""
    selected = np.asarray(regions, dtype=np.int64)
    nearest: Ints = selected[np.argmin(latencies[:, selected], axis=1)]
    return nearest


def delivery_times(instance: Instance, configuration: Configuration) -> Floats:
    """Equations 1 and 2 for every (publisher, subscriber) pair: publishers x subscribers.

    Sums are taken in one order, `(first hop [+ forward]) + last hop`, everywhere in the package,
    so that the solver and the specification produce the same floats.
    """
    regions = configuration.regions
    subs = instance.L[instance.subscribers]
    pubs = instance.L[instance.publishers]
    r_s = closest(subs, regions)
    last = subs[np.arange(len(r_s)), r_s]
    if configuration.mode is Mode.DIRECT:
        first = pubs[:, r_s]
    else:
        r_p = closest(pubs, regions)
        hop = pubs[np.arange(len(r_p)), r_p]
        first = hop[:, None] + instance.LR[r_p][:, r_s]
    times: Floats = first + last[None, :]
    return times


def weighted_rank(times: Floats, weights: Ints, n: int) -> float:
    """The n-th smallest value when each value counts `weights` times (0 when n is 0)."""
    if n == 0:
        return 0.0
    order = np.argsort(times, kind="stable")
    cumulative = np.cumsum(weights[order])
    return float(times[order][np.searchsorted(cumulative, n, side="left")])


def percentile(instance: Instance, configuration: Configuration) -> float:
    """Equation 6: the n-th smallest delivery time over all (message, subscriber) pairs."""
    times = delivery_times(instance, configuration)
    weights = np.broadcast_to(instance.counts[:, None], times.shape)
    return weighted_rank(times.ravel(), weights.ravel(), instance.needed)


def cost(instance: Instance, configuration: Configuration) -> float:
    """Equation 3 (to subscribers) plus, routed, equation 4 (forwarding to the other regions)."""
    regions = configuration.regions
    r_s = closest(instance.L[instance.subscribers], regions)
    total = float(instance.volumes.sum()) * float(instance.beta[r_s].sum())
    if configuration.mode is Mode.ROUTED:
        r_p = closest(instance.L[instance.publishers], regions)
        forward = float((instance.volumes * instance.alpha[r_p]).sum())
        total += (len(regions) - 1) * forward
    return total


def evaluate(instance: Instance, configuration: Configuration) -> Evaluation:
    value = percentile(instance, configuration)
    return Evaluation(configuration, value, cost(instance, configuration), value <= instance.max_ms)


def same_cost(a: float, b: float) -> bool:
    return abs(a - b) <= COST_TOLERANCE * max(abs(a), abs(b))


def order_key(configuration: Configuration) -> tuple[int, int, int]:
    """The last tie-break: fewer regions, then direct before routed, then the smaller bitmask."""
    routed = int(configuration.mode is Mode.ROUTED)
    return (len(configuration.regions), routed, configuration.mask)


def choose(evaluations: Sequence[Evaluation]) -> Evaluation:
    """Section IV-B: the cheapest meeting the bound; ties by lower percentile, then fewer regions.

    When none meets it, the lowest percentile; ties by cost, then fewer regions.
    """
    meeting = [e for e in evaluations if e.meets]
    if meeting:
        least = min(e.cost for e in meeting)
        tied = [e for e in meeting if same_cost(e.cost, least)]
        return min(tied, key=lambda e: (e.percentile_ms, *order_key(e.configuration)))
    lowest = min(e.percentile_ms for e in evaluations)
    tied = [e for e in evaluations if e.percentile_ms == lowest]
    least = min(e.cost for e in tied)
    cheapest = [e for e in tied if same_cost(e.cost, least)]
    return min(cheapest, key=lambda e: order_key(e.configuration))
