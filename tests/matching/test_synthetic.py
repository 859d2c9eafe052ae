"""The standard workload generator produces what issue 4 specifies, and its baseline is right."""

from __future__ import annotations

import numpy as np

from tidings.matching import synthetic as wl
from tidings.matching.semantics import conjunction_holds


def rng() -> np.random.Generator:
    return np.random.default_rng(7)


def test_each_subscription_uses_k_distinct_attributes() -> None:
    w = wl.named("W-A")
    attrs, _ = wl.subscription_arrays(w, 500, rng())
    assert attrs.shape == (500, 10)
    assert all(len(set(row)) == 10 for row in attrs.tolist())
    assert attrs.min() >= 0 and attrs.max() < 20


def test_every_interval_has_width_w_times_d_and_fits_the_domain() -> None:
    w = wl.named("W-B")
    _, lows = wl.subscription_arrays(w, 2000, rng())
    assert lows.shape == (2000, 5)
    assert lows.min() >= 0 and (lows + int(w.width * w.domain)).max() < w.domain


def test_zipf_attributes_favour_the_first_ones() -> None:
    attrs, _ = wl.subscription_arrays(wl.named("W-B", zipf=1.0), 3000, rng())
    counts = np.bincount(attrs.ravel(), minlength=50)
    assert counts[0] > 3 * counts[-1]


def test_a_sparse_event_carries_exactly_m_attributes() -> None:
    w = wl.named("W-A", event_attributes=5)
    events = wl.events_of(w, wl.event_arrays(w, 50, rng()))
    assert {len(e) for e in events} == {5}


def test_the_brute_force_baseline_agrees_with_the_reference_semantics() -> None:
    w = wl.SyntheticWorkload(attributes=6, predicates=3, width=0.5, domain=100)
    attrs, lows = wl.subscription_arrays(w, 300, rng())
    subs = list(wl.predicates_of(w, attrs, lows))
    values = wl.event_arrays(w, 20, rng())
    for row, event in zip(values, wl.events_of(w, values), strict=True):
        expected = [i for i, ps in enumerate(subs) if conjunction_holds(ps, event)]
        assert wl.brute_force(w, attrs, lows, row).tolist() == expected
