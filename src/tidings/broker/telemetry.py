"""Telemetry: one observer of what the broker does, for its metrics and its event logs.

The operations tell it what happened (published, enqueued, leased, acknowledged, a function
called); it counts, times and writes the log lines. Without an event log (`event_log` off)
it only counts: the operations never ask which.
"""

from __future__ import annotations

import collections
import logging
import time
from collections.abc import Callable, Sequence
from operator import attrgetter

from tidings.broker.placement_state import LastPlacement
from tidings.broker.traffic import TopicTraffic
from tidings.delivery.leases import Leases
from tidings.eventlog import EventLog, enqueued_lines, message_lines
from tidings.metrics import Metrics
from tidings.model import Publication, SubscriptionKind
from tidings.sandbox import FunctionOutcome
from tidings.store.base import Fanout, Message, NewMessage

log = logging.getLogger("tidings.broker")
KindOf = Callable[[str], SubscriptionKind | None]  # a subscription id's kind, None if unknown
# a leased message's, or a settled lease's (`Leased`): taken in C, not a Python step
_ENQUEUED_AT = attrgetter("enqueued_at")


class Telemetry:
    def __init__(self, metrics: Metrics, eventlog: EventLog | None, kind_of: KindOf) -> None:
        self.metrics = metrics
        self.eventlog = eventlog
        self.kind_of = kind_of
        self.leases = Leases()  # an ack then knows when its publication was enqueued
        self.topics = TopicTraffic(time.monotonic)
        self.placement = LastPlacement(time.time)  # the controller's, on placement/state

    def close(self) -> None:
        if self.eventlog is not None:
            self.eventlog.close()

    def tick(self) -> None:
        """Rotate the event logs that have grown old (the pipeline reads finished files)."""
        if self.eventlog is not None:
            self.eventlog.tick()

    # ---- publishing
    def matched(self, publications: int, seconds: float) -> None:
        """A batch matched in `seconds`: the histogram counts publications."""
        self.metrics.matching.observe(seconds / publications, publications)

    def published(self, pubs: Sequence[Publication], deliveries: Sequence[int]) -> None:
        """A batch accepted, each publication with its topic and content deliveries."""
        self.metrics.inc("publications_total", len(pubs))
        self.topics.record(pubs, deliveries)
        self.placement.record(pubs)
        if self.eventlog is not None:
            self.eventlog.published(pubs)

    def simulated(self, publications: int, deliveries: int) -> None:
        """Of what `published` counted, what a simulator sent and the deliveries it made."""
        self.metrics.inc("simulated_publications", publications)
        self.metrics.inc("simulated_deliveries", deliveries)

    def enqueued(self, fanouts: Sequence[Fanout]) -> None:
        """Topic and content deliveries, counted by the kind of their first subscription."""
        kinds = [self.kind_of(ids[0]) for f in fanouts for ids in f.owners.values()]
        for kind, count in collections.Counter(kinds).items():
            self.metrics.inc("deliveries_enqueued", count, kind=kind or "function")
        if self.eventlog is not None and kinds:
            self.eventlog.delivery_lines(enqueued_lines(fanouts, kinds))

    def function_enqueued(self, added: int, messages: list[NewMessage]) -> None:
        self.metrics.inc("deliveries_enqueued", added, kind="function")
        if self.eventlog is not None:
            fanouts = [
                Fanout(m.publication_id, m.dedup_key, m.body, m.enqueued_at,
                       {m.subscriber_id: m.subscription_ids})
                for m in messages
            ]  # fmt: skip
            kinds = [self.kind_of(m.subscription_ids[0]) for m in messages]
            self.eventlog.delivery_lines(enqueued_lines(fanouts, kinds))

    # ---- functions
    def function_called(self, outcome: FunctionOutcome) -> None:
        self.metrics.inc("function_calls_total")
        if outcome.error is not None:
            self.metrics.inc("function_failures_total")

    def function_suspended(self, subscription_id: str, reason: str) -> None:
        log.warning("function subscription %s suspended: %s", subscription_id, reason)
        self.metrics.inc("function_suspensions")

    # ---- queues (tidings.delivery.queues.QueueObserver)
    def leased(self, messages: list[Message], now: float) -> None:
        self.metrics.inc("deliveries_leased_total", len(messages))
        self.leases.remember(messages)
        self.metrics.publish_to_delivery.observe_since(now, map(_ENQUEUED_AT, messages))
        if self.eventlog is not None:
            self.eventlog.delivery_lines(message_lines(messages, "delivered", now))

    def acked(self, subscriber_id: str, receipts: list[str], now: float) -> None:
        self.metrics.inc("deliveries_acked_total", len(receipts))
        settled = self.leases.settle(subscriber_id, receipts)
        self.metrics.publish_to_ack.observe_since(now, map(_ENQUEUED_AT, settled))
        if self.eventlog is not None and settled:
            self.eventlog.delivery_lines(message_lines(settled, "acked", now))

    def nacked(self, subscriber_id: str, receipts: list[str]) -> None:
        self.leases.settle(subscriber_id, receipts)
        self.metrics.inc("deliveries_nacked", len(receipts))

    def rejected(self, subscriber_id: str, message: Message, reason: str) -> None:
        self.leases.settle(subscriber_id, [message.receipt])
        self.metrics.inc("deliveries_rejected_total")
        log.warning("dead-lettered message %s of %s: %s", message.id, subscriber_id, reason)

    # ---- the broker's own life
    def background_failed(self, what: str, error: BaseException | None = None) -> None:
        self.metrics.inc("background_errors_total")
        log.error("%s failed", what, exc_info=error)
