"""The stateless operations of the serverless broker, over external state.

register / unregister / subscribe / unsubscribe / publish / pull / ack: each reads and writes
the Store; the only process-local state is derived and rebuildable (the Matcher, built from
the store's subscriptions at start, and wake-up signals). This is the only module that
knows the Matcher, the function runner and the Store together.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import hmac
import logging
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from tidings import heap
from tidings.config import Settings
from tidings.delivery.committer import Committer
from tidings.delivery.leases import Leases, delivery_event
from tidings.delivery.presence import Presence
from tidings.delivery.signals import Revocations, Signals
from tidings.errors import ErrorCode, TidingsError
from tidings.eventlog import EventLog
from tidings.ids import hash_token, new_id, new_token
from tidings.matching import kernels
from tidings.matching.engine import Event, Matcher
from tidings.metrics import Metrics, QueueGauge, Snapshot
from tidings.model import (
    JSON,
    FunctionSpec,
    Predicate,
    Publication,
    Scalar,
    Subscriber,
    Subscription,
    SubscriptionKind,
)
from tidings.sandbox import FunctionOutcome, FunctionRunner
from tidings.sandbox.health import count_call
from tidings.store.base import (
    Ack,
    AckResult,
    Change,
    DeadLetter,
    Enqueue,
    Fanout,
    Lease,
    Message,
    Nack,
    NewMessage,
    QueueDepth,
    Reject,
    Store,
    SubscriberRecord,
    encode_body,
)

if TYPE_CHECKING:
    from tidings.elastic.hosting.seam import ElasticMatching

log = logging.getLogger("tidings.broker")
NO_SUBSCRIBER = hash_token("")  # compared against when the id is unknown
DEAD_LETTER_BURST = 10  # dead letters in a minute worth a warning
HOUSEKEEPING_PAUSE_S = 1.0  # after a failed pass


@dataclass(frozen=True, slots=True)
class Published:
    publication: Publication
    deliveries: int


@dataclass(frozen=True, slots=True)
class PublicationInput:
    data: JSON = None
    topics: tuple[str, ...] = ()
    attributes: dict[str, Scalar] | None = None
    function_types: tuple[str, ...] = ()
    data_encoding: str = "json"  # "base64": binary data, kept as base64 text


class Broker:
    def __init__(
        self,
        settings: Settings,
        store: Store,
        *,
        runner: FunctionRunner | None = None,
        eventlog: EventLog | None = None,
        clock: Callable[[], float] = time.time,
        admin_token_hash: str = "",
        elastic: ElasticMatching | None = None,
    ) -> None:
        self.settings = settings
        # with elastic matching (tidings.elastic), its operators match topic and content
        # subscriptions and enqueue their deliveries; the local Matcher still serves the
        # thesis's per-topic publishing
        self.elastic = elastic
        self.store = store
        self.runner = runner
        self.eventlog = eventlog
        self.clock = clock
        self.admin_token_hash = admin_token_hash  # empty: no admin calls
        self.metrics = Metrics()
        self.signals = Signals()
        self.revocations = Revocations()
        self.presence = Presence(settings.subscribers)
        self.leases = Leases()
        self._matcher = Matcher()
        self._kinds: dict[str, SubscriptionKind] = {}
        self._functions: dict[str, dict[str, Subscription]] = {}  # type -> id -> sub
        self._suspended: dict[str, Subscription] = {}  # function subscriptions, by id
        self._failures: dict[str, int] = {}
        self._tokens: dict[str, str] = {}
        self._told = 0  # deletions and resyncs told so far: a token read across one is stale
        self._committer = Committer(store.apply)  # every queue operation: one commit path
        self._tasks: set[asyncio.Task[Any]] = set()
        self._version = -1
        self._settled = 0  # subscriptions at the last settle of the heap
        self._changed = asyncio.Event()  # another broker deleted a subscriber: reload now
        self._unwatch: Callable[[], None] = lambda: None
        self._dead_seen: int | None = None  # dead letters at the last look (housekeeping)

    # ---------------------------------------------------------------- life cycle

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        # watching starts before the snapshot, so no change falls between the two

        def told(change: Change) -> None:  # on the store's thread
            loop.call_soon_threadsafe(self._on_change, change)

        self._unwatch = await asyncio.to_thread(self.store.watch, told)
        if self.elastic is not None:
            await self.elastic.start(self._enqueued)
        await self._reload()
        self._spawn(asyncio.to_thread(kernels.warm_up))  # compiled once, then from disk
        self._spawn(self._housekeeping())
        if self.eventlog is not None:
            self._spawn(self._rotate_log(self.eventlog))

    async def _rotate_log(self, eventlog: EventLog) -> None:
        """The pipeline reads only finished log files: rotate them at their configured age
        (`log_rotate_s`, as low as 0.05 s for Spark matching), checked at least every second."""
        while True:
            await asyncio.sleep(max(0.05, min(1.0, self.settings.log_rotate_s)))
            eventlog.tick()

    def _on_change(self, change: Change) -> None:
        """Another broker on the shared store changed something this one caches."""
        if change.kind == "subscriber_removed":
            self._forget(change.subscriber_id)
        else:  # resync: notifications may be lost, so trust no cached token or open stream
            self._told += 1
            self._tokens.clear()
            self._spawn(self._check_streams())
        self._changed.set()

    def _forget(self, subscriber_id: str) -> None:
        self._told += 1
        self._tokens.pop(subscriber_id, None)
        self.revocations.revoke(subscriber_id)

    async def _check_streams(self) -> None:
        """After a resync: close the streams of subscribers deleted meanwhile."""
        for subscriber_id in self.revocations.streaming():
            if await asyncio.to_thread(self.store.get_subscriber, subscriber_id) is None:
                self._forget(subscriber_id)

    async def close(self) -> None:
        await asyncio.to_thread(self._unwatch)
        for task in list(self._tasks):
            task.cancel()
        for task in list(self._tasks):
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        if self.runner is not None:
            await self.runner.aclose()
        if self.elastic is not None:
            await self.elastic.close()
        if self.eventlog is not None:
            self.eventlog.close()

    def _spawn(self, coro: Any) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._finished)

    def _finished(self, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            self.metrics.inc("background_errors_total")
            log.error("background task failed", exc_info=task.exception())

    async def _reload(self) -> None:
        """Rebuild the derived state from the store's subscriptions."""
        version, subscriptions = await asyncio.to_thread(self.store.snapshot)
        self._matcher, self._kinds, self._functions = Matcher(), {}, {}
        self._suspended = {}
        content = [s for s in subscriptions if s.kind == "content"]
        for sub in subscriptions:
            if sub.kind != "content":
                self._index(sub, elastic=False)  # `elastic.load` below tells it what changed
        # in one call: the content index's bulk path (one merge, not one per 1,024 inserts)
        self._matcher.add_contents((s.id, s.subscriber_id, s.predicates) for s in content)
        self._kinds.update((s.id, "content") for s in content)
        await asyncio.to_thread(self._matcher.wait)  # answer from the built index, not a delta
        if self.elastic is not None:
            self.elastic.load(s for s in subscriptions if s.kind in ("topic", "content"))
        self._version = version
        self._settled = 0  # the old indexes are garbage now: the next settle collects them
        self._settle_when_grown()

    def _settle_when_grown(self) -> None:
        """Settle the heap (`tidings.heap`) once the subscriptions reach `SETTLE_FROM`, and
        each time they have doubled since (a broker fed through `subscribe` never reloads)."""
        count = len(self._kinds)
        if count >= max(heap.SETTLE_FROM, 2 * self._settled):
            heap.settle_heap()
            self._settled = count

    async def _housekeeping(self) -> None:
        """Retention, presence and (with a shared store) other brokers' subscription changes.
        A pass that fails (the store restarting, say) is logged and counted, and the next
        comes after a pause: one error must not stop the loop for good."""
        shared = self.settings.resolved_store_url.startswith("postgres")
        due = {"presence": 0.0, "expire": 0.0}
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._changed.wait(), min(1.0, self.presence.every_s))
            self._changed.clear()
            try:
                await self._housekeeping_pass(shared, due)
            except Exception:
                self.metrics.inc("background_errors_total")
                log.exception("housekeeping failed; trying again shortly")
                await asyncio.sleep(HOUSEKEEPING_PAUSE_S)

    async def _housekeeping_pass(self, shared: bool, due: dict[str, float]) -> None:
        now = self.clock()
        self._settle_when_grown()
        if now - due["presence"] >= self.presence.every_s:
            await self._keep_presence(now)
            due["presence"] = now
        if now - due["expire"] >= 60:
            await self._expire(now)
            due["expire"] = now
        if shared and await asyncio.to_thread(self.store.subscriptions_version) != self._version:
            await self._reload()

    async def _expire(self, now: float) -> None:
        """Retention, once a minute; and a warning when dead letters grew by a burst since
        the last look (a poison message, a subscriber that never acknowledges)."""
        moved = await asyncio.to_thread(self.store.expire, now, self.settings.queues.retention_s)
        self.metrics.inc("expired_total", moved)
        await asyncio.to_thread(self.store.sweep_bodies)
        dead = (await asyncio.to_thread(self.store.queue_totals, now))[0].dead
        if self._dead_seen is not None and dead - self._dead_seen >= DEAD_LETTER_BURST:
            log.warning(
                "%d messages were dead-lettered in the last minute (%d in all); "
                "GET /v1/admin/overview or a subscriber's dead-letters say whose",
                dead - self._dead_seen,
                dead,
            )
        self._dead_seen = dead

    async def _keep_presence(self, now: float) -> None:
        """Report who was seen; delete the subscribers that are gone (delivery.presence)."""
        streaming = self.revocations.streaming()
        seen = self.presence.report(streaming, now)
        if seen:
            await asyncio.to_thread(self.store.touch, seen)
        candidates = await asyncio.to_thread(
            self.store.idle_subscribers, *self.presence.bounds(now)
        )
        for subscriber_id in self.presence.expired(candidates, streaming):
            with contextlib.suppress(TidingsError):  # another broker was quicker
                await self.unregister(subscriber_id)
                self.metrics.inc("subscribers_expired")
                log.info("subscriber %s expired (ephemeral, or idle too long)", subscriber_id)

    # ---------------------------------------------------------------- subscribers

    async def register(self, ephemeral: bool = False) -> tuple[Subscriber, str]:
        token = new_token()
        subscriber = Subscriber(new_id(), hash_token(token), self.clock())
        await asyncio.to_thread(self.store.add_subscriber, subscriber, ephemeral)
        self._tokens[subscriber.id] = subscriber.token_hash
        self.metrics.inc("subscribers_registered_total")
        return subscriber, token

    async def authenticate(self, subscriber_id: str, token: str | None) -> None:
        """401 without a token; 403 for a token that is not this subscriber's, and equally
        for a subscriber that does not exist, so that nobody without its token can tell
        whether an id exists."""
        if not token:
            raise TidingsError(ErrorCode.UNAUTHORIZED)
        expected = self._tokens.get(subscriber_id) or await self._token_hash(subscriber_id)
        # an unknown id costs the same comparison as a known one
        if not hmac.compare_digest(expected or NO_SUBSCRIBER, hash_token(token)) or not expected:
            raise TidingsError(ErrorCode.FORBIDDEN, resource=f"subscriber {subscriber_id}")
        self.presence.saw(subscriber_id, self.clock())

    async def _token_hash(self, subscriber_id: str) -> str | None:
        """The stored hash, cached unless a deletion was told while it was read: a removal
        that overtook the read must not leave a dead token cached (then it is read again)."""
        while True:
            told = self._told
            found = await asyncio.to_thread(self.store.get_subscriber, subscriber_id)
            if found is None:
                return None
            if told == self._told:
                self._tokens[subscriber_id] = found.token_hash
                return found.token_hash

    def authenticate_admin(self, token: str | None) -> None:
        """401 without a token, 403 for any token but the admin's."""
        if not token:
            raise TidingsError(ErrorCode.UNAUTHORIZED)
        expected = self.admin_token_hash or NO_SUBSCRIBER
        if not hmac.compare_digest(expected, hash_token(token)) or not self.admin_token_hash:
            raise TidingsError(ErrorCode.FORBIDDEN, resource="the admin calls")

    async def subscriber(self, subscriber_id: str) -> Subscriber:
        found = await asyncio.to_thread(self.store.get_subscriber, subscriber_id)
        if found is None:
            raise TidingsError(ErrorCode.SUBSCRIBER_NOT_FOUND, id=subscriber_id)
        return found

    async def unregister(self, subscriber_id: str) -> None:
        owned = await asyncio.to_thread(self.store.list_subscriptions, subscriber_id)
        if not await asyncio.to_thread(self.store.remove_subscriber, subscriber_id):
            raise TidingsError(ErrorCode.SUBSCRIBER_NOT_FOUND, id=subscriber_id)
        for sub in owned:
            self._unindex(sub.id)
        self._forget(subscriber_id)

    # ---------------------------------------------------------------- subscriptions

    async def subscribe(
        self,
        subscriber_id: str,
        kind: SubscriptionKind,
        topics: tuple[str, ...] = (),
        predicates: tuple[Predicate, ...] = (),
        function: FunctionSpec | None = None,
    ) -> Subscription:
        limit = self.settings.limits.max_subscriptions_per_subscriber
        if await asyncio.to_thread(self.store.count_subscriptions, subscriber_id) >= limit:
            raise TidingsError(
                ErrorCode.LIMIT_EXCEEDED,
                field="subscriptions",
                detail=f"at most {limit} subscriptions per subscriber",
            )
        if function is not None:
            self._validate_function(function)
        sub = Subscription(
            new_id(), subscriber_id, kind, topics, predicates, function, self.clock()
        )
        await asyncio.to_thread(self.store.add_subscription, sub)
        self._index(sub)
        return sub

    def _validate_function(self, spec: FunctionSpec) -> None:
        if self.runner is None:
            raise TidingsError(ErrorCode.UNAVAILABLE, detail="function matching is not enabled")
        self.runner.validate(spec)

    async def subscriptions(self, subscriber_id: str) -> list[Subscription]:
        return await asyncio.to_thread(self.store.list_subscriptions, subscriber_id)

    async def subscription(self, subscriber_id: str, subscription_id: str) -> Subscription:
        sub = await asyncio.to_thread(self.store.get_subscription, subscription_id)
        if sub is None or sub.subscriber_id != subscriber_id:
            raise TidingsError(ErrorCode.SUBSCRIPTION_NOT_FOUND, id=subscription_id)
        return sub

    async def unsubscribe(self, subscriber_id: str, subscription_id: str) -> None:
        await self.subscription(subscriber_id, subscription_id)
        await asyncio.to_thread(self.store.remove_subscription, subscription_id)
        self._unindex(subscription_id)

    async def resume(self, subscriber_id: str, subscription_id: str) -> Subscription:
        await self.subscription(subscriber_id, subscription_id)
        await self._set_status(subscription_id, "active", None)
        return await self.subscription(subscriber_id, subscription_id)

    async def _set_status(
        self, subscription_id: str, status: Literal["active", "suspended"], reason: str | None
    ) -> None:
        await asyncio.to_thread(self.store.set_subscription_status, subscription_id, status, reason)
        sub = await asyncio.to_thread(self.store.get_subscription, subscription_id)
        self._failures.pop(subscription_id, None)
        if sub is not None:
            self._index(sub)

    def _index(self, sub: Subscription, elastic: bool = True) -> None:
        self._unindex(sub.id)
        self._kinds[sub.id] = sub.kind
        if elastic and self.elastic is not None and sub.kind in ("topic", "content"):
            self.elastic.subscribe(sub)
        if sub.kind == "topic":
            self._matcher.add_topic(sub.id, sub.subscriber_id, sub.topics)
        elif sub.kind == "content":
            self._matcher.add_content(sub.id, sub.subscriber_id, sub.predicates)
        elif sub.function is not None and sub.status == "active":
            self._functions.setdefault(sub.function.function_type, {})[sub.id] = sub
        elif sub.function is not None:
            self._suspended[sub.id] = sub

    def _unindex(self, subscription_id: str) -> None:
        self._suspended.pop(subscription_id, None)
        kind = self._kinds.pop(subscription_id, None)
        if kind in ("topic", "content"):
            self._matcher.remove(subscription_id)
            if self.elastic is not None:
                self.elastic.unsubscribe(subscription_id)
        elif kind == "function":
            for subs in self._functions.values():
                subs.pop(subscription_id, None)

    # ---------------------------------------------------------------- publishing

    async def publish(self, item: PublicationInput) -> Published:
        return (await self.publish_batch([item]))[0]

    async def publish_batch(self, items: Sequence[PublicationInput]) -> list[Published]:
        now = self.clock()
        pubs = [
            Publication(
                new_id(),
                now,
                i.data,
                i.topics,
                dict(i.attributes or {}),
                i.function_types,
                i.data_encoding,
            )
            for i in items
        ]
        if self.elastic is not None and self.settings.matching == "elastic":
            return await self._publish_elastic(pubs)
        fanouts = self._match_all(pubs)
        await self._commit(pubs, [f for f in fanouts if f.owners])
        self._spawn_functions(pubs)
        return [Published(p, len(f.owners)) for p, f in zip(pubs, fanouts, strict=True)]

    async def _publish_elastic(self, pubs: list[Publication]) -> list[Published]:
        """The exit points enqueue (and tell `_enqueued`); answered once they have."""
        counts = await self.elastic.publish(pubs)  # type: ignore[union-attr]
        self.metrics.inc("publications_total", len(pubs))
        if self.eventlog is not None:
            self.eventlog.published(pubs)
        self._spawn_functions(pubs)
        return [Published(p, n) for p, n in zip(pubs, counts, strict=True)]

    def _enqueued(self, fanouts: Sequence[Fanout]) -> None:
        """Deliveries enqueued (by `_commit`, or an exit point of this process): count,
        log, wake subscribers."""
        for fanout in fanouts:
            self._count_owners(fanout.owners.values())
        if self.eventlog is not None and fanouts:
            messages = [m for f in fanouts for m in f.messages()]
            self.eventlog.delivery_events(self._enqueued_events(messages))
        self.signals.notify({owner for f in fanouts for owner in f.owners})

    async def publish_per_topic(self, data: JSON, topics: tuple[str, ...]) -> Published:
        """The thesis's topic publishing: one message per (subscriber, matching topic)."""
        pub = Publication(new_id(), self.clock(), data, topics, {}, ())
        fanouts = [] if self.settings.matching == "spark" else self._per_topic(pub)
        await self._commit([pub], fanouts)
        return Published(pub, sum(len(f.owners) for f in fanouts))

    def _per_topic(self, pub: Publication) -> list[Fanout]:
        """A fan-out per matching topic: its own key and body (`matched_topic`)."""
        fanouts = []
        for topic in pub.topics:
            owners = {}
            for owner, sids in self._timed_match(Event((topic,), None)).items():
                topical = [s for s in sids if self._kinds.get(s) == "topic"]
                if topical:
                    owners[owner] = topical
            if owners:
                body = encode_body({**pub.to_wire(), "matched_topic": topic})  # once per topic
                key = f"{pub.id}#{topic}"
                fanouts.append(Fanout(pub.id, key, body, pub.published_at, owners))
        return fanouts

    def _timed_match(self, event: Event) -> dict[str, list[str]]:
        started = time.perf_counter()
        matches = self._matcher.match(event)
        self.metrics.matching.observe(time.perf_counter() - started)
        return matches

    def _match_all(self, pubs: list[Publication]) -> list[Fanout]:
        """Topic and content deliveries of each publication, matched as one batch."""
        if self.settings.matching == "spark" or not len(self._matcher):
            return [self._fanout(p, {}) for p in pubs]
        started = time.perf_counter()
        answers = self._matcher.match_batch([Event(p.topics, p.attributes) for p in pubs])
        each = (time.perf_counter() - started) / len(pubs)
        for _ in pubs:  # the histogram counts publications
            self.metrics.matching.observe(each)
        return [self._fanout(p, m) for p, m in zip(pubs, answers, strict=True)]

    def _fanout(self, pub: Publication, matches: dict[str, list[str]]) -> Fanout:
        """A publication's deliveries: the matcher's answer as it is, the body encoded
        once (no object per delivery: the store makes the rows)."""
        body = encode_body(pub.to_wire()) if matches else b""
        return Fanout(pub.id, pub.id, body, pub.published_at, matches)

    async def _commit(self, pubs: list[Publication], fanouts: list[Fanout]) -> None:
        if fanouts:  # fresh: a new publication's keys were never enqueued before
            await self._committer.submit(Enqueue([], fresh=True, fanouts=fanouts))
        self.metrics.inc("publications_total", len(pubs))
        if self.eventlog is not None:
            self.eventlog.published(pubs)
        self._enqueued(fanouts)

    def _count_owners(self, matched: Iterable[Sequence[str]]) -> None:
        """Deliveries by the kind of their first matching subscription."""
        kinds = collections.Counter(self._kinds.get(ids[0]) for ids in matched)
        for kind, count in kinds.items():
            self.metrics.inc("deliveries_enqueued", count, kind=kind or "function")

    def _enqueued_events(self, messages: list[NewMessage]) -> list[dict[str, Any]]:
        return [
            {
                "publication_id": m.publication_id,
                "subscriber_id": m.subscriber_id,
                "subscription_ids": list(m.subscription_ids),
                "event": "enqueued",
                "kind": self._kinds.get(m.subscription_ids[0]),
                "at": m.enqueued_at,
                "attempt": 0,
            }
            for m in messages
        ]

    # ---------------------------------------------------------------- functions

    def _spawn_functions(self, pubs: list[Publication]) -> None:
        if self.runner is None or self.settings.matching == "spark":
            return
        for pub in pubs:
            subs = [s for t in pub.function_types for s in self._functions.get(t, {}).values()]
            if subs:
                self._spawn(self._run_functions(pub, subs))

    async def _run_functions(self, pub: Publication, subs: list[Subscription]) -> None:
        """Deliver each subscriber's matches as soon as its own calls are done: a slow or
        failing subscriber never holds back another's deliveries."""
        assert self.runner is not None
        by_id = {s.id: s for s in subs}
        async for outcomes in self.runner.stream(pub, subs):
            await self._deliver_functions(pub, by_id, outcomes)

    async def _deliver_functions(
        self, pub: Publication, by_id: dict[str, Subscription], outcomes: list[FunctionOutcome]
    ) -> None:
        matched: dict[str, list[str]] = {}
        suspended = [(o.subscription_id, r) for o in outcomes if (r := self._record(o))]
        for sid, reason in suspended:
            await self._set_status(sid, "suspended", reason)
        for outcome in outcomes:
            sub = by_id[outcome.subscription_id]
            if outcome.matched or (outcome.error and sub.function and sub.function.fail_open):
                matched.setdefault(sub.subscriber_id, []).append(sub.id)
        if not matched:
            return
        body = encode_body(pub.to_wire())
        messages = [
            NewMessage(owner, pub.id, pub.id, tuple(sorted(ids)), body, self.clock())
            for owner, ids in matched.items()
        ]
        # checked, not fresh: topic or content may have delivered this publication already
        added = await self._committer.submit(Enqueue(messages))
        self.metrics.inc("deliveries_enqueued", added, kind="function")
        if self.eventlog is not None:
            self.eventlog.delivery_events(self._enqueued_events(messages))
        self.signals.notify(matched)

    def _record(self, outcome: FunctionOutcome) -> str | None:
        """The failure rule (sandbox/health.py): the suspension reason when it trips. The
        subscription's queued calls are cancelled at once, before anything awaits."""
        assert self.runner is not None
        self.metrics.inc("function_calls_total")
        if outcome.error is not None:
            self.metrics.inc("function_failures_total")
        sid, limit = outcome.subscription_id, self.settings.functions.failures_to_suspend
        reason = count_call(self._failures, sid, outcome.error, limit)
        if reason is not None:
            log.warning("function subscription %s suspended: %s", sid, reason)
            self.metrics.inc("function_suspensions")
            self.runner.cancel(sid)
            for subs in self._functions.values():  # no publication reaches it from now on,
                subs.pop(sid, None)  # not only once its new status is committed
        return reason

    # ---------------------------------------------------------------- receiving

    async def pull(
        self,
        subscriber_id: str,
        max_messages: int,
        wait_s: float,
        visibility_s: float | None = None,
    ) -> list[Message]:
        q = self.settings.queues
        visibility = q.visibility_timeout_s if visibility_s is None else visibility_s
        deadline = time.monotonic() + min(wait_s, q.max_wait_s)
        while True:
            leased = await self._committer.submit(
                Lease(subscriber_id, max_messages, visibility, q.max_attempts, self.clock())
            )
            remaining = deadline - time.monotonic()
            if leased or remaining <= 0:
                self._leased(leased)
                return leased
            # another process may enqueue or a lease may expire: look again at least each second
            await self.signals.wait(subscriber_id, min(remaining, 1.0))

    def _leased(self, leased: list[Message]) -> None:
        if not leased:
            return
        self.metrics.inc("deliveries_leased_total", len(leased))
        self.leases.remember(leased)  # an ack then knows when its publication was enqueued
        now = self.clock()
        for m in leased:
            self.metrics.publish_to_delivery.observe(max(0.0, now - m.enqueued_at))
        if self.eventlog is not None:
            self.eventlog.delivery_events(delivery_event(m, "delivered", now) for m in leased)

    async def ack(self, subscriber_id: str, receipts: Sequence[str]) -> AckResult:
        result = await self._committer.submit(Ack(subscriber_id, receipts))
        self.metrics.inc("deliveries_acked_total", len(result.acked))
        settled = self.leases.settle(result.acked)
        now = self.clock()
        for m in settled:
            self.metrics.publish_to_ack.observe(max(0.0, now - m.enqueued_at))
        if self.eventlog is not None and settled:
            self.eventlog.delivery_events(delivery_event(m, "acked", now) for m in settled)
        return result

    async def nack(
        self, subscriber_id: str, receipts: Sequence[str], delay_s: float = 0.0
    ) -> AckResult:
        result = await self._committer.submit(Nack(subscriber_id, receipts, self.clock(), delay_s))
        self.leases.settle(result.acked)
        self.metrics.inc("deliveries_nacked", len(result.acked))
        self.signals.notify([subscriber_id])
        return result

    async def subscribers_page(
        self, after: str, limit: int
    ) -> list[tuple[SubscriberRecord, QueueDepth]]:
        """For the admin: a page of subscribers, each with its queue's depth."""
        page = await asyncio.to_thread(self.store.subscribers_page, after, limit)
        now = self.clock()
        depths = [await asyncio.to_thread(self.store.depth, r.id, now) for r in page]
        return list(zip(page, depths, strict=True))

    def suspended(self) -> list[Subscription]:
        """The function subscriptions suspended after repeated failures, with their reasons."""
        return sorted(self._suspended.values(), key=lambda s: s.id)

    def subscription_counts(self) -> dict[str, int]:
        """Subscriptions held by this broker, by kind."""
        return dict(collections.Counter(self._kinds.values()))

    async def check_store(self, timeout_s: float) -> None:
        """UNAVAILABLE unless the store answers a read within `timeout_s`."""
        try:
            async with asyncio.timeout(timeout_s):
                await asyncio.to_thread(self.store.subscriptions_version)
        except Exception as exc:  # any failure to answer means: not ready
            log.warning("the store did not answer the readiness check: %r", exc)
            raise TidingsError(
                ErrorCode.UNAVAILABLE, detail=f"the store does not answer: {exc!r}"[:300]
            ) from None

    async def reject(self, subscriber_id: str, message: Message, reason: str) -> None:
        """Dead-letter one leased message that cannot be served (e.g. its answer does not
        encode), alone: the rest of its batch is delivered as usual."""
        moved = await self._committer.submit(
            Reject(subscriber_id, message.receipt, reason, self.clock())
        )
        if moved:
            self.leases.settle([message.receipt])
            self.metrics.inc("deliveries_rejected_total")
            log.warning("dead-lettered message %s of %s: %s", message.id, subscriber_id, reason)

    async def depth(self, subscriber_id: str) -> QueueDepth:
        return await asyncio.to_thread(self.store.depth, subscriber_id, self.clock())

    async def dead_letters(self, subscriber_id: str, limit: int) -> list[DeadLetter]:
        return await asyncio.to_thread(self.store.dead_letters, subscriber_id, limit)

    async def redrive(self, subscriber_id: str, ids: Sequence[int] | None) -> int:
        moved = await asyncio.to_thread(self.store.redrive, subscriber_id, ids, self.clock())
        self.signals.notify([subscriber_id])
        return moved

    async def gauges(self) -> Snapshot:
        """The gauges for a metrics scrape: the subscriptions held here, and the queues."""
        now = self.clock()
        cap = self.metrics.per_subscriber_cap
        totals, oldest = await asyncio.to_thread(self.store.queue_totals, now)
        deepest = await asyncio.to_thread(self.store.deepest_queues, now, cap)
        return Snapshot(
            subscribers=await asyncio.to_thread(self.store.count_subscribers),
            subscriptions=self.subscription_counts(),
            ready=totals.ready,
            leased=totals.leased,
            dead=totals.dead,
            oldest_age_s=0.0 if oldest is None else max(0.0, now - oldest),
            queues=[
                QueueGauge(q.subscriber_id, q.ready, q.leased, max(0.0, now - q.oldest_enqueued_at))
                for q in deepest
            ],
        )
