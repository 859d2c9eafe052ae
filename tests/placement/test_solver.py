"""The fast solver returns exactly the specification's choice."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings

from tidings.placement import solver, spec
from tidings.placement.model import Choice, Instance, Mode

from .strategies import instances


def assert_same(fast: Choice, reference: Choice) -> None:
    a, b = fast.evaluation, reference.evaluation
    assert a.configuration == b.configuration
    assert a.percentile_ms == b.percentile_ms
    assert a.meets == b.meets
    assert a.cost == pytest.approx(b.cost, rel=1e-12, abs=0.0)
    assert fast.configurations == reference.configurations


@settings(max_examples=400, deadline=None)
@given(instances())
def test_on_small_instances_full_of_ties_the_solver_chooses_what_the_specification_does(
    instance: Instance,
) -> None:
    assert_same(solver.solve(instance), spec.solve(instance))


@settings(max_examples=150, deadline=None)
@given(instances(max_regions=5, integral=False))
def test_on_instances_with_real_valued_latencies_and_prices_the_choices_agree(
    instance: Instance,
) -> None:
    assert_same(solver.solve(instance), spec.solve(instance))


def test_a_larger_random_instance_agrees_with_the_specification() -> None:
    rng = np.random.default_rng(7)
    regions, clients = 6, 40
    L = rng.uniform(5, 150, (clients, regions)).round(1)
    LR = rng.uniform(5, 120, (regions, regions)).round(1)
    LR = (LR + LR.T) / 2
    np.fill_diagonal(LR, 0.0)
    prices = np.array([0.02, 0.02, 0.09, 0.08, 0.14, 0.16]) * 1e-9
    instance = Instance(
        L, LR, prices, prices * 2, np.arange(12), tuple(np.full(5, 1024.0) for _ in range(12)),
        np.arange(10, 40), 75.0, 120.0, (Mode.DIRECT, Mode.ROUTED),
    )  # fmt: skip
    assert_same(solver.solve(instance), spec.solve(instance))
