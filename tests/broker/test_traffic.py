"""Traffic by topic: counts and decaying rates per topic, in bounded memory."""

from __future__ import annotations

import math

import pytest

from tidings.broker.traffic import WINDOW_S, TopicTraffic
from tidings.model import Publication


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def pub(*topics: str) -> Publication:
    return Publication("p", 0.0, None, topics, {}, ())


def test_a_publication_counts_its_deliveries_to_each_of_its_topics() -> None:
    traffic = TopicTraffic(Clock())
    traffic.record([pub("a", "b"), pub("a"), pub()], [3, 1, 5])
    shown, other = traffic.snapshot()
    counts = {topic: (t.publications, t.deliveries) for topic, t in shown}
    assert counts == {"a": (2, 4), "b": (1, 3)}
    assert (other.publications, other.deliveries) == (0, 0)


def test_a_steady_rate_reads_as_itself_and_a_silence_fades_it() -> None:
    clock = Clock()
    traffic = TopicTraffic(clock)
    for _ in range(int(20 * WINDOW_S)):  # 5 a second for twenty windows
        clock.now += 0.2
        traffic.record([pub("steady")], [2])
    rate = traffic.snapshot()[0][0][1]
    assert rate.publications_per_s == pytest.approx(5.0, rel=0.15)
    assert rate.deliveries_per_s == pytest.approx(10.0, rel=0.15)
    clock.now += WINDOW_S
    faded = traffic.snapshot()[0][0][1]
    assert faded.publications_per_s == pytest.approx(rate.publications_per_s / math.e)
    assert faded.publications == rate.publications  # the counts stay


def test_new_names_past_twice_the_bound_fold_the_least_busy_into_other() -> None:
    clock = Clock()
    traffic = TopicTraffic(clock, keep=10)
    traffic.record([pub("busy")] * 50, [1] * 50)
    for n in range(1000):
        clock.now += 0.01
        traffic.record([pub(f"invented/{n}")], [0])
        assert len(traffic) <= 20
    shown, other = traffic.snapshot()
    assert len(shown) == 10
    assert shown[0][0] == "busy"
    assert sum(t.publications for _, t in shown) + other.publications == 1050
