"""What publishers send and when: schedules and publication bodies, seeded and pure."""

from __future__ import annotations

import random
import string
from collections.abc import Iterator
from typing import Any

from tidings.sim.config import PublisherGroup


def schedule(pub: PublisherGroup, duration: float, rng: random.Random) -> Iterator[float]:
    """Send times in seconds from the start: every 1/rate, or Poisson arrivals at that rate."""
    at, sent = pub.start, 0
    limit = pub.publications
    while (limit is None and at < duration) or (limit is not None and sent < limit):
        yield at
        sent += 1
        gap = rng.expovariate(pub.rate) if pub.arrival == "poisson" else 1 / pub.rate
        at += gap


def planned(pub: PublisherGroup, duration: float) -> int:
    """How many publications one publisher of the group is expected to send."""
    if pub.publications is not None:
        return pub.publications
    return max(0, round((duration - pub.start) * pub.rate))


def filler(size: int, rng: random.Random) -> str:
    return "".join(rng.choices(string.ascii_letters, k=size))


class Publications:
    """Bodies for one publisher: its text, a slice of one random block as the payload."""

    def __init__(self, pub: PublisherGroup, rng: random.Random) -> None:
        self._pub, self._rng = pub, rng
        self._fill = filler(max(0, pub.payload_bytes - len(pub.text)), rng)

    def body(self, seq: int) -> dict[str, Any]:
        pub = self._pub
        topics = [self._rng.choice(pub.topics)] if pub.pick_topic else list(pub.topics)
        attributes = {k: self._value(v) for k, v in pub.attributes.items()}
        return {
            "data": {"text": pub.text, "seq": seq, "fill": self._fill},
            "topics": topics or None,
            "attributes": attributes or None,
            "function_types": list(pub.function_types) or None,
        }

    def _value(self, spec: Any) -> Any:
        if isinstance(spec, dict) and "choice" in spec:
            return self._rng.choice(spec["choice"])
        if isinstance(spec, dict) and "uniform" in spec:
            low, high = spec["uniform"]
            return self._rng.uniform(low, high)
        return spec
