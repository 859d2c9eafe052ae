"""Publishing: a batch of publications from the API to the queues. Access and quotas are
checked, each publication is routed (its topic and content deliveries enqueued in one group
commit) with what it owes its function subscriptions recorded beside, a repeated `dedup_id`
is answered as its first publication was, and the function evaluations start after the
answer."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Coroutine, Sequence
from typing import Any, NamedTuple

from tidings.broker.access import Access
from tidings.broker.dedup import PublisherDedup, answered_as_first
from tidings.broker.functions import FunctionMatching
from tidings.broker.quotas import Quotas
from tidings.broker.routing import Routing
from tidings.broker.telemetry import Telemetry
from tidings.delivery.committer import Committer
from tidings.delivery.signals import Signals
from tidings.ids import new_id
from tidings.model import JSON, Publication, Scalar
from tidings.store.base import DedupClaim, Enqueue, Fanout

Spawn = Callable[[Coroutine[Any, Any, Any]], None]


class Published(NamedTuple):
    """A publication's answer. (Named tuples: one of each per publication on the publish
    path, where a frozen dataclass costs five times as much to make.)"""

    publication: Publication
    deliveries: int
    duplicate: bool = False  # its dedup_id was taken: the first publication's answer
    evaluations: int = 0  # function subscriptions that evaluate it after the answer
    progress_token: str = ""  # reads its progress (tidings.broker.progress); the publisher's


class PublicationInput(NamedTuple):
    data: JSON = None
    topics: tuple[str, ...] = ()
    attributes: dict[str, Scalar] | None = None
    function_types: tuple[str, ...] = ()
    data_encoding: str = "json"  # "base64": binary data, kept as base64 text
    dedup_id: str | None = None  # the publisher's name for it (docs/guarantees.md)
    simulated: bool = False  # sent by a simulator (its traffic is counted apart as well)


class Deliveries:
    """What routing enqueues: fan-outs in one group commit (with their dedup ids' claims),
    then counted, logged and their subscribers woken."""

    def __init__(
        self,
        dedup: PublisherDedup,
        committer: Committer,
        telemetry: Telemetry,
        signals: Signals,
        quotas: Quotas,
    ) -> None:
        self.dedup, self.committer, self.telemetry = dedup, committer, telemetry
        self.signals, self.quotas = signals, quotas

    async def deliver(self, fanouts: list[Fanout]) -> None:
        if self.quotas.full:  # refuse-new: full queues get nothing until they drain
            fanouts = self._within_quotas(fanouts)
        claimed = await self.dedup.enqueue(fanouts)
        if claimed is not None:
            fanouts = claimed
        elif fanouts:  # fresh: a new publication's keys were never enqueued before
            await self.committer.submit(Enqueue([], fresh=True, fanouts=fanouts))
        self.enqueued(fanouts)

    def _within_quotas(self, fanouts: list[Fanout]) -> list[Fanout]:
        kept, refused = [], 0
        for fanout in fanouts:
            owners = {o: ids for o, ids in fanout.owners.items() if self.quotas.accepts(o)}
            refused += len(fanout.owners) - len(owners)
            if owners:
                kept.append(dataclasses.replace(fanout, owners=owners))
        self.quotas.refused(refused)
        return kept

    def enqueued(self, fanouts: Sequence[Fanout]) -> None:
        """Deliveries enqueued (here, or by an exit point of this process)."""
        self.telemetry.enqueued(fanouts)
        self.quotas.touched(fanouts)
        self.signals.notify({owner for f in fanouts for owner in f.owners})


class Publishing:
    def __init__(
        self,
        access: Access,
        quotas: Quotas,
        dedup: PublisherDedup,
        routing: Routing,
        functions: FunctionMatching,
        telemetry: Telemetry,
        clock: Callable[[], float],
    ) -> None:
        self.access, self.quotas, self.dedup, self.routing = access, quotas, dedup, routing
        self.functions, self.telemetry, self.clock = functions, telemetry, clock

    async def batch(
        self,
        items: Sequence[PublicationInput],
        key: str | None,
        spawn: Spawn,
        token: Callable[[str], str] = lambda _: "",
    ) -> list[Published]:
        """`key`: the publisher's, checked against its topic prefixes when keys are set;
        `token`: each answer's progress token, from the publication id it names."""
        self.access.check_publish(key, [i.topics for i in items])
        self.quotas.check_publish()
        now = self.clock()
        pubs = [
            Publication(new_id(), now, i.data, i.topics, dict(i.attributes or {}),
                        i.function_types, i.data_encoding)
            for i in items
        ]  # fmt: skip
        owed = self.functions.owed(pubs) if self.routing.runs_functions else []
        with self.dedup.batch(pubs, [i.dedup_id for i in items], key) as claims:
            counts = await self.functions.routed_owing(self.routing.route(pubs), owed)
            firsts = await self.dedup.settle(claims, spawn)
        if firsts:  # a repeated publish owes nothing: its first did
            owed = await self.functions.forgive(owed, set(firsts))
        self._count(items, pubs, counts, firsts)
        owing = {p.id: len(subs) for p, subs in owed}  # before the evaluations start
        self.functions.spawn_for(owed, spawn)
        return [
            Published(answered_as_first(p, f), f.deliveries, True, 0, token(f.publication_id))
            if (f := firsts.get(p.id))
            else Published(p, n, False, owing.get(p.id, 0), token(p.id))
            for p, n in zip(pubs, counts, strict=True)
        ]

    def _count(
        self,
        items: Sequence[PublicationInput],
        pubs: list[Publication],
        counts: list[int],
        firsts: dict[str, DedupClaim],
    ) -> None:
        """The publications accepted now with their deliveries (a repeat was counted as its
        first), and those a simulator sent apart."""
        sent = list(zip(items, pubs, counts, strict=True))
        if firsts:
            sent = [(i, p, n) for i, p, n in sent if p.id not in firsts]
            pubs, counts = [p for _, p, _ in sent], [n for _, _, n in sent]
        self.telemetry.published(pubs, counts)
        if any(i.simulated for i in items):
            simulated = [n for i, _, n in sent if i.simulated]
            self.telemetry.simulated(len(simulated), sum(simulated))

    async def per_topic(
        self,
        data: JSON,
        topics: tuple[str, ...],
        dedup_id: str | None,
        key: str | None,
        spawn: Spawn,
    ) -> Published:
        """The thesis's topic publishing: one message per (subscriber, matching topic)."""
        self.access.check_publish(key, [topics])
        self.quotas.check_publish()
        pub = Publication(new_id(), self.clock(), data, topics, {}, ())
        with self.dedup.batch([pub], [dedup_id], key) as claims:
            deliveries = await self.routing.route_per_topic(pub)
            first = (await self.dedup.settle(claims, spawn)).get(pub.id)
        if first is not None:
            return Published(answered_as_first(pub, first), first.deliveries, True)
        self.telemetry.published([pub], [deliveries])
        return Published(pub, deliveries)
