"""Token buckets by key (a client's address): `rate` per second, at most `burst` at once.
Bounded: the least recently used keys are forgotten first (a forgotten key starts full).

`AddressBuckets` rate-limits a client address as its connections are counted (an IPv6
client's /64) and, together with it, the wider networks it sits in (its /48 and /32, with
larger buckets: `tidings.networks.WIDER_PREFIXES`): a client holding a /48 walks 65,536 /64s
but shares one /48 bucket. Every bucket must admit; a refused call takes from none."""

from __future__ import annotations

import math
from collections import OrderedDict
from collections.abc import Callable

from tidings.networks import WIDER_PREFIXES, address_key, wider_keys


class TokenBuckets:
    def __init__(
        self, rate: float, burst: float, clock: Callable[[], float], max_keys: int = 100_000
    ) -> None:
        self.rate, self.burst, self.clock, self.max_keys = rate, burst, clock, max_keys
        self._buckets: OrderedDict[str, tuple[float, float]] = OrderedDict()  # tokens, at

    def take(self, key: str) -> float:
        """Take one token for `key`: 0.0 when there was one, else the seconds until one."""
        return self._taken(key, True)

    def wait(self, key: str) -> float:
        """What `take` would answer, taking nothing (the key counts as used, though)."""
        return self._taken(key, False)

    def _taken(self, key: str, take: bool) -> float:
        now = self.clock()
        tokens, at = self._buckets.pop(key, (self.burst, now))
        tokens = min(self.burst, tokens + (now - at) * self.rate)
        wait = 0.0 if tokens >= 1 else (1 - tokens) / self.rate
        self._buckets[key] = (tokens - 1 if tokens >= 1 and take else tokens, now)
        while len(self._buckets) > self.max_keys:
            self._buckets.popitem(last=False)
        return math.ceil(wait * 1000) / 1000 if wait else 0.0


class AddressBuckets:
    """A client address's bucket and its wider networks' (module doc), taken together."""

    def __init__(
        self, rate: float, burst: float, clock: Callable[[], float], max_keys: int = 100_000
    ) -> None:
        self.own = TokenBuckets(rate, burst, clock, max_keys)
        self.wider = {
            factor: TokenBuckets(rate * factor, burst * factor, clock, max_keys)
            for _, factor in WIDER_PREFIXES
        }

    def take(self, address: str) -> float:
        """One token from each of the address's buckets: 0.0 when every one had it, else the
        seconds until all will (and nothing taken)."""
        taken = [(self.own, address_key(address)[0])]
        taken += [(self.wider[factor], key) for key, factor in wider_keys(address)]
        wait = max(buckets.wait(key) for buckets, key in taken)
        if not wait:
            for buckets, key in taken:
                buckets.take(key)
        return wait
