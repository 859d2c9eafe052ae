"""The specification, as the paper states it: slow on purpose, the reference the solver must match.

For every configuration, the list D_C of every message's delivery time to every subscriber,
sorted; its n-th entry is the percentile (equations 5, 6). Costs are the literal sums of
equations 3 and 4. The choice rule is `model.choose`. Plain Python floats, no numpy in the
loops, so that nothing here shares the solver's shortcuts.
"""

from __future__ import annotations

from tidings.placement.model import (
    Choice,
    Configuration,
    Evaluation,
    Instance,
    Mode,
    choose,
    configurations,
)


def _closest(row: list[float], regions: tuple[int, ...]) -> int:
    best = regions[0]
    for r in regions[1:]:
        if row[r] < row[best]:  # strict: a tie keeps the lower index
            best = r
    return best


def _delivery_list(instance: Instance, configuration: Configuration) -> list[float]:
    L: list[list[float]] = instance.L.tolist()
    LR: list[list[float]] = instance.LR.tolist()
    regions = configuration.regions
    times: list[float] = []
    for p, sizes in zip(instance.publishers.tolist(), instance.sizes, strict=True):
        r_p = _closest(L[p], regions)
        for _message in range(len(sizes)):
            for s in instance.subscribers.tolist():
                r_s = _closest(L[s], regions)
                if configuration.mode is Mode.DIRECT:
                    times.append(L[p][r_s] + L[s][r_s])  # equation 1
                else:
                    times.append(L[p][r_p] + LR[r_p][r_s] + L[s][r_s])  # equation 2, R^P
    return sorted(times)


def _cost(instance: Instance, configuration: Configuration) -> float:
    regions = configuration.regions
    L: list[list[float]] = instance.L.tolist()
    alpha: list[float] = instance.alpha.tolist()
    beta: list[float] = instance.beta.tolist()
    served = {r: 0 for r in regions}  # N_S^R
    for s in instance.subscribers.tolist():
        served[_closest(L[s], regions)] += 1
    total = 0.0
    for sizes in instance.sizes:  # equation 3
        for size in sizes.tolist():
            for r in regions:
                total += served[r] * size * beta[r]
    if configuration.mode is Mode.ROUTED:  # equation 4
        for p, sizes in zip(instance.publishers.tolist(), instance.sizes, strict=True):
            r_p = _closest(L[p], regions)
            for size in sizes.tolist():
                total += (len(regions) - 1) * size * alpha[r_p]
    return total


def evaluate(instance: Instance, configuration: Configuration) -> Evaluation:
    times = _delivery_list(instance, configuration)
    n = instance.needed
    value = times[n - 1] if n > 0 else 0.0
    return Evaluation(
        configuration, value, _cost(instance, configuration), value <= instance.max_ms
    )


def solve(instance: Instance) -> Choice:
    """Evaluate every configuration and apply section IV-B's rule."""
    candidates = configurations(instance.regions, instance.modes)
    evaluations = [evaluate(instance, c) for c in candidates]
    return Choice(choose(evaluations), len(candidates))
