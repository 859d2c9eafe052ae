"""The broker's metrics through prometheus-client: every family declared at start, with
its help text, so a scrape shows all of them from the first second; rendered in the
Prometheus text format (docs/operations.md lists them).

Each broker has its own registry (tests run several brokers in one process). Counters and
histograms are fed by the broker and the web layer as things happen; gauges (queue depths,
subscriptions, subscribers) are read from a `Snapshot` taken at scrape time.
"""

from __future__ import annotations

import bisect
import itertools
import math
import threading
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field

import prometheus_client
from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector
from prometheus_client.utils import floatToGoString

prometheus_client.disable_created_metrics()  # type: ignore[no-untyped-call]  # no `_created` series beside every counter

LATENCY_BUCKETS_S = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30)
MATCHING_BUCKETS_S = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.1, 1.0)
KINDS = ("topic", "content", "function")
OUTCOMES = ("ok", "status", "error")  # of a webhook request

# name (exposed as tidings_<name>_total) -> (help, label names)
COUNTERS: dict[str, tuple[str, tuple[str, ...]]] = {
    "publications": ("Publications accepted.", ()),
    "simulated_publications": ("Publications a simulator sent (marked Tidings-Simulation).", ()),
    "simulated_deliveries": ("Topic and content deliveries of simulated publications.", ()),
    "deliveries_enqueued": ("Deliveries enqueued, by the kind of subscription matched.", ("kind",)),
    "deliveries_leased": ("Deliveries handed to a subscriber (pulled or pushed).", ()),
    "deliveries_acked": ("Deliveries acknowledged.", ()),
    "deliveries_nacked": ("Deliveries handed back for redelivery.", ()),
    "deliveries_rejected": ("Leased messages that could not be served, dead-lettered.", ()),
    "expired": ("Messages moved to dead letters by the retention.", ()),
    "function_calls": ("Function subscription evaluations.", ()),
    "function_failures": ("Function evaluations that failed (error, time or memory).", ()),
    "function_suspensions": ("Function subscriptions suspended after repeated failures.", ()),
    "subscribers_registered": ("Subscribers registered.", ()),
    "subscribers_expired": ("Subscribers deleted as ephemeral or idle.", ()),
    "background_errors": ("Background tasks that failed.", ()),
    "queue_overflow": ("Deliveries dead-lettered or refused because their subscriber's queue "
                       "was full, by policy.", ("policy",)),
    "subscription_reloads": ("Full reads of the store's subscriptions into the index (at "
                             "start, or when the change log no longer reaches back).", ()),
    "subscription_changes_applied": ("Subscription changes applied from the store's change "
                                     "log (a shared store's other brokers).", ()),
    "subscription_cache_hits": ("Requests of a stateless broker served from its index as held "
                                "(younger than subscriptions.staleness_s).", ()),
    "subscription_cache_misses": ("Requests of a stateless broker that first brought its "
                                  "index up to date from the store's change log.", ()),
    "webhook_requests": ("Webhook POSTs, by outcome: ok (2xx), status (another answer), "
                         "error (timeout, connection).", ("outcome",)),
    "webhook_pauses": ("Webhook endpoints paused after repeated failures.", ()),
    "connections_refused": ("Connections answered 503 and closed at once: their client "
                            "address held http.max_connections_per_address already.", ()),
    "connections_reclaimed": ("Idle kept-alive connections closed to make room for a new one "
                              "at http.max_connections.", ()),
    "bodies_too_slow": ("Requests answered 408 and closed: their body came slower than "
                        "http.body_min_rate.", ()),
    "framing_refused": ("Requests answered 431 (or closed, an answer under way): their "
                        "chunk framing or trailers took more than http.max_header_bytes.", ()),
    "queue_ops_waited": ("Queue operations (a pull's lease, ack, nack, dead letters) that "
                         "waited for one of their subscriber's turns "
                         "(queues.max_concurrent_ops_per_subscriber).", ()),
    "http_requests": ("HTTP requests, by route template, method and status.",
                      ("route", "method", "status")),
}  # fmt: skip


@dataclass(frozen=True, slots=True)
class QueueGauge:
    subscriber_id: str
    ready: int
    leased: int
    oldest_age_s: float


@dataclass(frozen=True, slots=True)
class Snapshot:
    """The gauges at one scrape."""

    subscribers: int = 0
    subscriptions: dict[str, int] = field(default_factory=dict)  # kind -> count
    ready: int = 0
    leased: int = 0
    dead: int = 0
    oldest_age_s: float = 0.0
    queues: list[QueueGauge] = field(default_factory=list)  # the deepest, at most a cap


class Metrics:
    def __init__(self, per_subscriber_cap: int = 100) -> None:
        self.registry = CollectorRegistry()
        self.per_subscriber_cap = per_subscriber_cap
        self._children: dict[tuple[object, ...], Counter] = {}
        self._counters = {
            name: Counter(f"tidings_{name}", text, labels, registry=self.registry)
            for name, (text, labels) in COUNTERS.items()
        }
        for kind in KINDS:  # present at zero from the start
            self._counters["deliveries_enqueued"].labels(kind=kind)
        for outcome in OUTCOMES:
            self._counters["webhook_requests"].labels(outcome=outcome)
        self.matching = self._histogram(
            "matching_seconds", "Matching time per publication.", MATCHING_BUCKETS_S
        )
        self.publish_to_delivery = self._histogram(
            "publish_to_delivery_seconds",
            "From a publication's enqueueing to its delivery to a subscriber.",
            LATENCY_BUCKETS_S,
        )
        self.publish_to_ack = self._histogram(
            "publish_to_ack_seconds",
            "From a publication's enqueueing to its acknowledgement (leased by this broker).",
            LATENCY_BUCKETS_S,
        )
        self.http = Histogram(
            "tidings_http_request_seconds",
            "HTTP request time, by route template and method.",
            ("route", "method"),
            buckets=LATENCY_BUCKETS_S,
            registry=self.registry,
        )
        self._gauges = _Gauges()
        self.registry.register(self._gauges)
        prometheus_client.ProcessCollector(registry=self.registry)
        prometheus_client.PlatformCollector(registry=self.registry)

    def _histogram(self, name: str, text: str, buckets: tuple[float, ...]) -> Timings:
        timings = Timings(f"tidings_{name}", text, buckets)
        self.registry.register(timings)
        return timings

    def inc(self, name: str, by: float = 1.0, **labels: str) -> None:
        """Add to the counter `name` (`publications_total` or `publications`). A labelled
        child is looked up once (prometheus-client's `labels()` costs a lock and a dict
        build each call; the hot paths count every request)."""
        key = (name, *labels.items())
        child = self._children.get(key)
        if child is None:
            counter = self._counters[name.removesuffix("_total")]
            child = self._children[key] = counter.labels(**labels) if labels else counter
        child.inc(by)

    def value(self, name: str, **labels: str) -> float:
        """A counter's current value (for tests and the console)."""
        sample = f"tidings_{name.removesuffix('_total')}_total"
        return self.registry.get_sample_value(sample, labels) or 0.0

    def render(self, snapshot: Snapshot) -> bytes:
        self._gauges.snapshot = snapshot
        return prometheus_client.generate_latest(self.registry)


FEW = 8  # values observed one by one rather than bucket by bucket (`observe_since`)


class Timings(Collector):
    """A histogram without labels, observed a batch at a time and rendered as
    prometheus-client's `Histogram` renders: its `observe` takes two locks and walks the
    buckets for each value (1.5 us), and a stream of deliveries observed each of them."""

    def __init__(self, name: str, text: str, buckets: Sequence[float]) -> None:
        self.name, self.text = name, text
        self._bounds = (*buckets, math.inf)
        self._counts = [0] * len(self._bounds)  # by the first bound at or above the value
        self._sum = 0.0
        self._lock = threading.Lock()

    def observe(self, value: float, times: int = 1) -> None:
        """`value`, `times` over."""
        at = bisect.bisect_left(self._bounds, value)
        with self._lock:
            self._counts[at] += times
            self._sum += value * times

    def observe_each(self, values: Iterable[float]) -> None:
        bounds, counts, total = self._bounds, self._counts, 0.0
        with self._lock:
            for value in values:
                counts[bisect.bisect_left(bounds, value)] += 1
                total += value
            self._sum += total

    def observe_since(self, now: float, times: Iterable[float]) -> None:
        """`now - t` (0 for a `t` after `now`) for each of `times`: as `observe_each` of
        them, in a Python step a bucket rather than a value (a fan-out observed two ages a
        delivery). A value within a rounding of a bucket's bound may fall either side."""
        ordered = sorted(times)
        if len(ordered) <= FEW:  # fewer values than the buckets' steps would cost
            self.observe_each([max(0.0, now - t) for t in ordered])
            return
        past = bisect.bisect_right(ordered, now)  # after these, ages below 0: counted as 0
        total = now * past - math.fsum(ordered[:past])
        below = 0  # values at or below the bound before
        with self._lock:
            for at, bound in enumerate(self._bounds):
                upto = len(ordered) - bisect.bisect_left(ordered, now - bound)
                self._counts[at] += upto - below
                below = upto
            self._sum += total

    def describe(self) -> list[Metric]:
        return list(self.collect())

    def collect(self) -> Iterator[Metric]:
        with self._lock:
            counts, total = list(self._counts), self._sum
        cumulative = itertools.accumulate(counts)
        buckets = [(_le(b), float(n)) for b, n in zip(self._bounds, cumulative, strict=True)]
        yield HistogramMetricFamily(self.name, self.text, buckets, total)


def _le(bound: float) -> str:
    """A bucket's `le` label, as prometheus-client writes it ("0.5", "1.0", "+Inf")."""
    return str(floatToGoString(bound))  # type: ignore[no-untyped-call]


class _Gauges(Collector):
    """The gauges of the latest `Snapshot`, as prometheus-client families."""

    def __init__(self) -> None:
        self.snapshot = Snapshot()

    def describe(self) -> list[Metric]:
        return list(self.collect())

    def collect(self) -> Iterator[Metric]:
        s = self.snapshot
        yield _gauge("subscribers", "Registered subscribers.", s.subscribers)
        kinds = GaugeMetricFamily(
            "tidings_subscriptions", "Subscriptions held, by kind.", labels=["kind"]
        )
        for kind in KINDS:
            kinds.add_metric([kind], s.subscriptions.get(kind, 0))
        yield kinds
        states = GaugeMetricFamily(
            "tidings_queued_messages", "Messages in all queues, by state.", labels=["state"]
        )
        for state, count in (("ready", s.ready), ("leased", s.leased), ("dead", s.dead)):
            states.add_metric([state], count)
        yield states
        yield _gauge(
            "oldest_message_age_seconds", "Age of the oldest queued message.", s.oldest_age_s
        )
        yield from _per_subscriber(s.queues)


def _gauge(name: str, text: str, value: float) -> GaugeMetricFamily:
    return GaugeMetricFamily(f"tidings_{name}", text, value=value)


def _per_subscriber(queues: list[QueueGauge]) -> Iterator[Metric]:
    depth = GaugeMetricFamily(
        "tidings_subscriber_queued_messages",
        "Messages queued per subscriber, by state (the deepest queues only: a capped set).",
        labels=["subscriber", "state"],
    )
    age = GaugeMetricFamily(
        "tidings_subscriber_oldest_message_age_seconds",
        "Age of the oldest message per subscriber (the deepest queues only).",
        labels=["subscriber"],
    )
    for q in queues:
        depth.add_metric([q.subscriber_id, "ready"], q.ready)
        depth.add_metric([q.subscriber_id, "leased"], q.leased)
        age.add_metric([q.subscriber_id], q.oldest_age_s)
    yield depth
    yield age
