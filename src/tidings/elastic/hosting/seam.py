"""The broker's side of elastic matching: what `Broker` is given when `matching = "elastic"`.

It starts the deployment (a ZooKeeper of its own unless one is named), feeds the access
point with the broker's topic and content subscriptions, publishes through it, and has the
exit points enqueue into the broker's store, telling the broker what they enqueued (its
wake-ups, counters and event log). Function subscriptions stay with the function runner.

Several brokers on one store and one named ZooKeeper share one deployment: the first
creates it, the others join it as access points (docs/elastic.md, "Access points"). Each
subscription change is sent by the broker it was made on; a broker's reload of the store's
subscriptions sends only what differs from what it knows, and a broker that joined sends
nothing at its first load (the matchers hold those already): it only knows them, for a
recovery.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Awaitable, Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from tidings.config import ElasticSettings
from tidings.elastic.hosting.autoscaler import Policy
from tidings.elastic.hosting.deployment import Deployment
from tidings.elastic.operators.exit_point import EnqueueStore, StoreSink
from tidings.elastic.protocol.channels import Security, beyond_loopback
from tidings.elastic.protocol.curve import cluster_key
from tidings.elastic.protocol.scaling import ScaleReport
from tidings.model import Publication, Subscription
from tidings.store.base import Fanout

log = logging.getLogger("tidings.elastic")

Enqueued = Callable[[Sequence[Fanout]], Awaitable[None] | None]


class ElasticMatching:
    def __init__(
        self, settings: ElasticSettings, store: EnqueueStore, key_path: Path | None = None
    ) -> None:
        self.settings = settings
        self.store = store
        # the cluster key made at the first start when listening beyond loopback without one
        self.key_path = key_path
        self.deployment: Deployment | None = None
        self._zookeeper: contextlib.ExitStack | None = None
        self.on_enqueued: Enqueued | None = None
        self._known: dict[str, Subscription] | None = None  # as the matchers hold them

    async def start(self, on_enqueued: Enqueued | None = None) -> None:
        self.on_enqueued = on_enqueued
        hosts = self.settings.zookeeper
        if not hosts:
            from tidings.elastic.coordination.zookeeper import local_zookeeper

            self._zookeeper = contextlib.ExitStack()
            hosts = self._zookeeper.enter_context(local_zookeeper())
            log.info("elastic matching: a ZooKeeper of its own at %s", hosts)
        self._secure("tcp" if self.settings.zookeeper else "ipc")
        self.deployment = Deployment(
            hosts,
            lambda: StoreSink(self.store, self._enqueued),
            cluster=self.settings.cluster,
            matchers=self.settings.matchers,
            exit_points=self.settings.exit_points,
            transport="tcp" if self.settings.zookeeper else "ipc",
            host=self.settings.host,
            autoscale=Policy() if self.settings.autoscale else None,
            join=bool(self.settings.zookeeper),  # a ZooKeeper of its own has no cluster yet
            unreachable_s=self.settings.unreachable_s,
        )
        await self.deployment.start()
        if self.deployment.joined:
            log.info("elastic matching: joined the running deployment %r", self.settings.cluster)

    def _secure(self, transport: str) -> None:
        """CURVE for every channel when a key is given, or made when the operators listen
        beyond loopback (other machines' operators then need a copy: `--key-file`)."""
        path = key_path(self.settings, transport, self.key_path)
        if path is None:
            return
        made = not path.exists()
        Security.secure(cluster_key(path))
        if made:
            log.warning(
                "elastic matching: made the cluster key %s: copy it (0600) to every "
                "machine of the deployment and pass it as --key-file",
                path,
            )

    def _enqueued(self, fanouts: Sequence[Fanout]) -> Awaitable[None] | None:
        return None if self.on_enqueued is None else self.on_enqueued(fanouts)

    @property
    def running(self) -> Deployment:
        if self.deployment is None:
            raise RuntimeError("elastic matching has not started")
        return self.deployment

    def load(self, subscriptions: Iterable[Subscription]) -> None:
        """The store's topic and content subscriptions (the broker's start and reloads).
        The first load of a broker that created the deployment sends them all; that of a
        broker that joined sends none (the matchers hold them: it only knows them). Later
        loads send what changed since the last one (subscriptions made or removed through
        another broker, or by anything else that writes the store): the matchers replace a
        subscription by its id, so one sent by two brokers is held once."""
        wanted = {s.id: s for s in subscriptions if s.kind in ("topic", "content")}
        known, self._known = self._known, wanted
        if known is None and self.running.joined:
            self.running.know(wanted.values())
            return
        known = known or {}
        for gone in set(known) - set(wanted):
            self.running.unsubscribe(gone)
        for sub in wanted.values():
            found = known.get(sub.id)
            if found is None or _matched_on(found) != _matched_on(sub):
                self.running.subscribe(sub)

    def subscribe(self, sub: Subscription) -> None:
        if self._known is not None:
            self._known[sub.id] = sub
        self.running.subscribe(sub)

    def unsubscribe(self, subscription_id: str) -> None:
        if self._known is not None:
            self._known.pop(subscription_id, None)
        self.running.unsubscribe(subscription_id)

    async def publish(self, pubs: Sequence[Publication]) -> list[int]:
        return await self.running.publish(pubs)

    async def scale(self, matchers: int | None, exit_points: int | None) -> list[ScaleReport]:
        return await self.running.scale(matchers, exit_points)

    async def status(self) -> dict[str, Any]:
        return await self.running.status()

    async def close(self) -> None:
        if self.deployment is not None:
            await self.deployment.close()
        if self._zookeeper is not None:
            self._zookeeper.close()

    def collector(self) -> Collector:
        return _Operators(self)


def _matched_on(sub: Subscription) -> tuple[object, ...]:
    return (sub.subscriber_id, sub.kind, sub.topics, sub.predicates)


def key_path(settings: ElasticSettings, transport: str, made: Path | None) -> Path | None:
    """The cluster key's file: the one given; else, when the operators listen beyond
    loopback, `made` (made at the first start); else none (plain channels, loopback only)."""
    if settings.key_file:
        return Path(settings.key_file)
    beyond = transport == "tcp" and beyond_loopback(f"tcp://{settings.host}:0")
    return made if beyond else None


class _Operators(Collector):
    """Per-operator gauges for /metrics, read at scrape time."""

    def __init__(self, elastic: ElasticMatching) -> None:
        self.elastic = elastic

    def describe(self) -> list[Metric]:
        return []

    def collect(self) -> Iterator[Metric]:
        handled = GaugeMetricFamily(
            "tidings_elastic_publications",
            "Publications handled per elastic operator since it started.",
            labels=["operator", "role"],
        )
        backlog = GaugeMetricFamily(
            "tidings_elastic_backlog",
            "Publications in flight at an operator (access point: not yet committed "
            "everywhere; exit point: waiting for partial results or their turn).",
            labels=["operator", "role"],
        )
        held = GaugeMetricFamily(
            "tidings_elastic_subscriptions",
            "Subscriptions held per matcher (its current view's slice).",
            labels=["operator"],
        )
        matching = GaugeMetricFamily(
            "tidings_elastic_matching_p99_seconds",
            "The 99th percentile of recent matching times per publication, per matcher.",
            labels=["operator"],
        )
        deployment = self.elastic.deployment
        if deployment is not None and deployment.access_point is not None:
            ap = deployment.access_point
            handled.add_metric([ap.id, "access_point"], ap.counters.get("publications", 0))
            backlog.add_metric([ap.id, "access_point"], ap.backlog())
            for m in list(deployment.matchers.values()):
                handled.add_metric([m.id, "matcher"], m.counters.get("publications", 0))
                held.add_metric([m.id], m.subscriptions())
                matching.add_metric([m.id], m.matching_p99())
            for e in list(deployment.exit_points.values()):
                handled.add_metric([e.id, "exit_point"], e.counters.get("publications", 0))
                backlog.add_metric([e.id, "exit_point"], e.backlog())
        yield from (handled, backlog, held, matching)
