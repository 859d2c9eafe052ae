"""The one error catalogue: stable codes, their HTTP statuses and message templates.

Tests assert on codes, never on message text. Nothing here imports a web framework;
the API layer turns a `TidingsError` into `{"error": {"code", "message", "field"}}`.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any


class ErrorCode(StrEnum):
    """A stable, machine-readable error code; its value is what clients see."""

    INVALID_JSON = "invalid_json"
    INVALID_UTF8 = "invalid_utf8"
    INVALID_MSGPACK = "invalid_msgpack"
    INVALID_FIELD = "invalid_field"
    MISSING_FIELD = "missing_field"
    UNKNOWN_OPERATOR = "unknown_operator"
    INVALID_TOPIC = "invalid_topic"
    LIMIT_EXCEEDED = "limit_exceeded"
    PAYLOAD_TOO_LARGE = "payload_too_large"
    ANSWER_TOO_LARGE = "answer_too_large"
    INPUT_TOO_LARGE = "input_too_large"
    UNAUTHORIZED = "unauthorized"
    FORBIDDEN = "forbidden"
    FORBIDDEN_ORIGIN = "forbidden_origin"
    MISDIRECTED = "misdirected"
    INVALID_HEADER = "invalid_header"
    INSUFFICIENT_STORAGE = "insufficient_storage"
    RATE_LIMITED = "rate_limited"
    REQUEST_TIMEOUT = "request_timeout"
    SUBSCRIBER_NOT_FOUND = "subscriber_not_found"
    SUBSCRIPTION_NOT_FOUND = "subscription_not_found"
    NOT_FOUND = "not_found"
    PLACEMENT_UNKNOWN = "placement_unknown"
    METHOD_NOT_ALLOWED = "method_not_allowed"
    UNSUPPORTED_MEDIA_TYPE = "unsupported_media_type"
    FUNCTION_INVALID = "function_invalid"
    FUNCTION_FORBIDDEN = "function_forbidden"
    FUNCTION_UNKNOWN = "function_unknown"
    FUNCTION_UNAVAILABLE = "function_unavailable"
    FUNCTION_SANDBOX_UNAVAILABLE = "function_sandbox_unavailable"
    CONFIG_INVALID = "config_invalid"
    CONFLICT = "conflict"
    UNAVAILABLE = "unavailable"
    INTERNAL = "internal"


# code -> (HTTP status, message template). Templates take keyword arguments.
CATALOGUE: dict[ErrorCode, tuple[int, str]] = {
    ErrorCode.INVALID_JSON: (400, "the body is not valid JSON: {detail}"),
    ErrorCode.INVALID_UTF8: (400, "the body is not valid UTF-8"),
    ErrorCode.INVALID_MSGPACK: (400, "the body is not valid MessagePack: {detail}"),
    ErrorCode.INVALID_FIELD: (422, "{detail}"),
    ErrorCode.MISSING_FIELD: (422, "the field is required"),
    ErrorCode.UNKNOWN_OPERATOR: (422, "unknown operator {op!r}; expected one of {allowed}"),
    ErrorCode.INVALID_TOPIC: (422, "{detail}"),
    ErrorCode.LIMIT_EXCEEDED: (422, "{detail}"),
    ErrorCode.PAYLOAD_TOO_LARGE: (413, "the body is {size} bytes; the limit is {limit} bytes"),
    ErrorCode.ANSWER_TOO_LARGE: (
        413,
        "the answer is {size} bytes; the client reads at most {limit} bytes (raise its limit)",
    ),
    ErrorCode.INPUT_TOO_LARGE: (413, "{detail}"),  # an image's pixels, a text's bytes
    ErrorCode.UNAUTHORIZED: (401, "a bearer token is required: Authorization: Bearer <token>"),
    ErrorCode.FORBIDDEN: (403, "this token does not grant access to {resource}"),
    ErrorCode.FORBIDDEN_ORIGIN: (
        403,
        "requests from {origin} are refused (a web page's): the broker's own origin and "
        "http.allowed_origins are accepted",
    ),
    ErrorCode.RATE_LIMITED: (429, "{detail}; try again in {retry_s} s"),
    ErrorCode.REQUEST_TIMEOUT: (408, "{detail}"),  # a body sent too slowly
    ErrorCode.INSUFFICIENT_STORAGE: (
        507,
        "the broker's disk is nearly full ({free} bytes free, below limits.min_free_disk_bytes):"
        " publishing resumes once there is room",
    ),
    ErrorCode.INVALID_HEADER: (400, "{detail}"),
    ErrorCode.MISDIRECTED: (
        421,
        "this broker does not answer to the name {host!r}: an address, localhost, public_url's "
        "host or a name in http.allowed_hosts",
    ),
    ErrorCode.SUBSCRIBER_NOT_FOUND: (404, "no subscriber {id!r}"),
    ErrorCode.SUBSCRIPTION_NOT_FOUND: (404, "no subscription {id!r}"),
    ErrorCode.NOT_FOUND: (404, "{detail}"),
    ErrorCode.PLACEMENT_UNKNOWN: (
        404,
        "no placement state has come since this broker started: the placement controller "
        "publishes it on placement/state (tidings placement controller, docs/placement.md)",
    ),
    ErrorCode.METHOD_NOT_ALLOWED: (405, "method not allowed"),
    ErrorCode.UNSUPPORTED_MEDIA_TYPE: (415, "{detail}"),
    ErrorCode.FUNCTION_INVALID: (422, "{detail}"),
    ErrorCode.FUNCTION_FORBIDDEN: (422, "{detail}"),
    ErrorCode.FUNCTION_UNKNOWN: (422, "unknown function {name!r}; known: {known}"),
    ErrorCode.FUNCTION_UNAVAILABLE: (422, "{detail}"),  # this broker lacks its extra
    # 422, not 503: a deterministic refusal of this function kind by this broker (retrying
    # will not help, unlike 503's promise), and no 5xx ever answers a client's request
    ErrorCode.FUNCTION_SANDBOX_UNAVAILABLE: (422, "{detail}"),
    ErrorCode.CONFIG_INVALID: (422, "{detail}"),
    ErrorCode.CONFLICT: (409, "{detail}"),
    ErrorCode.UNAVAILABLE: (503, "{detail}"),
    ErrorCode.INTERNAL: (500, "internal error"),
}


class TidingsError(Exception):
    """An error with a catalogued code; `field` names the offending input, if any."""

    def __init__(self, code: ErrorCode, field: str | None = None, **params: Any) -> None:
        self.code = code
        self.field = field
        self.params = params
        self.status, template = CATALOGUE[code]
        self.message = template.format(**params)
        super().__init__(f"{code.value}: {self.message}" + (f" (field {field})" if field else ""))

    def to_dict(self) -> dict[str, Any]:
        """The JSON error body every API answers with."""
        return {"error": {"code": self.code.value, "message": self.message, "field": self.field}}


def invalid(field: str, detail: str) -> TidingsError:
    """Shorthand for the most common error: a field whose value is wrong."""
    return TidingsError(ErrorCode.INVALID_FIELD, field=field, detail=detail)
