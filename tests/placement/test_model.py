"""The paper's equations 1-6 and the choice rule of section IV-B, on worked examples."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from tidings.placement.model import (
    Configuration,
    Evaluation,
    Instance,
    Mode,
    choose,
    configurations,
    cost,
    delivery_times,
    evaluate,
    percentile,
    rank,
)

D, R = Mode.DIRECT, Mode.ROUTED


def two_regions(**changes: object) -> Instance:
    """Client 0 publishes next to region 0; clients 1 and 2 subscribe next to regions 0 and 1."""
    fields: dict[str, object] = {
        "L": np.array([[1.0, 10.0], [2.0, 20.0], [30.0, 3.0]]),
        "LR": np.array([[0.0, 5.0], [5.0, 0.0]]),
        "alpha": np.array([1.0, 2.0]),
        "beta": np.array([10.0, 20.0]),
        "publishers": np.array([0]),
        "sizes": (np.array([100.0, 300.0]),),
        "subscribers": np.array([1, 2]),
        "ratio": 50.0,
        "max_ms": 10.0,
    }
    fields.update(changes)
    return Instance(**fields)  # type: ignore[arg-type]


def test_there_are_two_times_two_to_the_n_minus_one_minus_n_configurations() -> None:
    for n in range(1, 8):
        assert len(configurations(n, (D, R))) == 2 * (2**n - 1) - n


def test_one_mode_alone_keeps_the_single_region_configurations_which_are_direct() -> None:
    assert len(configurations(3, (R,))) == 2**3 - 1
    singles = [c for c in configurations(3, (R,)) if len(c.regions) == 1]
    assert {c.mode for c in singles} == {D}


def test_direct_delivery_is_publisher_to_the_subscribers_region_plus_the_last_hop() -> None:
    times = delivery_times(two_regions(), Configuration((0, 1), D))
    assert times.tolist() == [[1.0 + 2.0, 10.0 + 3.0]]


def test_routed_delivery_enters_at_the_publishers_closest_region_not_as_equation_2_prints() -> None:
    times = delivery_times(two_regions(), Configuration((0, 1), R))
    assert times.tolist() == [[1.0 + 0.0 + 2.0, 1.0 + 5.0 + 3.0]]


def test_a_client_uses_its_closest_selected_region_and_a_tie_goes_to_the_lower_index() -> None:
    tied = two_regions(L=np.array([[4.0, 4.0], [2.0, 20.0], [7.0, 7.0]]))
    assert delivery_times(tied, Configuration((0, 1), R)).tolist() == [[4.0 + 2.0, 4.0 + 7.0]]
    assert delivery_times(tied, Configuration((1,), D)).tolist() == [[4.0 + 20.0, 4.0 + 7.0]]


def test_the_rank_is_the_ceiling_of_ratio_times_deliveries_in_decimal_arithmetic() -> None:
    assert rank(95, 100) == 95
    assert rank(75, 5) == 4
    assert rank(33.3, 1000) == 333
    assert rank(0.001, 10) == 1
    assert rank(75, 0) == 0


def test_the_percentile_counts_each_pair_once_per_message_of_its_publisher() -> None:
    instance = two_regions(
        publishers=np.array([0, 2]), sizes=(np.ones(3), np.ones(1)), subscribers=np.array([1])
    )  # times to subscriber 1 from region 0: publisher 0 in 3 ms (x3), publisher 2 in 32 ms
    assert percentile(instance, Configuration((0,), D)) == 3.0
    assert percentile(replace(instance, ratio=76.0), Configuration((0,), D)) == 32.0


def test_direct_cost_is_every_byte_to_every_subscriber_at_its_regions_internet_price() -> None:
    assert cost(two_regions(), Configuration((0, 1), D)) == 400 * (10.0 + 20.0)
    assert cost(two_regions(), Configuration((0,), D)) == 400 * (10.0 + 10.0)


def test_routed_cost_adds_forwarding_to_the_other_regions_at_the_entry_regions_price() -> None:
    assert cost(two_regions(), Configuration((0, 1), R)) == 400 * 30.0 + 1 * 400 * 1.0


def evaluation(regions: tuple[int, ...], mode: Mode, p: float, c: float, meets: bool) -> Evaluation:
    return Evaluation(Configuration(regions, mode), p, c, meets)


def test_the_cheapest_configuration_meeting_the_bound_is_chosen() -> None:
    found = [evaluation((0,), D, 9, 5, True), evaluation((1,), D, 8, 4, True),
             evaluation((0, 1), R, 1, 3, False)]  # fmt: skip
    assert choose(found).configuration == Configuration((1,), D)


def test_equal_costs_go_to_the_lower_percentile_then_to_fewer_regions() -> None:
    found = [evaluation((0, 1), D, 7, 4, True), evaluation((1,), D, 8, 4, True),
             evaluation((0,), D, 7, 4 * (1 + 1e-12), True)]  # fmt: skip
    assert choose(found).configuration == Configuration((0,), D)


def test_when_nothing_meets_the_bound_the_lowest_percentile_wins_whatever_its_cost() -> None:
    found = [evaluation((0,), D, 20, 1, False), evaluation((0, 1), R, 12, 50, False),
             evaluation((0, 1), D, 12, 40, False)]  # fmt: skip
    assert choose(found).configuration == Configuration((0, 1), D)


@pytest.mark.parametrize("bound", [2.0, 3.0])
def test_meeting_is_the_percentile_within_max_ms_inclusive(bound: float) -> None:
    assert evaluate(two_regions(max_ms=bound), Configuration((0,), D)).meets is (bound >= 3.0)


def test_the_configuration_count_agrees_with_the_listing() -> None:
    from tidings.placement.model import configuration_count

    for n in range(1, 7):
        for modes in [(D, R), (D,), (R,)]:
            assert configuration_count(n, modes) == len(configurations(n, modes))
