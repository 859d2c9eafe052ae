"""Publications, subscriptions (topic | content | function), predicates; validation.

Parsing functions take decoded JSON (dicts, lists, scalars) and either return a model
object or raise `TidingsError` naming the field (as a JSON path such as
`predicates[2].op`) and the problem. Nothing here does I/O.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from itertools import chain
from typing import Any, Literal, TypeAlias, TypeVar

import msgspec

from tidings.config import Limits
from tidings.errors import ErrorCode, TidingsError, invalid

Scalar: TypeAlias = str | int | float | bool
JSON: TypeAlias = Any
T = TypeVar("T")

# orjson encodes at most 254 levels and every answer wraps a client's value in a few more
# (a pull: messages, message, body, data), so no setting lets a value nest deeper than this
JSON_DEPTH_CEILING = 200
# ids and the sequence number in a receipt are the store's signed 64-bit integers
ID_MAX = 2**63 - 1
SEQ_DIGITS, ATTEMPT_DIGITS = 19, 10  # a receipt's numbers, at most (the pattern's)
RECEIPT_PATTERN = r"^[0-9]{1,19}\.[0-9]{1,10}\.[0-9a-f]{1,64}$"
_RECEIPT = re.compile(RECEIPT_PATTERN, re.ASCII)


class Op(StrEnum):
    EQ = "="
    NE = "!="
    LT = "<"
    LE = "<="
    GT = ">"
    GE = ">="
    PREFIX = "prefix"
    SUFFIX = "suffix"
    CONTAINS = "contains"
    IN = "in"
    EXISTS = "exists"


ORDERED_OPS = frozenset({Op.LT, Op.LE, Op.GT, Op.GE})
STRING_OPS = frozenset({Op.PREFIX, Op.SUFFIX, Op.CONTAINS})
# Spellings accepted besides the symbols (the thesis's "condition" words among them).
OP_ALIASES: dict[str, Op] = {
    "==": Op.EQ, "eq": Op.EQ, "equals": Op.EQ, "ne": Op.NE, "<>": Op.NE,
    "lt": Op.LT, "le": Op.LE, "lte": Op.LE, "gt": Op.GT, "ge": Op.GE, "gte": Op.GE,
}  # fmt: skip


@dataclass(frozen=True, slots=True)
class Predicate:
    """One test on one attribute: `attributes[key] op value`."""

    key: str
    op: Op
    value: Scalar | tuple[Scalar, ...]

    def to_json(self) -> dict[str, JSON]:
        value = list(self.value) if isinstance(self.value, tuple) else self.value
        return {"key": self.key, "op": self.op.value, "value": value}


SubscriptionKind = Literal["topic", "content", "function"]
FunctionKind = Literal["code", "url", "builtin"]


@dataclass(frozen=True, slots=True)
class FunctionSpec:
    """A function subscription's matching logic; exactly one of code, url, builtin is used."""

    function_type: str
    kind: FunctionKind
    source: str  # the Python source, the URL, or the builtin's name
    params: Mapping[str, JSON] = field(default_factory=dict)
    fail_open: bool = False

    def to_json(self) -> dict[str, JSON]:
        return {
            "function_type": self.function_type,
            self.kind: self.source,
            "params": dict(self.params),
            "fail_open": self.fail_open,
        }


@dataclass(frozen=True, slots=True)
class Subscription:
    id: str
    subscriber_id: str
    kind: SubscriptionKind
    topics: tuple[str, ...] = ()
    predicates: tuple[Predicate, ...] = ()
    function: FunctionSpec | None = None
    created_at: float = 0.0
    status: Literal["active", "suspended"] = "active"
    status_reason: str | None = None
    # the bytes of its body as a store read it (0: not read from one): what the byte budgets
    # count, known at no cost where the body was just read (a broker's load of 10^4)
    stored_bytes: int = field(default=0, compare=False, repr=False)

    def to_json(self) -> dict[str, JSON]:
        out: dict[str, JSON] = {"id": self.id, "subscriber_id": self.subscriber_id}
        out["kind"] = self.kind
        if self.kind == "topic":
            out["topics"] = list(self.topics)
        elif self.kind == "content":
            out["predicates"] = [p.to_json() for p in self.predicates]
        elif self.function is not None:
            out["function"] = self.function.to_json()
        out.update(created_at=self.created_at, status=self.status, status_reason=self.status_reason)
        return out


def needle_chars(predicate: Predicate) -> int:
    """The characters a `contains` predicate adds to its attribute's automaton
    (`matching.needles`): its needle's length; 0 for any other predicate."""
    if predicate.op is Op.CONTAINS and isinstance(predicate.value, str):
        return len(predicate.value)
    return 0


def predicate_from_json(raw: Mapping[str, JSON]) -> Predicate:
    """Rebuild a predicate that Tidings itself wrote; no validation."""
    value: JSON = raw.get("value")
    return Predicate(raw["key"], Op(raw["op"]), tuple(value) if isinstance(value, list) else value)


def subscription_from_json(raw: Mapping[str, JSON], stored_bytes: int = 0) -> Subscription:
    """Rebuild a subscription that Tidings itself wrote (`Subscription.to_json`); a store
    says how many bytes its body took (`stored_bytes`)."""
    fn = raw.get("function")
    spec = None
    if fn is not None:
        kind: FunctionKind = next(k for k in ("code", "url", "builtin") if k in fn)
        spec = FunctionSpec(
            fn["function_type"],
            kind,
            fn[kind],
            fn.get("params", {}),
            bool(fn.get("fail_open", False)),
        )
    return Subscription(
        id=raw["id"],
        subscriber_id=raw["subscriber_id"],
        kind=raw["kind"],
        topics=tuple(raw.get("topics", ())),
        predicates=tuple(predicate_from_json(p) for p in raw.get("predicates", ())),
        function=spec,
        created_at=float(raw.get("created_at", 0.0)),
        status=raw.get("status", "active"),
        status_reason=raw.get("status_reason"),
        stored_bytes=stored_bytes,
    )


@dataclass(frozen=True, slots=True)
class Publication:
    id: str
    published_at: float
    data: JSON = None
    topics: tuple[str, ...] = ()
    attributes: Mapping[str, Scalar] = field(default_factory=dict)
    function_types: tuple[str, ...] = ()
    # "base64": `data` is binary, published as MessagePack `bin`, kept as its base64 text
    # (delivered as `bin` again to a MessagePack stream; docs/api.md)
    data_encoding: str = "json"

    def to_json(self) -> dict[str, JSON]:
        out: dict[str, JSON] = {
            "id": self.id,
            "published_at": self.published_at,
            "data": self.data,
            "topics": list(self.topics),
            "attributes": dict(self.attributes),
            "function_types": list(self.function_types),
        }
        if self.data_encoding != "json":
            out["data_encoding"] = self.data_encoding
        return out

    def to_wire(self) -> dict[str, JSON]:
        """As queued and delivered: `to_json` without its empty fields."""
        out: dict[str, JSON] = {"id": self.id, "published_at": self.published_at}
        if self.data is not None:
            out["data"] = self.data
        if self.topics:
            out["topics"] = list(self.topics)
        if self.attributes:
            out["attributes"] = dict(self.attributes)
        if self.function_types:
            out["function_types"] = list(self.function_types)
        if self.data_encoding != "json":
            out["data_encoding"] = self.data_encoding
        return out

    @classmethod
    def from_json(cls, raw: Mapping[str, JSON]) -> Publication:
        """Rebuild a publication that Tidings itself wrote (log, queue); no validation."""
        return cls(
            id=raw["id"],
            published_at=float(raw["published_at"]),
            data=raw.get("data"),
            topics=tuple(raw.get("topics", ())),
            attributes=dict(raw.get("attributes", {})),
            function_types=tuple(raw.get("function_types", ())),
            data_encoding=str(raw.get("data_encoding", "json")),
        )


@dataclass(frozen=True, slots=True)
class Subscriber:
    id: str
    token_hash: str
    created_at: float


# ---------------------------------------------------------------- validation helpers

_SEGMENT = re.compile(r"[^\s/*#+\x00-\x1f]+")
_TOPIC = re.compile(r"[^\s/*#+\x00-\x1f]+(?:/[^\s/*#+\x00-\x1f]+)*")


def _object(raw: JSON, field_name: str) -> Mapping[str, JSON]:
    if not isinstance(raw, Mapping):
        raise invalid(field_name, f"expected an object, got {_kind(raw)}")
    return raw


def _kind(value: JSON) -> str:
    return {dict: "an object", list: "an array", str: "a string", bool: "a boolean"}.get(
        type(value), "null" if value is None else "a number"
    )


_STRING_MAX = 1024  # a string field's bound unless said otherwise (a topic, a function type)


def _string(raw: JSON, field_name: str, *, max_len: int = _STRING_MAX) -> str:
    if not isinstance(raw, str) or not raw:
        raise invalid(field_name, f"expected a non-empty string, got {_kind(raw)}")
    if len(raw) > max_len:
        raise invalid(field_name, f"longer than {max_len} characters")
    return raw


def _string_list(raw: JSON, field_name: str, limit: int) -> list[str]:
    if not isinstance(raw, list):
        raise invalid(field_name, f"expected an array of strings, got {_kind(raw)}")
    if len(raw) > limit:
        raise TidingsError(
            ErrorCode.LIMIT_EXCEEDED, field=field_name, detail=f"at most {limit} items allowed"
        )
    return [_string(item, f"{field_name}[{i}]") for i, item in enumerate(raw)]


SCALARS = (str, int, float, bool)


def is_scalar(value: JSON) -> bool:
    return isinstance(value, SCALARS) and value == value  # NaN is not


def required(raw: Mapping[str, JSON], key: str, prefix: str = "") -> JSON:
    if key not in raw or raw[key] is None:
        raise TidingsError(ErrorCode.MISSING_FIELD, field=prefix + key)
    return raw[key]


# a tuple, not `dict | list`: that builds a union object at each `isinstance`, which was
# most of a walk over a decoded body's containers (2.5x the walk's time, issue #30)
CONTAINERS = (dict, list)


def json_depth(value: JSON, stop: int = JSON_DEPTH_CEILING) -> int:
    """How deep containers nest in a JSON value (a scalar 0, `[]` 1, `[[1]]` 2), counted
    without recursion and only up to the first level past `stop`."""
    level, depth = ([value] if isinstance(value, CONTAINERS) else []), 0
    while level:  # a level at a time, in comprehensions: a step per container cost ~1 µs
        depth += 1
        if depth > stop:
            return depth
        level = [c for c in children(level) if isinstance(c, CONTAINERS)]
    return depth


def children(level: list[Any]) -> Iterator[Any]:
    """The values held by a level's containers (dicts and lists)."""
    return chain.from_iterable(x.values() if isinstance(x, dict) else x for x in level)


def check_depth(value: JSON, field_name: str, limits: Limits) -> JSON:
    """Refuse a client's value nested deeper than `limits.max_json_depth` (capped at
    `JSON_DEPTH_CEILING`), so that every answer that carries it can be encoded."""
    limit = min(limits.max_json_depth, JSON_DEPTH_CEILING)
    if json_depth(value, limit) > limit:
        raise invalid(field_name, f"nested more than {limit} levels deep")
    return value


def receipt_seq(receipt: str) -> int | None:
    """The message sequence number in a receipt `seq.attempt.nonce`, or None when the
    receipt is malformed: ASCII digits only, within 64 bits."""
    if not _RECEIPT.fullmatch(receipt):  # not match: `$` passes a final line break
        return None
    seq = int(receipt.split(".", 1)[0])
    return seq if seq <= ID_MAX else None


def seqs_in_range(receipts: list[str]) -> bool:
    """Whether every one of these receipts, each matching the pattern, has its sequence
    number within 64 bits (any of 18 digits is: no number read)."""
    return all(r.index(".") < SEQ_DIGITS or int(r[: r.index(".")]) <= ID_MAX for r in receipts)


def check_receipts(receipts: list[str], field_name: str = "receipts") -> list[str]:
    for i, receipt in enumerate(receipts):
        if receipt_seq(receipt) is None:
            raise invalid(f"{field_name}[{i}]", "not a receipt this broker issued")
    return receipts


# ---------------------------------------------------------------- typed conversion

_AT = re.compile(r"^(?P<detail>.*?)(?: - at `\$(?P<path>[^`]*)`)?$", re.DOTALL)
_NAMED = re.compile(r"^Object (?P<what>missing required|contains unknown) field `(?P<name>.*)`$")
_SEGMENT_RE = re.compile(r"\.([^.\[]+)|\[(\d+|\.\.\.)\]")


def convert(raw: JSON, into: type[T], *, strict: bool = True) -> T:
    """`raw` as an instance of the msgspec type `into`, or the house's error naming the
    path (`predicates[0].op`); a missing field is `missing_field`, the rest `invalid_field`."""
    try:
        return msgspec.convert(raw, into, strict=strict)
    except msgspec.ValidationError as exc:
        raise validation_error(str(exc), raw) from None


def validation_error(text: str, raw: JSON) -> TidingsError:
    match = _AT.match(text)
    detail, path = (match["detail"], match["path"] or "") if match else (text, "")
    segments = _segments(path, raw)
    named = _NAMED.match(detail)
    if named:
        segments.append(named["name"])
        if named["what"] == "missing required":
            return TidingsError(ErrorCode.MISSING_FIELD, field=_path(segments))
        detail = "unknown field"
    return invalid(_path(segments), detail)


def _segments(path: str, raw: JSON) -> list[str | int]:
    """msgspec's path as keys and indexes; its `[...]` (a map's key) resolved to the first
    key of that object whose value is not a JSON scalar."""
    out: list[str | int] = []
    node = raw
    for key, index in _SEGMENT_RE.findall(path):
        step: str | int = key if key else (int(index) if index != "..." else "")
        if step == "" and isinstance(node, dict):
            step = next((k for k, v in node.items() if not is_scalar(v)), "...")
        out.append(step)
        node = _child(node, step)
    return out


def _child(node: JSON, step: str | int) -> JSON:
    if isinstance(node, dict):
        return node.get(step)
    if isinstance(node, list) and isinstance(step, int) and step < len(node):
        return node[step]
    return None


def _path(segments: list[str | int]) -> str:
    text = "".join(f"[{s}]" if isinstance(s, int) else f".{s}" for s in segments)
    return text.lstrip(".") or "$"


# ---------------------------------------------------------------- topics


def validate_topic(topic: JSON, field_name: str, limits: Limits, *, pattern: bool) -> str:
    """A topic name (`a/b/c`) or, when `pattern`, a filter with `*` and a trailing `#`."""
    if not isinstance(topic, str) or not topic:
        raise TidingsError(
            ErrorCode.INVALID_TOPIC, field=field_name, detail="a topic is a non-empty string"
        )
    if len(topic) > limits.max_topic_length:
        raise TidingsError(
            ErrorCode.INVALID_TOPIC,
            field=field_name,
            detail=f"a topic is at most {limits.max_topic_length} characters",
        )
    if topic.count("/") >= limits.max_topic_segments:
        raise TidingsError(
            ErrorCode.INVALID_TOPIC,
            field=field_name,
            detail=f"a topic has at most {limits.max_topic_segments} segments",
        )
    if _TOPIC.fullmatch(topic):  # no wildcard, no bad segment: one C pass, not one per segment
        return topic
    segments = topic.split("/")
    for i, segment in enumerate(segments):
        _check_segment(segment, i == len(segments) - 1, field_name, pattern)
    if pattern and len(segments) > limits.max_pattern_segments and is_pattern(topic):
        raise TidingsError(
            ErrorCode.LIMIT_EXCEEDED,
            field=field_name,
            detail=f"a filter with a wildcard has at most {limits.max_pattern_segments} "
            "segments (max_pattern_segments)",
        )
    return topic


def _check_segment(segment: str, last: bool, field_name: str, pattern: bool) -> None:
    if pattern and segment == "*":
        return
    if pattern and segment == "#":
        if last:
            return
        detail = "'#' may only be the last segment"
    elif segment in ("*", "#"):
        detail = "wildcards are only allowed in subscriptions"
    elif not segment:
        detail = "empty segment (leading, trailing or doubled '/')"
    elif not _SEGMENT.fullmatch(segment):
        detail = f"segment {segment!r} has whitespace, a control character or a wildcard inside"
    else:
        return
    raise TidingsError(ErrorCode.INVALID_TOPIC, field=field_name, detail=detail)


def is_pattern(topic_filter: str) -> bool:
    return any(s in ("*", "#") for s in topic_filter.split("/"))


# ---------------------------------------------------------------- predicates


def parse_op(raw: JSON, field_name: str) -> Op:
    if isinstance(raw, str):
        text = raw.strip().lower()
        if text in OP_ALIASES:
            return OP_ALIASES[text]
        try:
            return Op(text)
        except ValueError:
            pass
    allowed = ", ".join(op.value for op in Op)
    raise TidingsError(ErrorCode.UNKNOWN_OPERATOR, field=field_name, op=raw, allowed=allowed)


def parse_predicate(raw: JSON, field_name: str, limits: Limits | None = None) -> Predicate:
    obj = _object(raw, field_name)
    key = _string(required(obj, "key", f"{field_name}."), f"{field_name}.key", max_len=255)
    op = parse_op(required(obj, "op", f"{field_name}."), f"{field_name}.op")
    if op is Op.EXISTS:
        value = obj.get("value", True)
        if not isinstance(value, bool):
            raise invalid(f"{field_name}.value", "exists takes true or false")
        return Predicate(key, op, value)
    value = _predicate_value(op, required(obj, "value", f"{field_name}."), f"{field_name}.value")
    _check_size(value, f"{field_name}.value", limits or Limits())
    return Predicate(key, op, value)


def _check_size(value: Scalar | tuple[Scalar, ...], field_name: str, limits: Limits) -> None:
    values = value if isinstance(value, tuple) else (value,)
    if len(values) > limits.max_in_values:
        raise TidingsError(
            ErrorCode.LIMIT_EXCEEDED,
            field=field_name,
            detail=f"at most {limits.max_in_values} values in an in list",
        )
    if any(isinstance(v, str) and len(v) > limits.max_predicate_string for v in values):
        raise TidingsError(
            ErrorCode.LIMIT_EXCEEDED,
            field=field_name,
            detail=f"a predicate's strings are at most {limits.max_predicate_string} characters",
        )


def _predicate_value(op: Op, value: JSON, field_name: str) -> Scalar | tuple[Scalar, ...]:
    if op is Op.IN:
        if not isinstance(value, list) or not value or not all(is_scalar(v) for v in value):
            raise invalid(field_name, "in takes a non-empty array of strings, numbers or booleans")
        return tuple(value)
    if op in STRING_OPS and not isinstance(value, str):
        raise invalid(field_name, f"{op.value} takes a string")
    if op in ORDERED_OPS and (isinstance(value, bool) or not is_scalar(value)):
        raise invalid(field_name, f"{op.value} takes a number or a string")
    if not is_scalar(value):
        raise invalid(field_name, f"expected a string, number or boolean, got {_kind(value)}")
    return value  # type: ignore[no-any-return]


# ---------------------------------------------------------------- subscriptions


def parse_subscription_body(
    raw: JSON, limits: Limits
) -> tuple[SubscriptionKind, tuple[str, ...], tuple[Predicate, ...], FunctionSpec | None]:
    """Validate a native subscription body: `{"topics": [...]}`, `{"predicates": [...]}`,
    or `{"function": {...}}`. Returns (kind, topics, predicates, function)."""
    obj = _object(raw, "$")
    present = [k for k in ("topics", "predicates", "function") if k in obj]
    if len(present) != 1:
        raise invalid("$", "give exactly one of topics, predicates, function")
    if present[0] == "topics":
        return "topic", parse_topic_filters(obj["topics"], limits), (), None
    if present[0] == "predicates":
        return "content", (), parse_predicates(obj["predicates"], limits), None
    return "function", (), (), parse_function_spec(obj["function"], "function", limits)


def parse_topic_filters(raw: JSON, limits: Limits, field_name: str = "topics") -> tuple[str, ...]:
    items = _string_list(raw, field_name, limits.max_topics_per_subscription)
    if not items:
        raise invalid(field_name, "at least one topic is required")
    return tuple(
        dict.fromkeys(
            validate_topic(t, f"{field_name}[{i}]", limits, pattern=True)
            for i, t in enumerate(items)
        )
    )


def parse_predicates(
    raw: JSON, limits: Limits, field_name: str = "predicates"
) -> tuple[Predicate, ...]:
    if not isinstance(raw, list) or not raw:
        raise invalid(field_name, "expected a non-empty array of predicates")
    if len(raw) > limits.max_predicates:
        raise TidingsError(
            ErrorCode.LIMIT_EXCEEDED,
            field=field_name,
            detail=f"at most {limits.max_predicates} predicates per subscription",
        )
    return tuple(parse_predicate(p, f"{field_name}[{i}]", limits) for i, p in enumerate(raw))


def parse_function_spec(raw: JSON, field_name: str, limits: Limits) -> FunctionSpec:
    obj = _object(raw, field_name)
    ftype = _string(
        required(obj, "function_type", f"{field_name}."), f"{field_name}.function_type", max_len=255
    )
    kinds = [k for k in ("code", "url", "builtin") if k in obj]
    if len(kinds) != 1:
        raise invalid(field_name, "give exactly one of code, url, builtin")
    kind: FunctionKind = kinds[0]  # type: ignore[assignment]
    source = _string(obj[kind], f"{field_name}.{kind}", max_len=limits.max_code_bytes)
    if kind == "url" and not re.match(r"^https?://[^\s/]+", source):
        raise invalid(f"{field_name}.url", "expected an http:// or https:// URL")
    params = obj.get("params", {})
    if not isinstance(params, Mapping):
        raise invalid(f"{field_name}.params", f"expected an object, got {_kind(params)}")
    check_depth(params, f"{field_name}.params", limits)
    fail_open = obj.get("fail_open", False)
    if not isinstance(fail_open, bool):
        raise invalid(f"{field_name}.fail_open", "expected true or false")
    return FunctionSpec(ftype, kind, source, dict(params), fail_open)


# ---------------------------------------------------------------- publications


PublicationParts: TypeAlias = tuple[JSON, tuple[str, ...], dict[str, Scalar], tuple[str, ...]]
_PUBLICATION_KEYS = frozenset({"data", "topics", "attributes", "function_types"})
_NO_LIST: list[JSON] = []  # never mutated: what a publication without topics reads as
_NO_DICT: dict[str, JSON] = {}
_SCALARS = frozenset({str, int, float, bool})


def parse_publication_body(raw: JSON, limits: Limits) -> PublicationParts:
    """Validate a native publication body; returns (data, topics, attributes, function_types)."""
    plain = _plain_publication(raw, limits)
    return plain if plain is not None else _publication_parts(raw, limits)


def _plain_publication(raw: JSON, limits: Limits) -> PublicationParts | None:
    """A publication every check passes, read in one pass; None for anything else, which
    the checks one by one read again for their error. Same answer as theirs: a batch spent
    10 us a publication on them, a tenth of a 1 -> 1 message's broker CPU (issue #30)."""
    if type(raw) is not dict or not raw.keys() <= _PUBLICATION_KEYS:
        return None
    topics, ftypes = raw.get("topics", _NO_LIST), raw.get("function_types", _NO_LIST)
    attributes = raw.get("attributes", _NO_DICT)
    if (
        type(topics) is not list
        or type(ftypes) is not list
        or type(attributes) is not dict
        or len(topics) > limits.max_topics_per_publication
        or len(ftypes) > limits.max_function_types
        or len(attributes) > limits.max_attributes
    ):
        return None
    longest, segments = min(limits.max_topic_length, _STRING_MAX), limits.max_topic_segments
    for topic in topics:
        if (
            type(topic) is not str
            or len(topic) > longest
            or topic.count("/") >= segments
            or not _TOPIC.fullmatch(topic)
        ):
            return None
    for ftype in ftypes:
        if type(ftype) is not str or not ftype or len(ftype) > _STRING_MAX:
            return None
    for key, value in attributes.items():
        if type(key) is not str or not key or len(key) > 255:
            return None
        if type(value) not in _SCALARS or value != value:
            return None
    names = (topics[0],) if len(topics) == 1 else tuple(dict.fromkeys(topics))
    kinds = tuple(dict.fromkeys(ftypes)) if ftypes else ()
    return check_depth(raw.get("data"), "data", limits), names, dict(attributes), kinds


def _publication_parts(raw: JSON, limits: Limits) -> PublicationParts:
    obj = _object(raw, "$")
    unknown = set(obj) - _PUBLICATION_KEYS
    if unknown:
        raise invalid(sorted(unknown)[0], "unknown field")
    topics = tuple(
        dict.fromkeys(
            validate_topic(t, f"topics[{i}]", limits, pattern=False)
            for i, t in enumerate(
                _string_list(obj.get("topics", []), "topics", limits.max_topics_per_publication)
            )
        )
    )
    attributes = parse_attributes(obj.get("attributes", {}), limits)
    ftypes = tuple(
        dict.fromkeys(
            _string_list(obj.get("function_types", []), "function_types", limits.max_function_types)
        )
    )
    return check_depth(obj.get("data"), "data", limits), topics, attributes, ftypes


def parse_attributes(
    raw: JSON, limits: Limits, field_name: str = "attributes"
) -> dict[str, Scalar]:
    obj = _object(raw, field_name)
    if len(obj) > limits.max_attributes:
        raise TidingsError(
            ErrorCode.LIMIT_EXCEEDED,
            field=field_name,
            detail=f"at most {limits.max_attributes} attributes",
        )
    for key, value in obj.items():
        if not key or len(key) > 255:
            raise invalid(f"{field_name}.{key}", "attribute names are 1 to 255 characters")
        if not is_scalar(value):
            raise invalid(
                f"{field_name}.{key}",
                f"attribute values are strings, numbers or booleans, got {_kind(value)}",
            )
    return dict(obj)
