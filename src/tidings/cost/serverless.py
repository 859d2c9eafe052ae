"""The serverless bill: the thesis's arithmetic (ch. 6.5.7), itemised.

compute GB-s = executions x memory GB x duration s; each item bills
(quantity - monthly free grant) / per x price. Pure functions over a `Usage` and a `Provider`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields

from tidings.cost.prices import ITEMS, Provider, Tariff
from tidings.errors import invalid


@dataclass(frozen=True, slots=True)
class Usage:
    """One month of a pub/sub deployment. `executions` and `queue_requests` override the
    figures derived from publications, deliveries and subscribers when given."""

    publications_per_month: float = 0
    executions_per_publication: float = 1  # the broker functions each publication runs
    function_invocations: float = 0  # subscriber matching functions evaluated
    deliveries: float = 0  # (publication, subscriber) matches
    requests_per_delivery: float = 3  # send, receive, delete
    subscribers: float = 0
    polls_per_subscriber: float = 0  # receives that may come back empty
    payload_kb: float = 1
    memory_mb: float = 512
    duration_ms: float = 1000
    storage_gb: float = 0
    executions: float | None = None
    queue_requests: float | None = None

    def __post_init__(self) -> None:
        for spec in fields(self):
            value = getattr(self, spec.name)
            if value is not None and (value < 0 or math.isnan(value)):
                raise invalid(_option(spec.name), f"must be a number >= 0, not {value}")
        if self.memory_mb == 0:
            raise invalid("--memory-mb", "must be more than 0")


def _option(name: str) -> str:
    return "--" + name.replace("_", "-")


@dataclass(frozen=True, slots=True)
class Line:
    """One item of a bill."""

    item: str
    service: str
    unit: str
    quantity: float
    free: float
    billable: float
    price: float
    per: float
    cost: float


@dataclass(frozen=True, slots=True)
class Bill:
    provider: str
    label: str
    lines: tuple[Line, ...]

    @property
    def total(self) -> float:
        return sum(line.cost for line in self.lines)


def executions(usage: Usage) -> float:
    if usage.executions is not None:
        return usage.executions
    return (
        usage.publications_per_month * usage.executions_per_publication + usage.function_invocations
    )


def gb_seconds(usage: Usage) -> float:
    return executions(usage) * (usage.memory_mb / 1024) * (usage.duration_ms / 1000)


def queue_requests(usage: Usage, tariff: Tariff) -> float:
    if usage.queue_requests is not None:
        return usage.queue_requests
    chunks = math.ceil(usage.payload_kb / tariff.chunk_kb) if tariff.chunk_kb else 1
    per_delivery = usage.requests_per_delivery * max(chunks, 1)
    return usage.deliveries * per_delivery + usage.subscribers * usage.polls_per_subscriber


def quantity(item: str, usage: Usage, tariff: Tariff) -> float:
    if item == "compute":
        return gb_seconds(usage)
    if item == "executions":
        return executions(usage)
    if item == "queue_requests":
        return queue_requests(usage, tariff)
    return usage.storage_gb


def line(item: str, amount: float, tariff: Tariff) -> Line:
    """Price `amount` units of `item`: what exceeds the free grant, at `price` per `per`."""
    if tariff.up_to is not None and amount > tariff.up_to:
        raise invalid(
            item,
            f"{amount:g} {tariff.unit} is beyond what the price table covers for "
            f"{tariff.service} ({tariff.up_to:g} {tariff.unit})",
        )
    billable = max(0.0, amount - tariff.free)
    cost = billable / tariff.per * tariff.price
    return Line(
        item,
        tariff.service,
        tariff.unit,
        amount,
        tariff.free,
        billable,
        tariff.price,
        tariff.per,
        cost,
    )


def bill(usage: Usage, provider: Provider) -> Bill:
    """The itemised monthly bill of `usage` at `provider`'s prices."""
    lines = tuple(
        line(item, quantity(item, usage, provider.tariffs[item]), provider.tariffs[item])
        for item in ITEMS
    )
    return Bill(provider.name, provider.label, lines)
