"""The exact solver: the specification's answer, without sorting a list per configuration.

Three observations make it fast and keep it exact:

- Every message from one publisher to one subscriber has the same delivery time, so the
  percentile is a weighted order statistic over (publisher, subscriber) pairs, and "meets the
  bound" is a weighted count of pairs within `max_ms` reaching n (equation 6 read as a count).
- A client's region under any configuration is the first selected region in its preference
  order, so clients with one order form a group. Counts per (group, region) are computed once
  per threshold, with the very sums the model takes, and every configuration's count is a
  gather over groups: all configurations at once, vectorised.
- Only the few configurations that can still win need an exact percentile: the cheapest
  meeting ones (ties), or, when none meets, those that can beat the best percentile found so
  far (a count below it reaching n). Routed configurations costing more than the cheapest
  meeting direct one cannot win and are not counted (a bound on cost, never on the answer).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tidings.placement.model import (
    COST_TOLERANCE,
    Choice,
    Configuration,
    Evaluation,
    Floats,
    Instance,
    Ints,
    Mode,
    configuration_count,
    cost,
    percentile,
)

Bools = np.ndarray[tuple[int], np.dtype[np.bool_]]
Hits = np.ndarray[tuple[int, ...], np.dtype[np.bool_]]
GATHER_CHUNK = 4_000_000  # elements per gather of the routed count table
PAIR_CHUNK = 4_000_000  # delivery times compared at once


@dataclass(frozen=True, slots=True)
class Groups:
    """Clients sorted by preference order; each group's first selected region, for every mask."""

    rows: Floats  # latencies of the sorted clients, clients x regions
    starts: Ints  # first row of each group
    sizes: Ints  # clients per group
    region: Ints  # masks x groups: the group's closest selected region
    members: Ints  # original position of each sorted client


def _groups(latencies: Floats, masks: Ints) -> Groups:
    regions = latencies.shape[1]
    if len(latencies) == 0:
        empty = np.zeros(0, dtype=np.int64)
        return Groups(latencies, empty, empty, np.zeros((len(masks), 0), np.int64), empty)
    order = np.argsort(latencies, axis=1, kind="stable")  # ties: lower region index first
    unique, inverse = np.unique(order, axis=0, return_inverse=True)
    inverse = inverse.reshape(-1)
    members = np.argsort(inverse, kind="stable")
    sizes = np.bincount(inverse, minlength=len(unique)).astype(np.int64)
    starts = np.concatenate(([0], np.cumsum(sizes)[:-1])).astype(np.int64)
    region = np.full((len(masks), len(unique)), -1, dtype=np.int64)
    for j in range(regions):
        candidate = unique[:, j]
        hit = ((masks[:, None] >> candidate[None, :]) & 1).astype(bool) & (region < 0)
        region[hit] = np.broadcast_to(candidate, region.shape)[hit]
    return Groups(latencies[members], starts, sizes, region, members.astype(np.int64))


def _within(times: Floats, threshold: float, strict: bool) -> Hits:
    hits: Hits = times < threshold if strict else times <= threshold
    return hits


class Solver:
    """Tables for one instance; `solve` applies section IV-B's rule over every configuration."""

    def __init__(self, instance: Instance) -> None:
        self.instance = instance
        self.n = instance.needed
        self.masks: Ints = np.arange(1, 1 << instance.regions, dtype=np.int64)
        self.sizes: Ints = np.array([m.bit_count() for m in self.masks.tolist()], dtype=np.int64)
        self.subs = _groups(instance.L[instance.subscribers], self.masks)
        self.pubs = _groups(instance.L[instance.publishers], self.masks)
        self.weights: Ints = instance.counts[self.pubs.members]
        volumes = instance.volumes[self.pubs.members]
        self.group_volumes: Floats = np.bincount(
            np.repeat(np.arange(len(self.pubs.sizes)), self.pubs.sizes),
            weights=volumes,
            minlength=len(self.pubs.sizes),
        ).astype(np.float64)

    # -- costs (equations 3 and 4), every mask at once --------------------------------------

    def direct_costs(self) -> Floats:
        beta = self.instance.beta[self.subs.region] @ self.subs.sizes.astype(np.float64)
        costs: Floats = float(self.instance.volumes.sum()) * beta
        return costs

    def routed_costs(self) -> Floats:
        forward = self.instance.alpha[self.pubs.region] @ self.group_volumes
        costs: Floats = self.direct_costs() + (self.sizes - 1) * forward
        return costs

    # -- counts of (message, subscriber) pairs within a threshold ---------------------------

    def _per_group(self, hits: Hits) -> Ints:
        """... x publishers x subscribers hits -> ... x publisher groups x subscriber groups."""
        by_sub: Ints = np.add.reduceat(hits, self.subs.starts, axis=-1, dtype=np.int64)
        weighted = by_sub * self.weights[:, None]
        grouped: Ints = np.add.reduceat(weighted, self.pubs.starts, axis=-2)
        return grouped

    def direct_counts(self, ks: Ints, threshold: float, strict: bool) -> Ints:
        L_p, L_s = self.pubs.rows, self.subs.rows
        table = np.zeros((self.instance.regions, len(self.subs.sizes)), dtype=np.int64)
        for rs in self._chunks(_used(self.subs.region[ks], self.instance.regions)):
            times = L_p[:, rs].T[:, :, None] + L_s[:, rs].T[:, None, :]  # regions x P x S
            table[rs] = self._per_group(_within(times, threshold, strict)).sum(axis=1)
        groups = np.arange(len(self.subs.sizes))
        found: Ints = table[self.subs.region[ks], groups[None, :]].sum(axis=1)
        return found

    def routed_counts(self, ks: Ints, threshold: float, strict: bool) -> Ints:
        L_p, L_s, LR = self.pubs.rows, self.subs.rows, self.instance.LR
        H, G, N = len(self.pubs.sizes), len(self.subs.sizes), self.instance.regions
        table = np.zeros((H, N, G, N), dtype=np.int64)
        serving = _used(self.subs.region[ks], N)
        for q in _used(self.pubs.region[ks], N).tolist():
            for rs in self._chunks(serving):
                first = L_p[:, q][None, :] + LR[q, rs][:, None]  # regions x P
                times = first[:, :, None] + L_s[:, rs].T[:, None, :]  # regions x P x S
                per_group = self._per_group(_within(times, threshold, strict))  # regions x H x G
                table[:, q][:, :, rs] = per_group.transpose(1, 2, 0)
        found = np.empty(len(ks), dtype=np.int64)
        step = max(1, GATHER_CHUNK // max(1, H * G))
        h, g = np.arange(H)[None, :, None], np.arange(G)[None, None, :]
        for at in range(0, len(ks), step):
            part = ks[at : at + step]
            q_of, r_of = self.pubs.region[part][:, :, None], self.subs.region[part][:, None, :]
            found[at : at + step] = table[h, q_of, g, r_of].sum(axis=(1, 2))
        return found

    def _chunks(self, regions: Ints) -> list[Ints]:
        """Regions in groups small enough that a regions x P x S block stays modest."""
        pairs = max(1, len(self.pubs.rows) * len(self.subs.rows))
        size = max(1, PAIR_CHUNK // pairs)
        return [regions[at : at + size] for at in range(0, len(regions), size)]

    def counts(self, ks: Ints, routed: Bools, threshold: float, strict: bool) -> Ints:
        found = np.zeros(len(ks), dtype=np.int64)
        for mode_is_routed, count in ((False, self.direct_counts), (True, self.routed_counts)):
            where = routed == mode_is_routed
            if where.any():
                found[where] = count(ks[where], threshold, strict)
        return found

    # -- the choice --------------------------------------------------------------------------

    def configuration(self, k: int, routed: bool) -> Configuration:
        mask = int(self.masks[k])
        regions = tuple(r for r in range(self.instance.regions) if mask >> r & 1)
        return Configuration(regions, Mode.ROUTED if routed else Mode.DIRECT)

    def exact(self, k: int, routed: bool) -> float:
        return percentile(self.instance, self.configuration(k, routed))

    def lowest(self, ks: Ints, routed: Bools, hint: Ints) -> tuple[float, Ints, Bools]:
        """The least percentile among candidates, and the candidates that have it.

        Start from the most promising (largest `hint`); while some candidate has n pairs
        strictly below the best so far, it is better: take the one with the most, exactly.
        """
        pick = int(np.argmax(hint))
        best = self.exact(int(ks[pick]), bool(routed[pick]))
        if len(ks) == 1 or self.n == 0:
            return best, ks, routed
        while True:
            below = self.counts(ks, routed, best, strict=True)
            better = below >= self.n
            if not better.any():
                break
            ks, routed, below = ks[better], routed[better], below[better]
            pick = int(np.argmax(below))
            best = self.exact(int(ks[pick]), bool(routed[pick]))
        at = self.counts(ks, routed, best, strict=False) >= self.n
        return best, ks[at], routed[at]

    def candidates(self) -> tuple[Ints, Bools, Floats]:
        """Every configuration as (mask index, routed?, cost), direct ones first."""
        modes = self.instance.modes
        ks = np.arange(len(self.masks), dtype=np.int64)
        routed_ks = ks[self.sizes >= 2] if Mode.ROUTED in modes else ks[:0]
        direct_ks = ks if Mode.DIRECT in modes else ks[self.sizes == 1]
        all_ks = np.concatenate((direct_ks, routed_ks))
        routed = np.concatenate((np.zeros(len(direct_ks), bool), np.ones(len(routed_ks), bool)))
        costs = np.concatenate((self.direct_costs()[direct_ks], self.routed_costs()[routed_ks]))
        return all_ks, routed, costs

    def solve(self) -> Choice:
        instance = self.instance
        ks, routed, costs = self.candidates()
        total = configuration_count(instance.regions, instance.modes)
        if self.n == 0:  # no deliveries: nothing can be late, every configuration meets
            return self._pick(0.0, *self._cheapest(ks, routed, costs), total, meets=True)
        within = np.zeros(len(ks), dtype=np.int64)
        direct = ~routed
        within[direct] = self.direct_counts(ks[direct], instance.max_ms, strict=False)
        meets_direct = direct & (within >= self.n)
        # A routed configuration dearer than the cheapest meeting direct one cannot be chosen.
        bound = costs[meets_direct].min() if meets_direct.any() else np.inf
        keep = routed & ((costs <= bound) | _same(costs, bound))
        within[keep] = self.routed_counts(ks[keep], instance.max_ms, strict=False)
        meets = (within >= self.n) & (direct | keep)
        if meets.any():
            least = costs[meets].min()
            tied = meets & _same(costs, least)
            best, t_ks, t_routed = self.lowest(ks[tied], routed[tied], within[tied])
            return self._pick(best, t_ks, t_routed, total, meets=True)
        best, t_ks, t_routed = self.lowest(ks, routed, within)
        return self._pick(best, t_ks, t_routed, total, meets=False)

    @staticmethod
    def _cheapest(ks: Ints, routed: Bools, costs: Floats) -> tuple[Ints, Bools]:
        tied = _same(costs, float(costs.min()))
        return ks[tied], routed[tied]

    def _pick(self, best: float, ks: Ints, routed: Bools, total: int, meets: bool) -> Choice:
        """Among equal percentiles: (none meets) the cheapest; then fewer regions, direct, mask."""
        if not meets:
            costs = np.where(routed, self.routed_costs()[ks], self.direct_costs()[ks])
            cheapest = _same(costs, costs.min())
            ks, routed = ks[cheapest], routed[cheapest]
        order = np.lexsort((self.masks[ks], routed, self.sizes[ks]))
        chosen = self.configuration(int(ks[order[0]]), bool(routed[order[0]]))
        evaluation = Evaluation(
            chosen, best, cost(self.instance, chosen), best <= self.instance.max_ms
        )
        return Choice(evaluation, total)


def _used(regions: Ints, count: int) -> Ints:
    """The distinct regions in an array of region indices, ascending."""
    used: Ints = np.flatnonzero(np.bincount(regions.ravel(), minlength=count))
    return used


def _same(costs: Floats, reference: float) -> Bools:
    """`model.same_cost`, elementwise."""
    if not np.isfinite(reference):
        return np.zeros(len(costs), dtype=bool)
    scale = np.maximum(np.abs(costs), abs(reference))
    same: Bools = np.abs(costs - reference) <= COST_TOLERANCE * scale
    return same


def solve(instance: Instance) -> Choice:
    """The configuration section IV-B chooses, computed without per-configuration sorting."""
    return Solver(instance).solve()
