"""What one subscriber may hold, checked before it is stored."""

from __future__ import annotations

import ipaddress
import logging
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from tidings.broker.alarms import DiskAlarm
from tidings.broker.rates import AddressBuckets
from tidings.config import Limits
from tidings.delivery.signals import Revocations
from tidings.errors import ErrorCode, TidingsError
from tidings.metrics import Metrics
from tidings.model import Predicate, Subscription, needle_chars
from tidings.networks import wider_keys
from tidings.store.asyncstore import AsyncStore
from tidings.store.base import Fanout, subscription_bytes

log = logging.getLogger("tidings.broker")
NEAR = 0.9  # an estimate past this share of a bound gets its queue measured


@dataclass(frozen=True, slots=True)
class Held:
    """What this broker's index holds in all, for the broker-wide budgets."""

    needle_chars: int = 0  # `limits.max_contains_chars`
    subscription_bytes: int = 0  # `limits.max_subscription_bytes`


class Quotas:
    def __init__(
        self,
        limits: Limits,
        store: AsyncStore,
        disk: DiskAlarm,
        revocations: Revocations,
        clock: Callable[[], float],
        metrics: Metrics,
    ) -> None:
        self.limits, self.store, self.disk, self.revocations = limits, store, disk, revocations
        self.metrics = metrics
        self._estimates: dict[str, list[int]] = {}  # owner -> [messages, bytes], at most
        self._unmeasured: set[str] = set()
        self.full: set[str] = set()  # queues refusing new deliveries (refuse-new)
        per_s = limits.registrations_per_minute / 60
        self.registrations = AddressBuckets(per_s, limits.registrations_per_minute, clock)

    def check_register(self, client: str) -> None:
        """RATE_LIMITED past `registrations_per_minute` from one client address, an IPv6
        client's /64 as one, as its connections are counted (a client walks its /64 at will),
        and past 4 and 16 times that from its /48 and /32 (`AddressBuckets`); a loopback
        address only with `rate_limit_loopback`."""
        if loopback(client) and not self.limits.rate_limit_loopback:
            return
        wait = self.registrations.take(client)
        if wait:
            detail = f"at most {self.limits.registrations_per_minute} registrations a minute"
            if wider_keys(client):
                detail += " (an IPv6 /64; its /48 4 times that, its /32 16 times)"
            raise TidingsError(ErrorCode.RATE_LIMITED, detail=detail, retry_s=wait)

    def check_stream(self, subscriber_id: str) -> None:
        """LIMIT_EXCEEDED past the open streams allowed (this one already counted)."""
        mine, every = self.revocations.open_streams(subscriber_id), self.revocations.open_streams()
        if mine > self.limits.max_streams_per_subscriber:
            detail = f"at most {self.limits.max_streams_per_subscriber} streams per subscriber"
            raise TidingsError(ErrorCode.LIMIT_EXCEEDED, field="stream", detail=detail)
        if every > self.limits.max_streams:
            detail = f"at most {self.limits.max_streams} streams on this broker"
            raise TidingsError(ErrorCode.LIMIT_EXCEEDED, field="stream", detail=detail)

    # ---- each subscriber's queue

    def touched(self, fanouts: Iterable[Fanout]) -> None:
        """These deliveries were enqueued: their queues' estimates grow (an upper bound:
        acknowledgements only shrink a queue), and a queue seen for the first time is
        measured at the next `enforce`."""
        for fanout in fanouts:
            for owner in fanout.owners:
                estimate = self._estimates.get(owner)
                if estimate is None:
                    self._unmeasured.add(owner)
                else:
                    estimate[0] += 1
                    estimate[1] += len(fanout.body)

    def arrived(self, owners: Iterable[str]) -> None:
        """Deliveries others published reached these queues (a partition owned here took
        them in): measured at the next `enforce`."""
        self._unmeasured.update(owners)

    def accepts(self, owner: str) -> bool:
        """False while the owner's queue is full under `refuse-new`."""
        return owner not in self.full

    async def enforce(self, now: float) -> int:
        """Measure the queues that may be past `max_queue_messages` or `max_queue_bytes`
        (their estimate near a bound, first seen, or full), and bring them within: their
        oldest dead-lettered (`overflow`), or new deliveries refused until they drain; how
        many went. A queue far from its bounds costs no query."""
        most = (self.limits.max_queue_messages, self.limits.max_queue_bytes)
        near = {
            o
            for o, (n, size) in self._estimates.items()
            if n > most[0] * NEAR or size > most[1] * NEAR
        }
        looked, self._unmeasured = self._unmeasured | self.full | near, set()
        gone = 0
        for owner in looked:
            count, size = await self.store.queue_size(owner)
            self._estimates[owner] = [count, size]
            if count <= most[0] and size <= most[1]:
                self.full.discard(owner)
            else:
                gone += await self._overflow(owner, count, size, now)
        return gone

    async def _overflow(self, owner: str, count: int, size: int, now: float) -> int:
        policy = self.limits.queue_overflow
        if policy == "refuse-new":
            if owner not in self.full:
                log.warning(
                    "queue of %s full (%d messages, %d bytes): new deliveries refused",
                    owner,
                    count,
                    size,
                )
            self.full.add(owner)
            return 0
        most = (self.limits.max_queue_messages, self.limits.max_queue_bytes)
        moved = await self.store.trim_queue(owner, *most, now)
        self._estimates[owner] = [min(count, most[0]), min(size, most[1])]
        self.metrics.inc("queue_overflow_total", moved, policy=policy)
        log.warning("queue of %s full: its %d oldest messages dead-lettered", owner, moved)
        return moved

    def refused(self, count: int) -> None:
        self.metrics.inc("queue_overflow_total", count, policy="refuse-new")

    def check_publish(self) -> None:
        """INSUFFICIENT_STORAGE while the disk alarm is on."""
        self.disk.check()

    async def check_subscribe(self, sub: Subscription, held: Held) -> None:
        """LIMIT_EXCEEDED when the subscriber holds its most subscriptions already, when this
        one's stored body would take the subscriber's subscription bytes (counted from the
        store, so across brokers) or the broker's (`held`, its index's) past their budget,
        or when its `contains` needles would do the same to the needle characters."""
        count, mine = await self.store.subscription_usage(sub.subscriber_id)
        limit = self.limits.max_subscriptions_per_subscriber
        if count >= limit:
            raise TidingsError(
                ErrorCode.LIMIT_EXCEEDED,
                field="subscriptions",
                detail=f"at most {limit} subscriptions per subscriber",
            )
        self._check_bytes(subscription_bytes(sub), mine, held.subscription_bytes)
        if any(map(needle_chars, sub.predicates)):  # the common subscription costs no listing
            await self._check_needles(sub.subscriber_id, sub.predicates, held.needle_chars)

    def _check_bytes(self, size: int, mine: int, held: int) -> None:
        bytes_ = "subscriptions hold at most {} bytes"
        self._budget(
            "max_subscription_bytes_per_subscriber",
            "a subscriber's " + bytes_,
            mine,
            size,
            "subscriptions",
        )
        self._budget(
            "max_subscription_bytes", "the broker's " + bytes_, held, size, "subscriptions"
        )

    async def _check_needles(
        self, subscriber_id: str, predicates: Sequence[Predicate], held: int
    ) -> None:
        owned = await self.store.list_subscriptions(subscriber_id)
        mine = sum(needle_chars(p) for sub in owned for p in sub.predicates)
        chars_ = "contains values hold at most {} characters"
        for i, predicate in enumerate(predicates):
            if chars := needle_chars(predicate):
                field = f"predicates[{i}].value"
                self._budget(
                    "max_contains_chars_per_subscriber",
                    "a subscriber's " + chars_,
                    mine,
                    chars,
                    field,
                )
                self._budget("max_contains_chars", "the broker's " + chars_, held, chars, field)
            mine, held = mine + chars, held + chars

    def _budget(self, setting: str, what: str, held: int, adding: int, field: str) -> None:
        """LIMIT_EXCEEDED naming `field` when `adding` takes `held` past the limit `setting`
        (`what`: of what, `{}` standing for the limit)."""
        most: int = getattr(self.limits, setting)
        if held + adding > most:
            said = f"{what.format(most)} in all ({setting}): {held} held, this one has {adding}"
            raise TidingsError(ErrorCode.LIMIT_EXCEEDED, field=field, detail=said)


def loopback(address: str) -> bool:
    """Whether a client address is this machine's (its tools, its simulator, the broker's
    own URL functions): exempt from per-address rates unless `rate_limit_loopback`."""
    try:
        return ipaddress.ip_address(address).is_loopback
    except ValueError:  # no address (a test client, a Unix socket): treated as local
        return not address
