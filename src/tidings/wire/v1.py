"""The native API's shapes (/v1, docs/api.md): request bodies, queries and answers. Limits
that are settings (`max`, `wait`) are query types built from the settings."""

from __future__ import annotations

from functools import cache
from typing import Annotated, Any, Literal, cast

import msgspec
from msgspec import UNSET, Meta, Struct, UnsetType, field

from tidings.addresses import MAX_URL
from tidings.config import QueueSettings
from tidings.model import ID_MAX
from tidings.wire.base import (
    ONE_OF,
    Body,
    Data,
    DeadLetterId,
    ErrorDetail,
    Name,
    OpName,
    Params,
    Receipts,
    Scalar,
    Seconds,
    Text,
    Topics,
)

# ---------------------------------------------------------------- requests


class RegisterBody(Body):
    """Optional: an ephemeral subscriber is deleted once it has had no stream and made no call
    for a while (docs/api.md). An unknown field is refused, as in every body."""

    ephemeral: bool = False


class Predicate(Body):
    key: Name
    op: OpName
    value: Scalar | list[Scalar] | UnsetType = UNSET


class FunctionBody(Body):
    function_type: Name
    code: Text | UnsetType = UNSET
    url: Annotated[str, Meta(pattern=r"^https?://[^\s/]+")] | UnsetType = UNSET
    builtin: Text | UnsetType = UNSET
    params: Params = field(default_factory=dict)
    fail_open: bool = False


Function = Annotated[
    FunctionBody,
    Meta(extra_json_schema={"oneOf": [{"required": [k]} for k in ("code", "url", "builtin")]}),
]


class SubscriptionBody(Body):
    """Exactly one of topics, predicates, function."""

    topics: Topics | UnsetType = UNSET
    predicates: Annotated[list[Predicate], Meta(min_length=1)] | UnsetType = UNSET
    function: Function | UnsetType = UNSET


Subscribe = Annotated[SubscriptionBody, Meta(extra_json_schema=ONE_OF)]


DedupId = Annotated[
    str,
    Meta(
        min_length=1,
        max_length=128,
        description="the publisher's name for this publication: a repeat within the "
        "dedup window is answered as the first, `duplicate: true`, and delivers nothing",
    ),
]
MaxBytes = Annotated[
    int,
    Meta(ge=1024, description="the bytes this client reads of one answer or frame, at most"),
]


class PublicationBody(Body):
    data: Data = None
    topics: list[str] = field(default_factory=list)
    attributes: dict[str, Scalar] = field(default_factory=dict)
    function_types: list[str] = field(default_factory=list)
    dedup_id: DedupId | None = None


class BatchBody(Body):
    publications: Annotated[list[PublicationBody], Meta(min_length=1)]


class NackBody(Body):
    receipts: Receipts
    delay: Seconds = 0.0


class RedriveBody(Body):
    """Without ids, every dead letter."""

    ids: list[DeadLetterId] | None = None


EndpointURL = Annotated[
    str,
    Meta(
        min_length=8,
        max_length=MAX_URL,
        pattern=r"^[hH][tT][tT][pP][sS]?://[\x21-\x7E]+$",
        description="http:// or https://, printable ASCII (percent-encode the rest), a host, "
        "no credentials",
    ),
]


class WebhookBody(Body):
    """Where the broker POSTs the subscriber's messages (docs/api.md, Webhooks), and for how
    long a message is retried from its enqueueing (default and at most: the queues'
    retention) before it is a dead letter."""

    url: EndpointURL
    retention_s: (
        Annotated[float, Meta(gt=0, description="seconds a message is retried; default: the "
                              "queues' retention, which is also the most")]
        | None
    ) = None  # fmt: skip


class StreamFrame(Body):
    """What a subscriber sends on its WebSocket stream."""

    type: Literal["ack", "nack"]
    receipts: Receipts


class ErrorFrame(Struct, tag_field="type", tag="error"):
    """What the broker sends on a stream for a refused frame, or before it closes the
    stream: `{"type": "error", "error": {...}}`."""

    error: ErrorDetail


# ---------------------------------------------------------------- queries


FORM = Annotated[
    Literal["full", "compact"],
    Meta(description="full, or compact: no repeated ids, no enqueueing time, attempt if not 1"),
]


ENCODING = Annotated[
    Literal["json", "msgpack"],
    Meta(description="json, or msgpack (application/msgpack; binary data as bin)"),
]


class PullQuery(Struct):
    max: int = 10
    wait: float = 0.0
    visibility: float = 30.0
    form: FORM = "full"
    encoding: ENCODING = "json"
    max_bytes: MaxBytes | None = None


class DeadLettersQuery(Struct):
    limit: Annotated[int, Meta(ge=1, le=1000, description="at most this many")] = 100


class BrowseQuery(Struct):
    limit: Annotated[int, Meta(ge=1, le=1000, description="at most this many")] = 100
    after: Annotated[
        int,
        Meta(
            ge=0,
            le=ID_MAX,
            description="the previous page's `next`: the last id it held; none at first",
        ),
    ] = 0


def browse_query(q: QueueSettings) -> type[BrowseQuery]:
    return BrowseQuery


class SubscriptionsQuery(Struct):
    limit: Annotated[int, Meta(ge=1, le=1000, description="at most this many")] = 100
    after: Annotated[
        str, Meta(description="the previous page's `next`: the last id it held; none at first")
    ] = ""


def subscriptions_query(q: QueueSettings) -> type[SubscriptionsQuery]:
    return SubscriptionsQuery


def pull_fields(q: QueueSettings) -> list[tuple[str, Any, Any]]:
    """`max` and `wait`, bounded by the queue settings (the thesis's pull has them too)."""
    return [
        ("max", Annotated[int, Meta(ge=1, le=q.max_pull, description="at most this many")], 10),
        (
            "wait",
            Annotated[float, Meta(ge=0, le=q.max_wait_s, description="seconds to wait")],
            0.0,
        ),
    ]


@cache
def pull_query(q: QueueSettings) -> type[PullQuery]:
    """The pull's query, bounded by the queue settings."""
    visibility = Annotated[float, Meta(ge=0, le=43200, description="seconds leased")]
    fields = [
        *pull_fields(q),
        ("visibility", visibility, q.visibility_timeout_s),
        ("form", FORM, "full"),
        ("encoding", ENCODING, "json"),
        ("max_bytes", MaxBytes | None, None),
    ]
    return cast(type[PullQuery], msgspec.defstruct("PullQuery", fields, bases=(PullQuery,)))


def dead_letters_query(q: QueueSettings) -> type[DeadLettersQuery]:
    return DeadLettersQuery


class BatchQuery(Struct):
    answer: Annotated[
        Literal["ids", "count"],
        Meta(description="ids (each publication's id), or count (two numbers: a smaller answer)"),
    ] = "ids"


def batch_query(q: QueueSettings) -> type[BatchQuery]:
    return BatchQuery


class ProgressQuery(Struct):
    token: Annotated[
        str,
        Meta(
            max_length=64,
            description="the publish answer's progress_token (or none, with the admin token)",
        ),
    ] = ""


def progress_query(q: QueueSettings) -> type[ProgressQuery]:
    return ProgressQuery


# ---------------------------------------------------------------- answers


class Registered(Struct):
    id: str
    token: str
    queue_url: str


class Depth(Struct):
    ready: int
    leased: int
    dead: int


class WebhookState(Struct):
    url: str
    state: Literal["active", "paused"]
    reason: str | None


class SubscriberInfo(Struct):
    id: str
    created_at: float
    queue_url: str
    depth: Depth
    webhook: WebhookState | None = None


class Webhook(Struct):
    """A subscriber's webhook. `secret` signs every request (`Tidings-Signature`);
    `failures` counts consecutive failed requests, `reason` says the last one's (and, when
    paused, why: a paused endpoint is probed and resumes by itself once it answers)."""

    url: str
    state: Literal["active", "paused"]
    reason: str | None
    failures: int
    updated_at: float
    secret: str
    retention_s: float  # how long a message is retried from its enqueueing


class PredicateOut(Struct):
    key: str
    op: str
    value: Scalar | list[Scalar]


class FunctionOut(Struct):
    function_type: str
    params: dict[str, Any]
    fail_open: bool
    code: str | UnsetType = UNSET
    url: str | UnsetType = UNSET
    builtin: str | UnsetType = UNSET


class SubscriptionOut(Struct):
    id: str
    subscriber_id: str
    kind: Literal["topic", "content", "function"]
    created_at: float
    status: Literal["active", "suspended"]
    status_reason: str | None
    topics: list[str] | UnsetType = UNSET
    predicates: list[PredicateOut] | UnsetType = UNSET
    function: FunctionOut | UnsetType = UNSET


class Subscriptions(Struct):
    """A page of the subscriber's subscriptions in id order. `next`: the id to ask `after`
    for the next page; null on the last page (absent from brokers before paging, which
    answered every subscription at once)."""

    subscriptions: list[SubscriptionOut]
    next: str | None = None


class Published(Struct, omit_defaults=True):
    """`duplicate`: this publication's `dedup_id` was already taken within the window; the
    answer is the first publication's (its id, time and deliveries), and nothing more is
    delivered. `evaluations`: the function subscriptions that evaluate it after this answer
    (their matches are not in `deliveries`; `GET /v1/publications/{id}` follows them); left
    out when none. `progress_token`: what that route needs to read this publication's
    progress, given to its publisher alone (its subscribers learn the id, not the token)."""

    id: str
    published_at: float
    deliveries: int
    duplicate: bool = False
    evaluations: int = 0
    progress_token: str = ""


class Progress(Struct):
    """A publication's progress: `evaluating` while function subscriptions still owe it an
    evaluation; `deliveries` so far, of every kind (as long as the queues remember them,
    their retention). The broker keeps no record of publications as such: an unknown id
    answers false and 0, as does a known one asked without its progress token."""

    id: str
    evaluating: bool
    deliveries: int


class Limits(Struct):
    """What this broker takes and sends: a client reads answers and stream frames of up to
    `max_answer_bytes` (the largest one message can make, or a batch). A subscription made
    through one broker (or function instance) sharing the store matches publications made
    through the others within `staleness_s` (0: at once; a single broker)."""

    max_publication_bytes: int
    max_answer_bytes: int
    max_batch_bytes: int
    dedup_window_s: float
    staleness_s: float = 0.0


class BatchCounts(Struct, omit_defaults=True):
    """A batch's answer: every publication (the default), or with `?answer=count` how many
    were published and delivered, without their ids (a 1,000-publication answer in ~40
    bytes instead of ~124 KB, progress tokens included)."""

    publications: list[Published] | UnsetType = UNSET
    published: int | UnsetType = UNSET
    deliveries: int | UnsetType = UNSET


BatchAnswer = Annotated[
    BatchCounts,
    Meta(
        extra_json_schema={
            "oneOf": [{"required": ["publications"]}, {"required": ["published", "deliveries"]}]
        }
    ),
]


class MessageOut(Struct):
    """A delivered message; the compact form (`form=compact`) leaves out `id`,
    `publication_id` and `enqueued_at`, and `attempt` when it is 1. The broker encodes pull
    answers, stream frames and webhook requests from it (tidings.delivery.frames), the body
    as stored (`msgspec.Raw`)."""

    receipt: str
    subscription_ids: list[str]
    body: Any
    attempt: int | UnsetType = 1
    id: int | UnsetType = UNSET
    publication_id: str | UnsetType = UNSET
    enqueued_at: float | UnsetType = UNSET


class Messages(Struct):
    messages: list[MessageOut]


class MessagesFrame(Struct, tag_field="type", tag="messages"):
    """What the broker sends on a stream: `{"type": "messages", "messages": [...]}`."""

    messages: list[MessageOut]


class DeadLetterOut(Struct):
    id: int
    publication_id: str
    attempt: int
    subscription_ids: list[str]
    enqueued_at: float
    reason: str
    dead_at: float
    body: Any


class DeadLetters(Struct):
    dead_letters: list[DeadLetterOut]


class Redriven(Struct):
    redriven: int


class QueuedOut(Struct):
    """A message waiting in the queue, seen without leasing it: `attempt` counts its leases
    so far, `age_s` is the seconds since it was enqueued, `ready_at` when it became (or, after
    a nack's delay or a webhook's backoff, becomes) ready."""

    id: int
    publication_id: str
    subscription_ids: list[str]
    attempt: int
    enqueued_at: float
    age_s: float
    ready_at: float
    body: Any


class Queued(Struct):
    """A page of the waiting messages in FIFO order. `next`: the id to ask `after` for the
    next page; null on the last page."""

    messages: list[QueuedOut]
    next: int | None = None


class Purged(Struct):
    purged: int


class Builtin(Struct):
    """A builtin function: its module (`text` or `vision`), whether this broker has its
    libraries (`extra`: the install extra that brings them, when not) and the JSON Schema of
    its `params`."""

    name: str
    module: str
    available: bool
    extra: str | None
    params: dict[str, Any]


class Builtins(Struct):
    builtins: list[Builtin]
