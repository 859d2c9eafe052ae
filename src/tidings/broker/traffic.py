"""Traffic by topic, for the operator (`GET /v1/admin/topics`): each topic's publications and
the deliveries they made, counted since the broker started and as rates per second over the
last few seconds (exponentially weighted: a steady rate reads as itself, a burst fades with a
time constant of `WINDOW_S`).

Topics are the publishers' to choose, so the memory is bounded: at most `2 * MAX_TOPICS`
topics are held by name; past that, all but the `MAX_TOPICS` busiest (by recent rate) are
folded into one "other" line, so an attacker's stream of new names costs an amortised sort
per `MAX_TOPICS` new topics, never more room. Counted once per publication batch, from the
deliveries the routing answered (never per delivery row)."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from tidings.model import Publication

MAX_TOPICS = 200  # shown by name; the rest are summed as "other"
WINDOW_S = 10.0  # the rates' time constant


@dataclass(slots=True)
class Traffic:
    """One topic's (or the others') counts since the start, and rates at `at`."""

    publications: int = 0
    deliveries: int = 0
    publications_per_s: float = 0.0
    deliveries_per_s: float = 0.0
    at: float = 0.0

    def decay(self, now: float) -> None:
        if now > self.at:
            kept = math.exp(-(now - self.at) / WINDOW_S)
            self.publications_per_s *= kept
            self.deliveries_per_s *= kept
            self.at = now

    def add(self, publications: int, deliveries: int, now: float) -> None:
        self.decay(now)
        self.publications += publications
        self.deliveries += deliveries
        self.publications_per_s += publications / WINDOW_S
        self.deliveries_per_s += deliveries / WINDOW_S

    def fold(self, other: Traffic, now: float) -> None:
        """Add `other`'s counts and rates to these (both seen at `now`)."""
        self.decay(now)
        other.decay(now)
        self.publications += other.publications
        self.deliveries += other.deliveries
        self.publications_per_s += other.publications_per_s
        self.deliveries_per_s += other.deliveries_per_s

    def busy(self) -> tuple[float, int]:
        return self.publications_per_s + self.deliveries_per_s, self.publications


class TopicTraffic:
    def __init__(self, clock: Callable[[], float], keep: int = MAX_TOPICS) -> None:
        self.clock, self.keep = clock, keep
        self._topics: dict[str, Traffic] = {}
        self._other = Traffic()

    def record(self, pubs: Sequence[Publication], deliveries: Sequence[int]) -> None:
        """A batch published: each publication with the deliveries it made (counted to each
        of its topics; a publication without a topic is on none)."""
        batch: dict[str, list[int]] = {}
        for pub, made in zip(pubs, deliveries, strict=True):
            for topic in pub.topics:
                counts = batch.setdefault(topic, [0, 0])
                counts[0] += 1
                counts[1] += made
        if not batch:
            return
        now = self.clock()
        for topic, (published, delivered) in batch.items():
            found = self._topics.get(topic)
            if found is None:
                found = self._topics[topic] = Traffic(at=now)
            found.add(published, delivered, now)
        if len(self._topics) > 2 * self.keep:
            self._fold(now)

    def _fold(self, now: float) -> None:
        for topic, traffic in self._ranked(now)[self.keep :]:
            self._other.fold(traffic, now)
            del self._topics[topic]

    def _ranked(self, now: float) -> list[tuple[str, Traffic]]:
        for traffic in self._topics.values():
            traffic.decay(now)
        return sorted(self._topics.items(), key=lambda item: item[1].busy(), reverse=True)

    def snapshot(self) -> tuple[list[tuple[str, Traffic]], Traffic]:
        """The `keep` busiest topics, busiest first, and the rest summed (copies)."""
        now = self.clock()
        ranked = self._ranked(now)
        other = Traffic(at=now)
        other.fold(self._other, now)
        for _, traffic in ranked[self.keep :]:
            other.fold(traffic, now)
        return [(t, _copy(c)) for t, c in ranked[: self.keep]], other

    def __len__(self) -> int:
        return len(self._topics)


def _copy(traffic: Traffic) -> Traffic:
    return Traffic(
        traffic.publications,
        traffic.deliveries,
        traffic.publications_per_s,
        traffic.deliveries_per_s,
        traffic.at,
    )
