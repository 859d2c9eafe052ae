"""Field types every API shares, request bodies' strictness, the error answer and health."""

from __future__ import annotations

from typing import Annotated, Any, Literal, TypeAlias

from msgspec import Meta, Struct

from tidings.model import ID_MAX, OP_ALIASES, RECEIPT_PATTERN, Op

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


class Settled(Struct):
    """What acknowledging or releasing receipts did (both APIs)."""

    acked: list[str]
    unknown: list[str]


class AckBody(Body):
    receipts: Receipts
