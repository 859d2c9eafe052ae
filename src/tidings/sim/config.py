"""Simulator configurations: the native format and the thesis's (fig. 5.8), both typed.

Types are checked by msgspec; meaning (topics, predicates, functions, ranges) by the broker's
own validators, so a bad configuration fails before the run with the path of the bad field,
e.g. `functionsMetadata.functions[0].matchingFunction`.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Literal, TypeVar

import msgspec

from tidings.config import Limits
from tidings.errors import ErrorCode, TidingsError
from tidings.model import parse_function_spec, parse_predicates, parse_topic_filters

LIMITS = Limits()
# The body limit minus room for the publication's other fields.
MAX_PAYLOAD_BYTES = LIMITS.max_publication_bytes - 2048
Scalar = str | int | float | bool
T = TypeVar("T")


class Offline(msgspec.Struct, forbid_unknown_fields=True):
    """The subscriber disconnects `at` seconds after publishing starts, for `seconds`."""

    at: float
    seconds: float


class SubscriberGroup(msgspec.Struct, forbid_unknown_fields=True):
    """`count` subscribers, each with every subscription given (none: subscribed to nothing)."""

    count: int = 1
    topics: list[str] | None = None
    predicates: list[dict[str, Any]] | None = None
    functions: list[dict[str, Any]] = []
    offline: list[Offline] = []


class PublisherGroup(msgspec.Struct, forbid_unknown_fields=True):
    """`count` publishers, each publishing `rate` per second (or `publications` in all)."""

    count: int = 1
    rate: float = 1.0
    publications: int | None = None
    arrival: Literal["fixed", "poisson"] = "fixed"
    start: float = 0.0
    topics: list[str] = []
    pick_topic: bool = False
    attributes: dict[str, Any] = {}
    function_types: list[str] = []
    text: str = ""
    payload_bytes: int = 1024


class SimConfig(msgspec.Struct, forbid_unknown_fields=True):
    name: str = "sim"
    url: str | None = None
    duration: float = 10.0
    drain: float = 10.0
    quiet: float = 1.0
    warmup: float = 0.0
    seed: int = 0
    delivery: Literal["stream", "pull"] = "stream"
    prefetch: int = 100
    cleanup: bool = True
    subscribers: list[SubscriberGroup] = []
    publishers: list[PublisherGroup] = []

    @property
    def subscriber_count(self) -> int:
        return sum(g.count for g in self.subscribers)


class ThesisFunction(msgspec.Struct, forbid_unknown_fields=True, rename="camel"):
    function_type: Literal["url", "code", "builtin"]
    subscription_topic: str
    matching_function: str
    matching_inputs: str | dict[str, Any] | None = None
    parameters: dict[str, Any] | None = None


class ThesisTopics(msgspec.Struct, forbid_unknown_fields=True, rename="camel"):
    nodes_count: int = 0
    topics: list[str] = []


class ThesisFunctions(msgspec.Struct, forbid_unknown_fields=True, rename="camel"):
    nodes_count: int = 0
    functions: list[ThesisFunction] = []


class ThesisConfig(msgspec.Struct, forbid_unknown_fields=True, rename="camel"):
    application_mode: Literal["Subscriber", "Publisher", "Simulator"]
    nodes_count: int
    base_url: str | None = None
    provider_type: str = "Tidings"
    topics_metadata: ThesisTopics = msgspec.field(default_factory=ThesisTopics)
    functions_metadata: ThesisFunctions = msgspec.field(default_factory=ThesisFunctions)
    duration: float = 10.0
    rate: float = 1.0
    seed: int = 0


def config_error(field: str, detail: str) -> TidingsError:
    return TidingsError(ErrorCode.CONFIG_INVALID, field=field, detail=detail)


def _typed(raw: Any, kind: type[T]) -> T:
    try:
        return msgspec.convert(raw, kind)
    except msgspec.ValidationError as exc:
        raise _as_config_error(str(exc)) from None


def _as_config_error(text: str) -> TidingsError:
    """msgspec's `... - at `$.a[0].b`` as a field path `a[0].b` and the problem alone."""
    found = re.match(r"^(.*?)(?: - at `\$\.?(.*)`)?$", text)
    assert found is not None
    detail, path = found.group(1), found.group(2) or "$"
    unknown = re.match(r"Object contains unknown field `(.+)`", detail)
    if unknown:
        path = unknown.group(1) if path == "$" else f"{path}.{unknown.group(1)}"
        detail = "unknown field"
    return config_error(path, detail)


def is_thesis(raw: Any) -> bool:
    return isinstance(raw, dict) and "applicationMode" in raw


def parse_config(raw: Any) -> SimConfig:
    """A validated native configuration from either format."""
    if not isinstance(raw, dict):
        raise config_error("$", "expected a JSON object")
    if is_thesis(raw):
        from tidings.sim.thesis import native

        thesis = _typed(raw, ThesisConfig)
        check_thesis(thesis)
        return check(native(thesis))
    return check(_typed(raw, SimConfig))


def load_config(path: Path) -> SimConfig:
    try:
        raw = msgspec.json.decode(path.read_bytes())
    except OSError as exc:
        raise config_error(str(path), f"cannot read the configuration: {exc.strerror}") from None
    except msgspec.DecodeError as exc:
        raise config_error(str(path), f"not valid JSON: {exc}") from None
    return parse_config(raw)


def _positive(value: float, field: str, zero_ok: bool = False) -> None:
    if value < 0 or (value == 0 and not zero_ok):
        raise config_error(field, f"must be {'at least 0' if zero_ok else 'positive'}")


def check_url(url: str | None, field: str) -> None:
    if url is not None and not re.match(r"^https?://[^\s/]+", url):
        raise config_error(field, "expected an http:// or https:// URL")


def check(config: SimConfig) -> SimConfig:
    """Meaning checks the types cannot express; each error names its path."""
    check_url(config.url, "url")
    _positive(config.duration, "duration")
    _positive(config.drain, "drain", zero_ok=True)
    _positive(config.quiet, "quiet")
    _positive(config.warmup, "warmup", zero_ok=True)
    _positive(config.prefetch, "prefetch")
    for i, group in enumerate(config.subscribers):
        _check_subscribers(group, f"subscribers[{i}]")
    for i, pub in enumerate(config.publishers):
        _check_publishers(pub, f"publishers[{i}]")
    return config


def on_broker(function: dict[str, Any], broker_url: str) -> dict[str, Any]:
    """A URL function given as a path (`/api/DetectLanguages`) is served by the broker the
    simulator runs against, wherever that is."""
    url = function.get("url")
    if isinstance(url, str) and url.startswith("/"):
        return function | {"url": broker_url.rstrip("/") + url}
    return function


def _check_subscribers(group: SubscriberGroup, at: str) -> None:
    _positive(group.count, f"{at}.count")
    try:
        if group.topics is not None:
            parse_topic_filters(group.topics, LIMITS, f"{at}.topics")
        if group.predicates is not None:
            parse_predicates(group.predicates, LIMITS, f"{at}.predicates")
        for j, function in enumerate(group.functions):
            somewhere = on_broker(dict(function), "http://broker")  # a path checks as a URL
            parse_function_spec(somewhere, f"{at}.functions[{j}]", LIMITS)
    except TidingsError as exc:
        raise config_error(exc.field or at, exc.message) from None
    for j, window in enumerate(group.offline):
        _positive(window.at, f"{at}.offline[{j}].at", zero_ok=True)
        _positive(window.seconds, f"{at}.offline[{j}].seconds")


def _check_publishers(pub: PublisherGroup, at: str) -> None:
    _positive(pub.count, f"{at}.count")
    _positive(pub.rate, f"{at}.rate")
    _positive(pub.start, f"{at}.start", zero_ok=True)
    if pub.publications is not None:
        _positive(pub.publications, f"{at}.publications")
    if not 0 <= pub.payload_bytes <= MAX_PAYLOAD_BYTES:
        raise config_error(f"{at}.payload_bytes", f"must be 0 to {MAX_PAYLOAD_BYTES}")
    if pub.pick_topic and not pub.topics:
        raise config_error(f"{at}.pick_topic", "needs topics to pick from")
    for key, value in pub.attributes.items():
        _check_attribute(value, f"{at}.attributes.{key}")


def _check_attribute(value: Any, at: str) -> None:
    """A scalar, `{"choice": [scalars]}` or `{"uniform": [low, high]}`."""
    if isinstance(value, str | int | float | bool):
        return
    if isinstance(value, dict) and set(value) == {"choice"}:
        choices = value["choice"]
        if isinstance(choices, list) and choices and all(_scalar(c) for c in choices):
            return
    if isinstance(value, dict) and set(value) == {"uniform"}:
        bounds = value["uniform"]
        if isinstance(bounds, list) and len(bounds) == 2 and all(_number(b) for b in bounds):
            return
    raise config_error(at, 'expected a scalar, {"choice": [...]} or {"uniform": [low, high]}')


def _scalar(value: Any) -> bool:
    return isinstance(value, str | int | float | bool)


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def check_thesis(config: ThesisConfig) -> None:
    check_url(config.base_url, "baseUrl")
    _positive(config.nodes_count, "nodesCount")
    picked = config.topics_metadata.nodes_count + config.functions_metadata.nodes_count
    if picked > config.nodes_count:
        raise config_error(
            "topicsMetadata.nodesCount",
            f"topic and function nodes ({picked}) exceed nodesCount ({config.nodes_count})",
        )
    for i, fn in enumerate(config.functions_metadata.functions):
        _check_thesis_function(fn, f"functionsMetadata.functions[{i}]")


def _check_thesis_function(fn: ThesisFunction, at: str) -> None:
    if fn.function_type == "url" and not fn.matching_function.startswith("/"):
        check_url(fn.matching_function, f"{at}.matchingFunction")  # a path: the broker's own
    if not fn.matching_function.strip():
        raise config_error(f"{at}.matchingFunction", "must not be empty")
    if not fn.subscription_topic.strip():
        raise config_error(f"{at}.subscriptionTopic", "must not be empty")


SIMULATION_HEADER = "Tidings-Simulation"
SIMULATION_NAME_MAX = 100  # the broker's bound on the header


def marks(config: SimConfig) -> dict[str, str]:
    """The header every call of the run carries, so the broker keeps its subscribers and
    its traffic apart from the real ones (the console's overview): the run's name, in
    printable ASCII as a header must be."""
    name = "".join(c if " " <= c <= "~" else "?" for c in config.name).strip()
    return {SIMULATION_HEADER: name[:SIMULATION_NAME_MAX] or "sim"}
