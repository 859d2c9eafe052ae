"""The Store interface: subscribers, subscriptions, and each subscriber's durable queue.

Implementations: `memory` (tests, simulation), `sqlite` (embedded default, WAL),
`postgres` (several broker processes). One behaviour suite runs against all of them.

Methods are synchronous and thread-safe; the asyncio broker calls them from worker
threads. Times are epoch seconds passed in by the caller, so tests control the clock.

Queue operations are values (`Enqueue`, `Lease`, `Ack`, `Nack`, `Reject`): `Store.apply`
interprets a sequence of them in one transaction, which is how the broker's one committer
(`tidings.delivery.committer`) turns many callers' work into one commit. `enqueue`, `lease`
and the rest are the same operations applied one at a time.

Storage (docs/storage.md): a publication's body is stored once, as the bytes it was encoded
to at publishing; a delivery is a small row that refers to it, and a body goes when no
delivery or dead letter refers to it any more.

Queue semantics (peek-lock, as SQS or Service Bus):
- `enqueue` commits all given messages in one transaction, idempotent by
  (subscriber_id, dedup_key): a repeat is ignored, not an error.
- `lease` hands out up to `max` ready messages in FIFO order (by sequence), hiding each
  for `visibility_s` and returning a fresh receipt; `attempt` counts leases.
  Before leasing, a message whose lease expired after its `max_attempts`-th attempt
  moves to the dead-letter list (reason `max_attempts`).
- `ack` deletes by receipt; a receipt from an older lease of the same message is stale
  and acknowledges nothing.
- `nack` makes a leased message ready again after `delay_s`.
- `expire` moves messages older than the retention to the dead-letter list (reason `retention`).
- A message that cannot be served (its stored text does not decode, or its answer does not
  encode) is dead-lettered alone with its reason (`lease` does it for the first; `reject` for
  the second); the others of the batch are leased as usual.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, NamedTuple, Protocol

import orjson

from tidings.model import JSON, Subscriber, Subscription


class Busy(Exception):
    """A transaction asked not to wait would have (`Store.apply_now`): nothing ran."""


def encode_body(value: JSON) -> bytes:
    """A body as the store keeps it and subscribers receive it: JSON, encoded once."""
    return orjson.dumps(value)


def subscription_bytes(subscription: Subscription) -> int:
    """The bytes of a subscription's body as the store keeps it (its JSON): what the
    subscription byte budgets count (`limits.max_subscription_bytes*`): as a store read it,
    else encoded here (2-3 us: 25 ms of a function's cold start at 10^4)."""
    return subscription.stored_bytes or len(orjson.dumps(subscription.to_json()))


class NewMessage(NamedTuple):
    """A delivery to put into a subscriber's queue. Deliveries of one publication share
    one `body` object (the same bytes), and the store keeps it once. (A named tuple: a
    fan-out makes one per subscriber, and a tuple costs a fraction of a frozen dataclass.)"""

    subscriber_id: str
    publication_id: str
    dedup_key: str  # the publication id natively; `<publication id>#<topic>` for compat topics
    subscription_ids: tuple[str, ...]
    body: bytes  # what the subscriber receives: encoded JSON (`encode_body`)
    enqueued_at: float


class Message(NamedTuple):
    """A leased message, as handed to a subscriber. `raw` is the body's stored JSON, checked
    to decode when leased: frames embed it as it is, never decoded and encoded again."""

    id: int
    subscriber_id: str
    publication_id: str
    subscription_ids: tuple[str, ...]
    raw: bytes
    enqueued_at: float
    attempt: int
    receipt: str
    lease_until: float

    @property
    def body(self) -> JSON:
        """The body as a Python value (decoded on each use: the hot path does not)."""
        value: JSON = orjson.loads(self.raw)
        return value


@dataclass(frozen=True, slots=True)
class DeadLetter:
    id: int
    subscriber_id: str
    publication_id: str
    subscription_ids: tuple[str, ...]
    body: JSON
    enqueued_at: float
    attempt: int
    reason: Literal["max_attempts", "retention"] | str
    dead_at: float


@dataclass(frozen=True, slots=True)
class QueuedMessage:
    """A message waiting in a queue (not leased), as browsing sees it: `ready_at` is when it
    became, or becomes, ready (later than now after a nack's delay or a webhook's backoff)."""

    id: int
    subscriber_id: str
    publication_id: str
    subscription_ids: tuple[str, ...]
    body: JSON
    enqueued_at: float
    attempt: int
    ready_at: float


class QueuedPage(list["QueuedMessage"]):
    """A page of waiting messages; `more`: whether messages past it wait (the page may end
    early, at its bytes' bound, as well as at its count)."""

    more: bool = False


@dataclass(frozen=True, slots=True)
class Fanout:
    """A new publication's deliveries without an object per delivery: `owners` maps each
    subscriber to its matching subscription ids (the matcher's answer, as it is). Its keys
    are new, as `Enqueue(fresh=True)` promises."""

    publication_id: str
    dedup_key: str
    body: bytes
    enqueued_at: float
    owners: Mapping[str, Sequence[str]]

    def messages(self) -> list[NewMessage]:
        """The same as one `NewMessage` per subscriber (for what needs them one by one)."""
        return [
            NewMessage(owner, self.publication_id, self.dedup_key, tuple(ids), self.body,
                       self.enqueued_at)
            for owner, ids in self.owners.items()
        ]  # fmt: skip


# ---------------------------------------------------------------- queue operations as values


@dataclass(frozen=True, slots=True)
class Enqueue:
    """Put messages into their queues; answers how many were new. `fresh` promises no key
    was enqueued before (a new publication), allowing bulk inserts without checks.
    `fanouts` are new publications' deliveries, always fresh, a row each in the store but no
    Python object each on the way."""

    messages: Sequence[NewMessage]
    fresh: bool = False
    fanouts: Sequence[Fanout] = ()

    def size(self) -> int:
        return len(self.messages) + sum(len(f.owners) for f in self.fanouts)


@dataclass(frozen=True, slots=True)
class Lease:
    """Hand out up to `max_messages` ready messages (answers `list[Message]`)."""

    subscriber_id: str
    max_messages: int
    visibility_s: float
    max_attempts: int
    now: float
    # the leased bodies' bytes, at most: the rows past it stay ready (the first always goes)
    max_bytes: int | None = None


@dataclass(frozen=True, slots=True)
class Ack:
    """Delete leased messages by their current receipts (answers `AckResult`)."""

    subscriber_id: str
    receipts: Sequence[str]


@dataclass(frozen=True, slots=True)
class Nack:
    """Make leased messages ready again after `delay_s` (answers `AckResult`)."""

    subscriber_id: str
    receipts: Sequence[str]
    now: float
    delay_s: float = 0.0


@dataclass(frozen=True, slots=True)
class Reject:
    """Dead-letter one leased message by its current receipt (answers `bool`)."""

    subscriber_id: str
    receipt: str
    reason: str
    now: float


# A dedup id is its publisher's: (publisher scope, dedup_id). The scope is derived from the
# publisher's key (`tidings.broker.dedup.publisher_scope`), "" for publishers without one, so
# nobody can claim, and so suppress, an id of a publisher whose key they do not hold.
DedupKey = tuple[str, str]


@dataclass(frozen=True, slots=True)
class DedupClaim:
    """A publication claiming its publisher's `dedup_id` until `expires_at`."""

    publisher: str  # the publisher's scope: "" for every publisher without a key
    dedup_id: str
    publication_id: str
    published_at: float
    deliveries: int
    expires_at: float

    @property
    def key(self) -> DedupKey:
        return (self.publisher, self.dedup_id)


@dataclass(frozen=True, slots=True)
class PublishOnce:
    """Claim the dedup ids, then enqueue the fan-outs of the publications whose claim is
    new, in one step of one transaction. Answers the duplicates: for each claim refused,
    its key (publisher, dedup id) -> the claim that holds it (the first publication's)."""

    claims: Sequence[DedupClaim]
    now: float
    fanouts: Sequence[Fanout] = ()


@dataclass(frozen=True, slots=True)
class Hasten:
    """Make the subscriber's messages that wait out a backoff (handed back with a delay, not
    leased) ready at `now` (answers how many): a webhook endpoint that answers again."""

    subscriber_id: str
    now: float


@dataclass(frozen=True, slots=True)
class PendingEvaluation:
    """The function evaluations a publication owes (`tidings.broker.functions`): committed
    with the publication, claimed by one broker at a time until `claimed_until` (as a lease),
    removed once every evaluation is done. `publication` is its `Publication.to_json`,
    encoded."""

    publication_id: str
    publication: bytes
    subscription_ids: tuple[str, ...]
    claimed_by: str
    claimed_until: float


@dataclass(frozen=True, slots=True)
class Owe:
    """Record pending evaluations (answers how many were new; a repeat is ignored)."""

    evaluations: Sequence[PendingEvaluation]


@dataclass(frozen=True, slots=True)
class Discharge:
    """Remove the pending evaluations of these publications (answers how many went)."""

    publication_ids: Sequence[str]


QueueOp = Enqueue | Lease | Ack | Nack | Reject | PublishOnce | Hasten | Owe | Discharge
# for isinstance (a tuple: `Enqueue | PublishOnce` builds a union object at each call)
ENQUEUES = (Enqueue, PublishOnce)  # what appends deliveries
SETTLES = (Ack, Nack)


@dataclass(frozen=True, slots=True)
class QueueDepth:
    ready: int = 0
    leased: int = 0
    dead: int = 0


Origin = Literal["all", "real", "simulated"]  # which subscribers: every one, or by who made it


@dataclass(frozen=True, slots=True)
class SubscriberRecord:
    """A subscriber as the admin sees it: no token, and when it was last seen."""

    id: str
    created_at: float
    last_seen: float  # its last pull, acknowledgement, subscription or open stream
    ephemeral: bool
    simulation: str | None = None  # the simulation that made it, None for a real one


@dataclass(frozen=True, slots=True)
class QueueStats:
    """One subscriber's queue, for the metrics: counts and its oldest message."""

    subscriber_id: str
    ready: int
    leased: int
    oldest_enqueued_at: float


@dataclass(frozen=True, slots=True)
class AckResult:
    acked: list[str] = field(default_factory=list)
    unknown: list[str] = field(default_factory=list)  # never issued, stale, or already acked


@dataclass(frozen=True, slots=True)
class SubscriptionChanges:
    """What changed in the subscriptions after a version: the version now, and each changed
    subscription as it is now, or its id alone when it is gone."""

    version: int
    changed: list[Subscription | str]


@dataclass(frozen=True, slots=True)
class Change:
    """What another broker on the same store changed, told to `watch`'s callback.

    `subscriber_removed`: that subscriber (and its subscriptions) is gone; `resync`:
    notifications may have been missed (the feed reconnected), so every cache derived from
    the store is stale; `queued`: deliveries were taken into these subscribers' queues by
    this broker from what others published (`partitions.py`), so their streams may lease.
    Other subscription changes are read through `subscriptions_version`."""

    kind: Literal["subscriber_removed", "resync", "queued"]
    subscriber_id: str = ""
    subscriber_ids: tuple[str, ...] = ()


# ---- push endpoints (webhooks, tidings.delivery.webhooks): at most one per subscriber,
# deleted with it
EndpointState = Literal["active", "paused"]


@dataclass(frozen=True, slots=True)
class Endpoint:
    """A subscriber's webhook: where its messages are POSTed, the secret that signs them,
    and whether delivery runs (`paused` after repeated failures, with the reason)."""

    subscriber_id: str
    url: str
    secret: str
    state: EndpointState = "active"
    reason: str | None = None
    failures: int = 0  # consecutive failed requests
    updated_at: float = 0.0
    # how long a message is retried from its enqueueing before it is dead-lettered
    # (reason `retention`); None: the queues' retention
    retention_s: float | None = None


class EndpointStore(Protocol):
    def set_endpoint(self, subscriber_id: str, endpoint: Endpoint | None) -> bool:
        """Store (replace) the subscriber's endpoint, or delete it with None. False when
        the subscriber does not exist (storing) or had no endpoint (deleting)."""
        ...

    def get_endpoint(self, subscriber_id: str) -> Endpoint | None: ...
    def endpoints(self) -> list[Endpoint]:
        """Every endpoint, active or paused, in subscriber id order."""
        ...

    def set_endpoint_state(
        self,
        subscriber_id: str,
        state: EndpointState,
        reason: str | None,
        failures: int,
        now: float,
    ) -> bool:
        """Record delivery's state (the URL and secret stay); False without an endpoint."""
        ...


# ---- end of push endpoints


class Store(EndpointStore, Protocol):
    # ---- subscribers
    def add_subscriber(
        self, subscriber: Subscriber, ephemeral: bool = False, simulation: str | None = None
    ) -> None:
        """Store it, seen now; an `ephemeral` one is deleted when its streams are gone; one
        a simulator made is marked with the `simulation`'s name."""
        ...

    def get_subscriber(self, subscriber_id: str) -> Subscriber | None: ...
    def token_owner(self, token_hash: str) -> str | None:
        """The id of the subscriber whose token hashes to `token_hash`, or None."""
        ...

    def remove_subscriber(self, subscriber_id: str) -> bool:
        """Delete the subscriber, its subscriptions, queue and dead letters; False if absent."""
        ...

    def count_subscribers(self) -> int: ...
    def touch(self, seen: Mapping[str, float]) -> None:
        """Record when these subscribers were last seen (a later time wins)."""
        ...

    def subscribers_page(
        self, after: str, limit: int, origin: Origin = "all"
    ) -> list[SubscriberRecord]:
        """Up to `limit` subscribers with ids after `after`, in id order; only the real ones
        or only those a simulator made, by `origin`."""
        ...

    def idle_subscribers(self, idle_before: float, ephemeral_before: float) -> list[str]:
        """Subscribers last seen before `idle_before`, and ephemeral ones last seen before
        `ephemeral_before`."""
        ...

    # ---- subscriptions
    def add_subscription(self, subscription: Subscription) -> None: ...
    def get_subscription(self, subscription_id: str) -> Subscription | None: ...
    def list_subscriptions(self, subscriber_id: str) -> list[Subscription]: ...
    def subscriptions_page(self, subscriber_id: str, after: str, limit: int) -> list[Subscription]:
        """The subscriber's subscriptions in id order: at most `limit` whose id is past
        `after` ("" for the first page)."""
        ...

    def count_subscriptions(self, subscriber_id: str) -> int: ...
    def subscription_usage(self, subscriber_id: str) -> tuple[int, int]:
        """The subscriber's subscriptions: how many, and their stored bodies' bytes in all
        (`subscription_bytes` each)."""
        ...

    def remove_subscription(self, subscription_id: str) -> bool: ...
    def set_subscription_status(
        self, subscription_id: str, status: Literal["active", "suspended"], reason: str | None
    ) -> bool: ...

    def all_subscriptions(self) -> Iterable[Subscription]:
        """Every subscription, for building the matcher at start-up."""
        ...

    def snapshot(self) -> tuple[int, list[Subscription]]:
        """Every subscription and their version (`subscriptions_version`), read together."""
        ...

    def iter_subscriptions(self, page: int = 10_000) -> Iterator[Subscription]:
        """Every subscription, streamed `page` rows at a time, so that a reader (the
        pipeline's snapshot) never holds them all; not one transaction."""
        ...

    def subscriptions_version(self) -> int:
        """A counter bumped by every subscription change (add, remove, status), so a reader
        can take a consistent, versioned snapshot."""
        ...

    def subscription_changes(self, since: int) -> SubscriptionChanges | None:
        """The subscriptions changed after version `since`, as they are now; None when the
        change log no longer reaches back that far (then read a snapshot)."""
        ...

    def prune_subscription_changes(self, keep: int) -> int:
        """Keep the change log's last `keep` versions; how many rows went."""
        ...

    # ---- queues
    def apply(self, ops: Sequence[QueueOp]) -> list[Any]:
        """Run the operations in order in one transaction; each answer is the operation's
        value, or the exception it raised (its writes undone; the others still commit)."""
        ...

    def enqueue(self, messages: Sequence[NewMessage], fresh: bool = False) -> int:
        """Commit all messages in one transaction; returns how many were new. `fresh`
        promises that no key was enqueued before (a new publication), allowing bulk inserts."""
        ...

    def lease(
        self,
        subscriber_id: str,
        max_messages: int,
        visibility_s: float,
        max_attempts: int,
        now: float,
    ) -> list[Message]: ...

    def apply_now(self, ops: Sequence[QueueOp]) -> list[Any] | None:
        """`apply`, on the caller's thread, if it runs without waiting; None when it would
        wait (for another thread in the store, another process's write, a server's answer)
        or has another process's rows to take in first, and then nothing ran. What an event
        loop calls for a small batch before handing it to a worker thread (`Committer`)."""
        ...

    def may_lease(self, subscriber_id: str, now: float) -> bool:
        """False only when a lease at `now` would surely find nothing, told from memory
        without a statement (queues held as a log); True when it may find something, or
        when that cannot be told at once. A long-lived reader looks here before asking for
        a lease that would come back empty (`SubscriberQueues.pull`'s `quick`)."""
        ...

    def ack(self, subscriber_id: str, receipts: Sequence[str]) -> AckResult: ...
    def nack(
        self, subscriber_id: str, receipts: Sequence[str], now: float, delay_s: float = 0.0
    ) -> AckResult: ...

    def reject(self, subscriber_id: str, receipt: str, reason: str, now: float) -> bool:
        """Dead-letter one leased message by its current receipt, with `reason`."""
        ...

    def depth(self, subscriber_id: str, now: float) -> QueueDepth: ...
    def queue_totals(self, now: float) -> tuple[QueueDepth, float | None]:
        """Every queue together, and the oldest message's enqueueing time (None if empty)."""
        ...

    def deepest_queues(self, now: float, limit: int) -> list[QueueStats]:
        """The `limit` subscribers with the most queued messages, deepest first."""
        ...

    def dead_letters(self, subscriber_id: str, limit: int = 100) -> list[DeadLetter]: ...
    def redrive(self, subscriber_id: str, ids: Sequence[int] | None, now: float) -> int:
        """Move dead letters (all, or the given ids) back to the queue with attempt 0."""
        ...

    def browse(self, subscriber_id: str, after: int, limit: int, now: float) -> QueuedPage:
        """Up to `limit` of the queue's waiting messages (not leased at `now`) with ids past
        `after`, in FIFO order, their bodies a few MiB at most (the first always); nothing
        is leased and no attempt counted."""
        ...

    def purge(self, subscriber_id: str, now: float) -> int:
        """Delete the queue's waiting messages (not the ones leased at `now`, whose holders
        may still acknowledge them); how many went."""
        ...

    def expire(self, now: float, retention_s: float) -> int: ...
    def queue_size(self, subscriber_id: str) -> tuple[int, int]:
        """A queue's messages and their bodies' bytes (dead letters apart)."""
        ...

    def trim_queue(self, subscriber_id: str, max_messages: int, max_bytes: int, now: float) -> int:
        """Dead-letter the oldest messages (reason `overflow`) past these bounds; how many."""
        ...

    def sweep_bodies(self) -> int:
        """Delete the bodies nothing refers to any more, where concurrent writers can leave
        one behind (docs/storage.md); how many went."""
        ...

    # ---- pending function evaluations (store/pending.py); recorded and removed by the
    # queue operations `Owe` and `Discharge`
    def claim_pending(
        self, claimant: str, now: float, until: float, limit: int
    ) -> list[PendingEvaluation]:
        """Claim up to `limit` pending evaluations whose claim ran out by `now` (oldest claim
        first) for `claimant` until `until`; none that another transaction is claiming."""
        ...

    def renew_pending(self, claimant: str, publication_ids: Sequence[str], until: float) -> int:
        """Extend `claimant`'s claims on these until `until`; how many it still held."""
        ...

    def publication_progress(self, publication_id: str) -> tuple[bool, int]:
        """Whether function evaluations of the publication are still owed, and how many
        deliveries of it were enqueued so far (every kind; within the queues' retention)."""
        ...

    # ---- several brokers on one store
    def watch(self, on_change: Callable[[Change], None]) -> Callable[[], None]:
        """Call `on_change` (from another thread) for every change committed by any broker
        on this store, promptly; returns a function that stops watching. A store no other
        process can share answers with a no-op."""
        ...

    def close(self) -> None: ...

    # ---- publishers' dedup ids (PublishOnce claims them)
    def prune_dedup_ids(self, now: float) -> int:
        """Forget the dedup ids whose window ended before `now`; how many went."""
        ...
