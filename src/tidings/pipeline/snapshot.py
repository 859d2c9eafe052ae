"""A consistent, versioned snapshot of the subscriptions, as Spark DataFrames.

The store's version counter is read before and after listing the subscriptions; the list
counts only when both agree, so a batch sees a subscription change entirely or not at all.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

import orjson

from tidings.errors import ErrorCode, TidingsError
from tidings.model import Op, Predicate, Subscription, is_pattern

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

TOPIC_SCHEMA = "sub_id string, subscriber_id string, filter string, prefix string, regex string"
PREDICATE_SCHEMA = (
    "sub_id string, subscriber_id string, pidx int, n_pos int, key string, op string, "
    "t int, num double, str string, bool boolean"
)
ABSENT_SCHEMA = "sub_id string, subscriber_id string, n_pos int, key string"
FUNCTION_SCHEMA = "sub_id string, subscriber_id string, function_type string, spec string"
T = TypeVar("T")


class SubscriptionSource(Protocol):
    """What a snapshot needs of a Store."""

    def iter_subscriptions(self, page: int = ...) -> Iterator[Subscription]: ...
    def subscriptions_version(self) -> int: ...


def take_snapshot(
    store: SubscriptionSource,
    build: Callable[[int, Iterable[Subscription]], T],
    attempts: int = 20,
    pause_s: float = 0.05,
) -> tuple[int, T]:
    """(version, what `build` made of the subscriptions it was streamed), read again until
    no change happened while reading. `build` consumes the stream as it comes, so a large
    snapshot need not be held as Subscription objects (see `index.pack`)."""
    for _ in range(attempts):
        before = store.subscriptions_version()
        built = build(before, store.iter_subscriptions())
        if store.subscriptions_version() == before:
            return before, built
        del built  # a build of a changed listing: free it before reading again
        time.sleep(pause_s)
    raise TidingsError(
        ErrorCode.UNAVAILABLE, detail="subscriptions kept changing; no stable snapshot"
    )


def pattern_regex(topic_filter: str) -> str:
    """A filter as an anchored regex: `*` one segment, a trailing `#` zero or more."""
    segments = topic_filter.split("/")
    tail = ""
    if segments[-1] == "#":
        segments.pop()
        tail = "(/.*)?" if segments else ".*"
    body = "/".join("[^/]+" if s == "*" else re.escape(s) for s in segments)
    return f"^{body}{tail}$"


def literal_prefix(topic_filter: str) -> str:
    """The segments before the first wildcard, the key a pattern is joined on."""
    segments = topic_filter.split("/")
    cut = next(i for i, s in enumerate(segments) if s in ("*", "#"))
    return "/".join(segments[:cut])


def topic_rows(sub: Subscription) -> list[tuple[Any, ...]]:
    return [
        (sub.id, sub.subscriber_id, f, literal_prefix(f), pattern_regex(f))
        if is_pattern(f)
        else (sub.id, sub.subscriber_id, f, f, None)
        for f in sub.topics
    ]


def _typed(value: Any) -> tuple[int, float | None, str | None, bool | None]:
    if isinstance(value, bool):
        return 0, None, None, value
    if isinstance(value, int | float):
        return 1, float(value), None, None
    return 2, None, str(value), None


def _is_absence(p: Predicate) -> bool:
    return p.op is Op.EXISTS and p.value is False


def predicate_rows(sub: Subscription) -> list[tuple[Any, ...]]:
    """One row per positive predicate (per value of an `in`), numbered by predicate."""
    n_pos = sum(1 for p in sub.predicates if not _is_absence(p))
    rows = []
    for pidx, p in enumerate(sub.predicates):
        if _is_absence(p):
            continue
        op = Op.EQ if p.op is Op.IN else p.op
        values = p.value if isinstance(p.value, tuple) else (p.value,)
        for v in values:
            rows.append((sub.id, sub.subscriber_id, pidx, n_pos, p.key, op.value, *_typed(v)))
    return rows


def absent_rows(sub: Subscription) -> list[tuple[Any, ...]]:
    n_pos = sum(1 for p in sub.predicates if not _is_absence(p))
    return [(sub.id, sub.subscriber_id, n_pos, p.key) for p in sub.predicates if _is_absence(p)]


def function_rows(sub: Subscription) -> list[tuple[Any, ...]]:
    if sub.function is None or sub.status != "active":
        return []
    spec = orjson.dumps(sub.to_json()).decode()
    return [(sub.id, sub.subscriber_id, sub.function.function_type, spec)]


@dataclass(frozen=True, slots=True)
class SnapshotFrames:
    """The subscriptions of one version, laid out for the transforms."""

    version: int
    topics: DataFrame
    predicates: DataFrame
    absent: DataFrame
    functions: DataFrame

    def unpersist(self) -> None:
        for frame in (self.topics, self.predicates, self.absent, self.functions):
            frame.unpersist()


def _frame(spark: SparkSession, rows: list[tuple[Any, ...]], schema: str) -> DataFrame:
    import pandas as pd

    columns = [c.strip().split(" ")[0] for c in schema.split(",")]
    return spark.createDataFrame(pd.DataFrame(rows, columns=columns), schema)


def to_frames(
    spark: SparkSession, version: int, subscriptions: Iterable[Subscription]
) -> SnapshotFrames:
    topics: list[tuple[Any, ...]] = []
    predicates: list[tuple[Any, ...]] = []
    absent: list[tuple[Any, ...]] = []
    functions: list[tuple[Any, ...]] = []
    for sub in subscriptions:
        if sub.kind == "topic":
            topics += topic_rows(sub)
        elif sub.kind == "content":
            predicates += predicate_rows(sub)
            absent += absent_rows(sub)
        else:
            functions += function_rows(sub)
    return SnapshotFrames(
        version,
        _frame(spark, topics, TOPIC_SCHEMA).cache(),
        _frame(spark, predicates, PREDICATE_SCHEMA).cache(),
        _frame(spark, absent, ABSENT_SCHEMA).cache(),
        _frame(spark, functions, FUNCTION_SCHEMA).cache(),
    )
