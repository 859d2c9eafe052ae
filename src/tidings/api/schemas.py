"""The types of every request and answer: the handlers validate requests with them
(`tidings.model.convert`), and the OpenAPI document is generated from them, so the two
cannot drift. Limits that are settings (`max`, `wait`) are types built from the settings.

Field names are the wire names; `field` in an error names the path into these types.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from typing import Annotated, Any, Literal, TypeAlias, TypeVar

import msgspec
from msgspec import UNSET, Meta, Struct, UnsetType, field

from tidings.config import QueueSettings
from tidings.model import ID_MAX, OP_ALIASES, RECEIPT_PATTERN, Op

F = TypeVar("F", bound=Callable[..., Any])

Scalar: TypeAlias = str | int | float | bool
Text = Annotated[str, Meta(min_length=1)]
Name = Annotated[str, Meta(min_length=1, max_length=255)]
Topics = Annotated[list[str], Meta(min_length=1)]
OpName = Annotated[
    str,
    Meta(
        description="an operator, or one of its spellings (== eq lt le gt ge ...)",
        extra_json_schema={"enum": [op.value for op in Op] + sorted(OP_ALIASES)},
    ),
]
Receipt = Annotated[
    str, Meta(pattern=RECEIPT_PATTERN, description="a receipt from a pull: seq.attempt.nonce")
]
Receipts = Annotated[list[Receipt], Meta(description="receipts of leased messages")]
DeadLetterId = Annotated[int, Meta(ge=0, le=ID_MAX)]
Seconds = Annotated[float, Meta(ge=0, le=43200)]
Data = Annotated[Any, Meta(description="any JSON value, nested at most max_json_depth levels")]
Params = Annotated[dict[str, Any], Meta(description="the function's parameters")]
ONE_OF = {"minProperties": 1, "maxProperties": 1}


class Body(Struct, forbid_unknown_fields=True):
    """A request body: an unknown field is a client's mistake, not silently dropped."""


# ---------------------------------------------------------------- /v1 requests


class RegisterBody(Struct):
    """Optional: an ephemeral subscriber is deleted once it has had no stream and made no call
    for a while (docs/api.md). Other fields are ignored (the thesis's clients send some)."""

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


class PublicationBody(Body):
    data: Data = None
    topics: list[str] = field(default_factory=list)
    attributes: dict[str, Scalar] = field(default_factory=dict)
    function_types: list[str] = field(default_factory=list)


class BatchBody(Body):
    publications: Annotated[list[PublicationBody], Meta(min_length=1)]


class AckBody(Body):
    receipts: Receipts


class NackBody(Body):
    receipts: Receipts
    delay: Seconds = 0.0


class RedriveBody(Body):
    """Without ids, every dead letter."""

    ids: list[DeadLetterId] | None = None


MAX_URL = 2048
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
    """Where the broker POSTs the subscriber's messages (docs/api.md, Webhooks)."""

    url: EndpointURL


# ---------------------------------------------------------------- /api requests (the thesis's)


class UnregisterBody(Body):
    subscriberId: str  # the thesis's wire names
    queueUrl: str | UnsetType = UNSET


class SubscribeTopicsBody(Body):
    subscriberId: str
    topics: Topics


class ContentCondition(Body):
    key: Name
    value: Scalar | Annotated[list[Scalar], Meta(min_length=1)]
    condition: OpName = "="


class SubscribeContentBody(Body):
    subscriberId: str
    content: Annotated[list[ContentCondition], Meta(min_length=1)]


class SubscribeFunctionBody(Body):
    subscriberId: str
    functionType: Literal["url", "code", "builtin"]
    subscriptionTopic: Name
    matchingFunction: Text
    parameters: Params | None = None


class PublishTopicsBody(Body):
    message: Data
    topics: Topics


class ContentValue(Body):
    key: Name
    value: Scalar


class PublishContentBody(Body):
    message: Data
    content: list[ContentValue]


class PublishFunctionsBody(Body):
    message: Data
    subscriptionTopics: Annotated[list[Text], Meta(min_length=1)]


class FunctionCallBody(Body):
    """A URL function's call: the publication and the subscription's parameters."""

    publication: dict[str, Any]
    params: Params = field(default_factory=dict)


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


class CompatPullQuery(Struct):
    max: int = 10
    wait: float = 0.0


class DeadLettersQuery(Struct):
    limit: Annotated[int, Meta(ge=1, le=1000, description="at most this many")] = 100


def _pull_fields(q: QueueSettings) -> list[tuple[str, Any, Any]]:
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
        *_pull_fields(q),
        ("visibility", visibility, q.visibility_timeout_s),
        ("form", FORM, "full"),
        ("encoding", ENCODING, "json"),
    ]
    return msgspec.defstruct("PullQuery", fields, bases=(PullQuery,))  # type: ignore[return-value]


@cache
def compat_pull_query(q: QueueSettings) -> type[CompatPullQuery]:
    return msgspec.defstruct(  # type: ignore[return-value]
        "CompatPullQuery", _pull_fields(q), bases=(CompatPullQuery,)
    )


def dead_letters_query(q: QueueSettings) -> type[DeadLettersQuery]:
    return DeadLettersQuery


class SubscribersQuery(Struct):
    limit: Annotated[int, Meta(ge=1, le=1000, description="at most this many")] = 100
    after: Annotated[str, Meta(description="the last id of the previous page")] = ""


def subscribers_query(q: QueueSettings) -> type[SubscribersQuery]:
    return SubscribersQuery


# ---------------------------------------------------------------- answers


class ErrorDetail(Struct):
    code: str
    message: str
    field: str | None


class ErrorAnswer(Struct):
    error: ErrorDetail


class Health(Struct):
    status: Literal["ok"]


class Ready(Struct):
    status: Literal["ready"]


# ---------------------------------------------------------------- /v1/admin


class SuspendedFunction(Struct):
    id: str
    subscriber_id: str
    function_type: str | None
    reason: str | None


class Overview(Struct):
    subscribers: int
    subscriptions: dict[str, int]
    queues: Depth
    oldest_message_age_s: float
    suspended: list[SuspendedFunction]
    counters: dict[str, float]
    settings: dict[str, Any]
    versions: dict[str, str]
    machine: dict[str, Any]


class SubscriberRecord(Struct):
    id: str
    created_at: float
    last_seen: float
    ephemeral: bool
    depth: Depth


class SubscribersPage(Struct):
    subscribers: list[SubscriberRecord]
    next: str | None


class SimulationBody(Body):
    config: Annotated[
        dict[str, Any], Meta(description="a simulator configuration, native or the thesis's")
    ]


class SimulationProgress(Struct):
    phase: str
    published: int
    planned: int
    delivered: int
    delivered_per_s: float
    p50_ms: float | None
    p99_ms: float | None
    at: float


class Simulation(Struct):
    id: str
    status: Literal["running", "done", "failed"]
    progress: SimulationProgress | None
    summary: dict[str, Any] | None
    error: str | None


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
    paused, why)."""

    url: str
    state: Literal["active", "paused"]
    reason: str | None
    failures: int
    updated_at: float
    secret: str


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
    subscriptions: list[SubscriptionOut]


class Published(Struct):
    id: str
    published_at: float
    deliveries: int


class BatchCounts(Struct, omit_defaults=True):
    """A batch's answer: every publication (the default), or with `?answer=count` how many
    were published and delivered, without their ids (a 1,000-publication answer in ~40
    bytes instead of ~80 KB)."""

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


class BatchQuery(Struct):
    answer: Annotated[
        Literal["ids", "count"],
        Meta(description="ids (each publication's id), or count (two numbers: a smaller answer)"),
    ] = "ids"


def batch_query(q: QueueSettings) -> type[BatchQuery]:
    return BatchQuery


class MessageOut(Struct):
    """A delivered message; the compact form (`form=compact`) leaves out `id`,
    `publication_id` and `enqueued_at`, and `attempt` when it is 1."""

    receipt: str
    subscription_ids: list[str]
    body: Any
    attempt: int = 1
    id: int | UnsetType = UNSET
    publication_id: str | UnsetType = UNSET
    enqueued_at: float | UnsetType = UNSET


class Messages(Struct):
    messages: list[MessageOut]


class Settled(Struct):
    acked: list[str]
    unknown: list[str]


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


class CompatRegistered(Struct):
    subscriberId: str
    queueName: str
    queueUrl: str
    connectionString: str
    token: str


class CompatUnregistered(Struct):
    subscriberId: str
    unregistered: bool


class CompatSubscribed(Struct):
    subscriberId: str
    subscriptionId: str
    topics: list[str] | UnsetType = UNSET
    content: list[PredicateOut] | UnsetType = UNSET
    subscriptionTopic: str | UnsetType = UNSET


class CompatPublished(Struct):
    publicationId: str
    deliveries: int


class CompatBody(Struct):
    message: Any
    publicationId: str
    topic: str | None
    topics: list[str]
    content: list[dict[str, Any]]
    subscriptionTopics: list[str]
    subscriptionIds: list[str]


class CompatMessage(Struct):
    id: int
    receipt: str
    attempt: int
    body: CompatBody


class CompatMessages(Struct):
    messages: list[CompatMessage]


class Match(Struct):
    match: bool


# ---------------------------------------------------------------- operations


@dataclass(frozen=True, slots=True)
class Operation:
    """What a handler reads and answers, for the OpenAPI document."""

    body: Any = None  # a msgspec type, or None when the route reads no body
    body_required: bool = True
    query: Callable[[QueueSettings], type[Struct]] | None = None
    answer: Any = None  # the 2XX body's type; None: no body (204) or not JSON
    status: int = 200
    media: str = "application/json"
    token: bool = False  # the subscriber's bearer token is required
    # other media types of the body and of the answer, with the same schema (MessagePack)
    body_media: tuple[str, ...] = ()
    answer_media: tuple[str, ...] = ()


DESCRIBED: dict[Callable[..., Any], Operation] = {}


def described(op: Operation) -> Callable[[F], F]:
    """Record a handler's types: `@described(Operation(body=AckBody, answer=Settled))`."""

    def mark(handler: F) -> F:
        DESCRIBED[handler] = op
        return handler

    return mark


class StreamFrame(Body):
    """What a subscriber sends on its WebSocket stream."""

    type: Literal["ack", "nack"]
    receipts: Receipts
