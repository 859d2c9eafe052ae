"""Section IV-D, as an option: regions added for clients all of whose deliveries are late.

A client is *high-latency* under a configuration when every delivery it takes part in (as a
subscriber: every message it receives; as a publisher: every delivery of its messages) is
above `max_ms`. For each such client, in client order, every region not yet selected is tried
(same mode); the one giving the client the lowest percentile of its own deliveries is added
when that percentile meets `max_ms` or is at least `improvement` lower than before. The
controller re-solves every interval, so a region no longer needed is not added again.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from tidings.placement.model import (
    Configuration,
    Floats,
    Instance,
    Mode,
    delivery_times,
    rank,
    weighted_rank,
)


@dataclass(frozen=True, slots=True)
class Forced:
    """The configuration after the rule, and the regions it added (in the order added)."""

    configuration: Configuration
    added: tuple[int, ...]


def _own(instance: Instance, client: int) -> Callable[[Floats], tuple[Floats, Floats]]:
    """The client's deliveries and their weights, out of a publishers x subscribers matrix."""
    as_pub = instance.publishers == client
    as_sub = instance.subscribers == client
    counts = instance.counts.astype(np.float64)

    def pick(times: Floats) -> tuple[Floats, Floats]:
        received = times[:, as_sub]
        sent = times[as_pub, :]
        values = np.concatenate((received.ravel(), sent.ravel()))
        weights = np.concatenate(
            (np.broadcast_to(counts[:, None], received.shape).ravel(),
             np.broadcast_to(counts[as_pub][:, None], sent.shape).ravel())
        )  # fmt: skip
        return values, weights

    return pick


def _late(values: Floats, weights: Floats, max_ms: float) -> bool:
    live = weights > 0
    return bool(live.any()) and bool((values[live] > max_ms).all())


def _own_percentile(instance: Instance, values: Floats, weights: Floats) -> float:
    n = rank(instance.ratio, int(weights.sum()))
    return weighted_rank(values, weights.astype(np.int64), n)


def _with(configuration: Configuration, region: int) -> Configuration:
    regions = tuple(sorted((*configuration.regions, region)))
    mode = Mode.ROUTED if configuration.mode is Mode.ROUTED else Mode.DIRECT
    return Configuration(regions, mode)


def force_regions(
    instance: Instance, configuration: Configuration, improvement: float = 0.25
) -> Forced:
    """Apply the rule to a chosen configuration; `improvement` is a fraction (0.25: 25 %)."""
    clients = sorted(set(instance.publishers.tolist()) | set(instance.subscribers.tolist()))
    added: list[int] = []
    for client in clients:
        pick = _own(instance, client)
        values, weights = pick(delivery_times(instance, configuration))
        if not _late(values, weights, instance.max_ms):
            continue
        before = _own_percentile(instance, values, weights)
        best: tuple[float, int] | None = None
        for region in range(instance.regions):
            if region in configuration.regions:
                continue
            trial = pick(delivery_times(instance, _with(configuration, region)))
            value = _own_percentile(instance, *trial)
            if best is None or value < best[0]:
                best = (value, region)
        if best is None:
            continue
        value, region = best
        if value <= instance.max_ms or value <= (1 - improvement) * before:
            configuration = _with(configuration, region)
            added.append(region)
    return Forced(configuration, tuple(added))
