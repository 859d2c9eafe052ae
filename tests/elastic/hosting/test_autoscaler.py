"""The autoscaler's policy, on recorded signals, and the autoscaler driving a deployment."""

from __future__ import annotations

import asyncio

import pytest
from tests.elastic.conftest import Recorder

from tidings.elastic.hosting.autoscaler import Policy, Sample, decide
from tidings.elastic.hosting.deployment import Deployment
from tidings.model import Op, Predicate, Publication, Subscription

POLICY = Policy(
    up_latency_s=0.1,
    down_latency_s=0.01,
    up_backlog=100,
    down_backlog=10,
    window_s=2.0,
    cooldown_s=5.0,
    interval_s=0.5,
    min_matchers=1,
    max_matchers=3,
)


def recorded(*signals: tuple[float, float, int]) -> list[Sample]:
    return [Sample(at, latency, backlog) for at, latency, backlog in signals]


def test_a_backlog_over_the_up_threshold_adds_one_matcher() -> None:
    samples = recorded((9.0, 0.005, 20), (9.5, 0.005, 150), (10.0, 0.005, 40))
    assert decide(POLICY, samples, matchers=1, now=10.0, last_scale_at=None) == 2


def test_a_latency_percentile_over_the_up_threshold_adds_one_matcher() -> None:
    samples = recorded((9.5, 0.25, 0), (10.0, 0.02, 0))
    assert decide(POLICY, samples, matchers=2, now=10.0, last_scale_at=None) == 3


def test_the_layer_never_grows_past_its_maximum_nor_shrinks_below_its_minimum() -> None:
    busy = recorded((10.0, 1.0, 1000))
    quiet = recorded((8.0, 0.0, 0), (9.0, 0.0, 0), (10.0, 0.0, 0))
    assert decide(POLICY, busy, matchers=3, now=10.0, last_scale_at=None) is None
    assert decide(POLICY, quiet, matchers=1, now=10.0, last_scale_at=None) is None


def test_between_the_down_and_up_thresholds_nothing_changes() -> None:
    middling = recorded((8.0, 0.05, 50), (9.0, 0.05, 50), (10.0, 0.05, 50))
    assert decide(POLICY, middling, matchers=2, now=10.0, last_scale_at=None) is None


def test_only_a_whole_window_of_quiet_removes_a_matcher() -> None:
    quiet = recorded((8.0, 0.001, 0), (8.5, 0.001, 0), (9.0, 0.001, 2), (10.0, 0.0, 0))
    assert decide(POLICY, quiet, matchers=2, now=10.0, last_scale_at=None) == 1
    too_short = recorded((9.5, 0.001, 0), (10.0, 0.0, 0))
    assert decide(POLICY, too_short, matchers=2, now=10.0, last_scale_at=None) is None
    one_busy = recorded((8.0, 0.001, 0), (9.0, 0.001, 11), (10.0, 0.0, 0))
    assert decide(POLICY, one_busy, matchers=2, now=10.0, last_scale_at=None) is None


def test_no_scale_within_the_cool_down_and_nothing_measured_before_the_last_scale_counts() -> None:
    busy = recorded((10.0, 1.0, 1000))
    assert decide(POLICY, busy, matchers=1, now=10.0, last_scale_at=6.0) is None
    before_the_scale = recorded((9.0, 1.0, 1000), (12.0, 0.05, 50))
    assert decide(POLICY, before_the_scale, matchers=2, now=12.0, last_scale_at=9.5) is None


def test_a_policy_whose_thresholds_cross_is_refused() -> None:
    with pytest.raises(ValueError):
        Policy(up_backlog=10, down_backlog=10)


async def test_a_rising_backlog_scales_the_matchers_out_and_a_quiet_period_back_in(
    zookeeper: str,
) -> None:
    policy = Policy(
        up_latency_s=10.0,  # the backlog alone decides here
        down_latency_s=5.0,
        up_backlog=200,
        down_backlog=5,
        window_s=0.6,
        cooldown_s=0.3,
        interval_s=0.1,
        max_matchers=2,
    )
    recorder = Recorder()
    async with Deployment(zookeeper, recorder.sink, autoscale=policy) as deployment:
        autoscaler = deployment.autoscaler
        assert autoscaler is not None
        for i in range(2_000):
            low = (i * 7) % 1000
            predicates = (Predicate("x", Op.GE, low), Predicate("x", Op.LT, low + 5))
            deployment.subscribe(Subscription(f"s{i}", f"u{i % 50}", "content", (), predicates))
        futures: list[asyncio.Future[int]] = []
        n = 0
        while not autoscaler.decisions:  # publish faster than one matcher answers
            for _ in range(100):
                pub = Publication(f"p{n}", 0.0, {}, (), {"x": n % 1000})
                futures.append(deployment.ap.publish_nowait(pub))
                n += 1
            await asyncio.sleep(0)
        await asyncio.gather(*futures)  # then quiet
        while len(autoscaler.decisions) < 2:
            autoscaler.scaled.clear()
            await asyncio.wait_for(autoscaler.scaled.wait(), 60)
        assert [(f, t, outcome) for _, f, t, outcome in autoscaler.decisions[:2]] == [
            (1, 2, "done"),
            (2, 1, "done"),
        ]
        assert await deployment.matcher_count() == 1 == len(deployment.matchers)
        assert len({(m.subscriber_id, m.publication_id) for m in recorder.messages}) == len(
            recorder.messages
        )


async def test_without_a_policy_no_autoscaler_runs(zookeeper: str) -> None:
    async with Deployment(zookeeper, Recorder().sink) as deployment:
        assert deployment.autoscaler is None


async def test_one_process_runs_the_autoscaler_and_another_takes_it_on_when_it_leaves(
    zookeeper: str,
) -> None:
    recorder = Recorder()
    first = Deployment(zookeeper, recorder.sink, autoscale=POLICY)
    await first.start()
    second = Deployment(
        zookeeper, recorder.sink, cluster=first.cluster, join=True, autoscale=POLICY
    )
    try:
        await second.start()
        assert second.joined and first.autoscaler is not None and second.autoscaler is None
        await first.close()  # the access point leaves; its session and its lead end
        await asyncio.wait_for(_running_autoscaler(second), 30)
        assert await second.matcher_count() == 1
    finally:
        await first.close()
        await second.close()


async def _running_autoscaler(deployment: Deployment) -> None:
    while deployment.autoscaler is None:
        await asyncio.sleep(0.02)
