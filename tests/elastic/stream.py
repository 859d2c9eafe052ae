"""A constant stream for the scaling tests: several publishers numbering their publications,
subscription churn, stable subscribers whose every delivery is checked."""

from __future__ import annotations

import asyncio
import itertools
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TypeVar

import orjson

from tidings.elastic.hosting.deployment import Deployment
from tidings.elastic.operators.matcher import MatcherOperator
from tidings.elastic.operators.matcher_scale import MatcherScale
from tidings.elastic.protocol import wire
from tidings.model import Op, Predicate, Publication, Subscription
from tidings.store.base import NewMessage

PUBLISHERS = 3

# subscriber -> (its subscriptions, which (publisher, n) it must receive)
STABLE: dict[str, tuple[list[Subscription], Callable[[int, int], bool]]] = {
    "everything": ([Subscription("st-all", "everything", "topic", ("t/#",))], lambda p, n: True),
    "first": ([Subscription("st-first", "first", "topic", ("t/0",))], lambda p, n: p == 0),
    "odd": (
        [Subscription("st-odd", "odd", "content", (), (Predicate("publisher", Op.IN, (1, 3)),))],
        lambda p, n: p in (1, 3),
    ),
    "both": (
        [
            Subscription("st-both-t", "both", "topic", ("t/*",)),
            Subscription("st-both-c", "both", "content", (), (Predicate("n", Op.GE, 0),)),
        ],
        lambda p, n: True,
    ),
    "even": (
        [Subscription("st-even", "even", "content", (), (Predicate("even", Op.EQ, True),))],
        lambda p, n: n % 2 == 0,
    ),
}


@dataclass
class Stream:
    deployment: Deployment
    published: dict[int, int] = field(default_factory=lambda: defaultdict(int))
    futures: list[asyncio.Future[int]] = field(default_factory=list)
    live_churn: set[str] = field(default_factory=set)
    stop: asyncio.Event = field(default_factory=asyncio.Event)
    enough: asyncio.Event = field(default_factory=asyncio.Event)  # the stream is under way
    progress: asyncio.Event = field(default_factory=asyncio.Event)  # set at every step
    changes: int = 0  # subscription changes made
    via: dict[int, Deployment] = field(default_factory=dict)  # publisher -> its access point

    def subscribe_stable(self) -> None:
        for subs, _ in STABLE.values():
            for sub in subs:
                self.deployment.subscribe(sub)

    async def publisher(self, p: int, at_least: int) -> None:
        n = 0
        while not self.stop.is_set() or n < at_least:
            pub = Publication(
                f"pub-{p}-{n}",
                float(n),
                {"p": p, "n": n},
                (f"t/{p}",),
                {"publisher": p, "n": n, "even": n % 2 == 0},
            )
            self.futures.append(self.via.get(p, self.deployment).ap.publish_nowait(pub))
            n += 1
            self.published[p] = n
            if sum(self.published.values()) >= 60:
                self.enough.set()
            self.progress.set()
            await asyncio.sleep(0.002)  # pacing, not synchronisation

    async def churn(self, through: Deployment | None = None, prefix: str = "churn") -> None:
        """Subscriptions made and removed through one access point (`through`, else the
        stream's), named `<prefix>-<k>`."""
        target = through or self.deployment
        counter = itertools.count()
        while not self.stop.is_set():
            k = next(counter)
            sid = f"{prefix}-{k}"
            mine = sorted(s for s in self.live_churn if s.startswith(f"{prefix}-"))
            if k % 3 == 2 and mine:
                gone = mine[0]
                target.unsubscribe(gone)
                self.live_churn.discard(gone)
            elif k % 2:
                target.subscribe(Subscription(sid, f"c{k % 5}", "topic", ("t/#",)))
                self.live_churn.add(sid)
            else:
                pred = (Predicate("n", Op.GE, k % 7),)
                target.subscribe(Subscription(sid, f"c{k % 5}", "content", (), pred))
                self.live_churn.add(sid)
            self.changes += 1
            self.progress.set()
            await asyncio.sleep(0.003)

    async def run(self, scaling: Callable[[], object], at_least: int = 40) -> None:
        tasks = [asyncio.create_task(self.publisher(p, at_least)) for p in range(PUBLISHERS)]
        tasks.append(asyncio.create_task(self.churn()))
        try:
            await self.enough.wait()
            await scaling()  # type: ignore[misc]
        finally:
            self.stop.set()
            await asyncio.gather(*tasks)
        await asyncio.gather(*self.futures)


def check(stream: Stream, messages: list[NewMessage]) -> None:
    """Nothing lost for the stable subscribers, nothing duplicated and every publisher's order
    kept for everyone."""
    seen: set[tuple[str, str]] = set()
    by_subscriber: dict[str, dict[int, list[int]]] = defaultdict(lambda: defaultdict(list))
    for m in messages:
        key = (m.subscriber_id, m.publication_id)
        assert key not in seen, f"duplicated: {key}"
        seen.add(key)
        body = orjson.loads(m.body)
        by_subscriber[m.subscriber_id][body["data"]["p"]].append(body["data"]["n"])
    for subscriber, per_publisher in by_subscriber.items():
        for p, ns in per_publisher.items():
            assert ns == sorted(ns), f"{subscriber} got publisher {p} out of order"
    for subscriber, (_, wants) in STABLE.items():
        for p in sorted({*range(PUBLISHERS), *stream.published}):
            expected = [n for n in range(stream.published[p]) if wants(p, n)]
            got = by_subscriber[subscriber][p]
            assert got == expected, (
                f"{subscriber} from publisher {p}: lost {set(expected) - set(got)}"
            )


def held_subscriptions(deployment: Deployment, *others: MatcherOperator) -> set[str]:
    """Every subscription id the matchers of the current view hold: the deployment's own,
    and `others` joined from elsewhere."""
    held: set[str] = set()
    for op in [*deployment.matchers.values(), *others]:
        if op.slices:
            held |= set(op.slices[max(op.slices)].records)
    return held


def stable_and_live(stream: Stream) -> set[str]:
    """The subscriptions the matchers must hold: the stable ones and the churn still live."""
    return {s.id for subs, _ in STABLE.values() for s in subs} | stream.live_churn


M = TypeVar("M", bound=MatcherOperator)


async def idle_matcher(deployment: Deployment, kind: type[M], name: str) -> M:
    """A matcher of `kind` joined to the deployment, unassigned: the next scale-out takes it."""
    op = kind(name, await deployment._session(), deployment._bind(name))
    await op.start()
    return op


class SilentScale(MatcherScale):
    async def change(self, message: wire.ChangeMatcher) -> None:
        SilentMatcher.changed.set()


class SilentMatcher(MatcherOperator):
    """A matcher that takes part in a scale until `change`, then never reports `done`."""

    changed = asyncio.Event()
    Scaling = SilentScale
