"""Token buckets by key: a burst, then one token per 1/rate seconds, each key its own; an
address's bucket taken together with its wider networks' (an IPv6 /48 and /32)."""

from __future__ import annotations

from tidings.broker.rates import AddressBuckets, TokenBuckets


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


def test_the_64s_of_one_48_share_a_bucket_four_times_a_64s() -> None:
    buckets = AddressBuckets(rate=0.001, burst=2, clock=Clock())
    walked = [f"2001:db8:1:{n:x}::1" for n in range(5)]  # five /64s of one /48
    answers = [buckets.take(address) for address in walked for _ in range(2)]
    assert answers[:8] == [0.0] * 8  # four /64s' bursts: the /48's 8
    assert all(wait > 0 for wait in answers[8:])  # the fifth /64 has its own tokens still
    assert buckets.take("2001:db8:2::1") == 0.0  # another /48 of the same /32


def test_the_48s_of_one_32_share_a_bucket_sixteen_times_a_64s() -> None:
    buckets = AddressBuckets(rate=0.001, burst=1, clock=Clock())
    walked = [f"2001:db8:{n:x}::1" for n in range(17)]  # a /64 in each of 17 /48s
    answers = [buckets.take(address) for address in walked]
    assert answers[:16] == [0.0] * 16
    assert answers[16] > 0
    assert buckets.take("2001:db9::1") == 0.0  # another /32


def test_a_call_the_wider_network_refuses_takes_nothing_from_its_64() -> None:
    clock = Clock()
    buckets = AddressBuckets(rate=1.0, burst=1, clock=clock)
    for n in range(4):  # the /48's 4 tokens, one per /64
        assert buckets.take(f"2001:db8:1:{n:x}::1") == 0.0
    assert buckets.take("2001:db8:1:ff::1") > 0  # refused by the /48
    clock.now += 0.25  # one /48 token back (4 a second), none yet for the /64s taken
    assert buckets.take("2001:db8:1:ff::1") == 0.0  # its /64's token was still there


def test_ipv4_addresses_count_one_by_one_with_no_wider_bucket() -> None:
    buckets = AddressBuckets(rate=0.001, burst=1, clock=Clock())
    assert [buckets.take(f"192.0.2.{n}") for n in range(40)] == [0.0] * 40
    assert buckets.take("::ffff:192.0.2.1") > 0  # a mapped address is its IPv4 address
