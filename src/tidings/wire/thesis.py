"""The thesis's API's shapes (/api), with its wire names (camelCase), so its sample inputs
work verbatim."""

from __future__ import annotations

from functools import cache
from typing import Annotated, Any, Literal, cast

import msgspec
from msgspec import UNSET, Meta, Struct, UnsetType, field

from tidings.config import QueueSettings
from tidings.wire.base import Body, Data, Name, OpName, Params, Scalar, Text, Topics
from tidings.wire.v1 import PredicateOut, pull_fields

# ---------------------------------------------------------------- requests


class UnregisterBody(Body):
    subscriberId: str
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


DedupId = Annotated[str, Meta(min_length=1, max_length=128)]


class PublishTopicsBody(Body):
    """`dedupId` (or the `Tidings-Dedup-Id` header): as the native `dedup_id`."""

    message: Data
    topics: Topics
    dedupId: DedupId | None = None


class ContentValue(Body):
    key: Name
    value: Scalar


class PublishContentBody(Body):
    message: Data
    content: list[ContentValue]
    dedupId: DedupId | None = None


class PublishFunctionsBody(Body):
    message: Data
    subscriptionTopics: Annotated[list[Text], Meta(min_length=1)]
    dedupId: DedupId | None = None


class CompatPullQuery(Struct):
    max: int = 10
    wait: float = 0.0


@cache
def compat_pull_query(q: QueueSettings) -> type[CompatPullQuery]:
    made = msgspec.defstruct("CompatPullQuery", pull_fields(q), bases=(CompatPullQuery,))
    return cast(type[CompatPullQuery], made)


# ---------------------------------------------------------------- answers


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


class CompatPublished(Struct, omit_defaults=True):
    publicationId: str
    deliveries: int
    duplicate: bool = False


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


class FunctionCallBody(Body):
    """A URL function's call: the publication and the subscription's parameters."""

    publication: dict[str, Any]
    params: Params = field(default_factory=dict)


class Match(Struct):
    match: bool
