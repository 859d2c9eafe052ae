"""Token buckets by key: a burst, then one token per 1/rate seconds, each key its own."""

from __future__ import annotations

from tidings.broker.rates import TokenBuckets


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_a_burst_passes_then_the_wait_for_the_next_token_is_said() -> None:
    clock = Clock()
    buckets = TokenBuckets(rate=1.0, burst=3, clock=clock)
    assert [buckets.take("a") for _ in range(3)] == [0.0, 0.0, 0.0]
    assert buckets.take("a") == 1.0
    clock.now += 1.0
    assert buckets.take("a") == 0.0


def test_keys_have_buckets_of_their_own() -> None:
    buckets = TokenBuckets(rate=1.0, burst=1, clock=Clock())
    assert (buckets.take("a"), buckets.take("b"), buckets.take("a")) == (0.0, 0.0, 1.0)


def test_a_bucket_never_holds_more_than_its_burst() -> None:
    clock = Clock()
    buckets = TokenBuckets(rate=1.0, burst=2, clock=clock)
    buckets.take("a")
    clock.now += 100
    assert [buckets.take("a") for _ in range(3)] == [0.0, 0.0, 1.0]


def test_the_least_recently_used_keys_are_forgotten_first() -> None:
    buckets = TokenBuckets(rate=0.001, burst=1, clock=Clock(), max_keys=2)
    for key in ("a", "b", "c"):  # "a" is forgotten: it starts full again
        buckets.take(key)
    assert buckets.take("a") == 0.0
    assert buckets.take("c") > 0
