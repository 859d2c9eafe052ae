"""The `index` algorithm: every Python worker matches its publications with the broker's
own in-process indexes, built once per subscription snapshot and kept while it lasts.

The driver packs a snapshot as the store streams it and broadcasts it once per version:
the interval-index content subscriptions as numpy columns (`columnar`), the few others as
plain tuples. A worker builds one `Matcher` from it (the columns through the bulk
`add_content_arrays`), the broker's own, the first time it meets that snapshot's token, and
reuses it for every later partition and batch. Function subscriptions run through the broker's
sandboxed runner in the same pass. One narrow pass over the raw log lines parses them, sets
malformed ones aside with their reasons, matches, and emits the deliveries, one row per
(publication, subscriber): no shuffle, no skew, and one Spark job per partition, which
keeps a micro-batch short.
"""

from __future__ import annotations

import asyncio
import threading
import uuid
from collections.abc import Callable, Coroutine, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

import orjson

from tidings import heap
from tidings.config import FunctionSettings
from tidings.matching.engine import Event, Matcher
from tidings.model import Op, Predicate, Publication, Subscription, subscription_from_json
from tidings.pipeline import eventlog
from tidings.pipeline.columnar import Columns, ColumnsBuilder, eligible
from tidings.pipeline.health import FunctionCall
from tidings.sandbox import FunctionRunner
from tidings.sandbox.index import FunctionIndex

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark import Broadcast
    from pyspark.sql import DataFrame, SparkSession

PackedPredicate = tuple[str, str, Any]
Found = dict[str, set[str]]  # subscriber id -> ids of its matching subscriptions
T = TypeVar("T")
MATCH_CHUNK = 64
# Lines per output batch: a publication can have hundreds of deliveries (a row each), and a
# whole Arrow batch (10,000 lines) of them would take gigabytes of Python rows per worker.
LINES_PER_PASS = 1000


@dataclass(frozen=True, slots=True)
class Packed:
    """A snapshot as arrays and plain tuples: cheap to pickle, broadcast and rebuild."""

    token: str  # unique per snapshot taken on the driver
    topics: list[tuple[str, str, tuple[str, ...]]]
    content: list[tuple[str, str, tuple[PackedPredicate, ...]]]  # what `columns` cannot hold
    functions: list[tuple[str, str, str]]  # sub id, function type, Subscription JSON
    columns: Columns  # the interval-index content subscriptions, usually nearly all

    def __len__(self) -> int:
        return len(self.topics) + len(self.content) + len(self.functions) + len(self.columns)


def pack(version: int, subscriptions: Iterable[Subscription], columnar: bool = True) -> Packed:
    """Pack subscriptions as they stream past, holding none of them: content subscriptions
    the interval index takes go to columns (unless `columnar` is off: the reference path),
    the rest to tuples. Suspended function subscriptions are left out."""
    columns = ColumnsBuilder()
    topics: list[tuple[str, str, tuple[str, ...]]] = []
    content: list[tuple[str, str, tuple[PackedPredicate, ...]]] = []
    functions: list[tuple[str, str, str]] = []
    for sub in subscriptions:
        if sub.kind == "topic":
            topics.append((sub.id, sub.subscriber_id, sub.topics))
        elif sub.kind == "content":
            if columnar and eligible(sub.id, sub.predicates):
                columns.add(sub.id, sub.subscriber_id, sub.predicates)
            else:
                preds = tuple((p.key, p.op.value, p.value) for p in sub.predicates)
                content.append((sub.id, sub.subscriber_id, preds))
        elif sub.function is not None and sub.status == "active":
            spec = orjson.dumps(sub.to_json()).decode()
            functions.append((sub.id, sub.function.function_type, spec))
    token = f"{version}-{uuid.uuid4().hex}"
    return Packed(token, topics, content, functions, columns.build())


class SnapshotIndex:
    """Topic, content and function subscriptions of one snapshot, ready to match."""

    def __init__(self, packed: Packed) -> None:
        self.matcher = Matcher()  # the broker's matcher, so the same answers
        for sid, owner, filters in packed.topics:
            self.matcher.add_topic(sid, owner, filters)
        self.matcher.add_contents((sid, owner, _predicates(p)) for sid, owner, p in packed.content)
        packed.columns.load_into(self.matcher)  # the bulk path
        self.matcher.wait()  # match against the finished index, not a half-merged one
        self.functions = FunctionIndex()  # the broker's function index, so the same choice
        for _, _function_type, spec in packed.functions:
            self.functions.add(subscription_from_json(orjson.loads(spec)))

    def match(self, pubs: Sequence[Publication]) -> list[Found]:
        """Topic and content matches of each publication, MATCH_CHUNK at a time: the batch
        matcher's working memory grows with batch x candidates (gigabytes for 1,000 W-A
        events against 10^5 subscriptions), and small chunks are as fast per event."""
        return [
            f
            for i in range(0, len(pubs), MATCH_CHUNK)
            for f in self._match(pubs[i : i + MATCH_CHUNK])
        ]

    def _match(self, pubs: Sequence[Publication]) -> list[Found]:
        answers = self.matcher.match_batch([Event(p.topics, p.attributes) for p in pubs])
        return [{owner: set(ids) for owner, ids in a.items()} for a in answers]

    def function_subscriptions(self, pub: Publication) -> list[Subscription]:
        """The active function subscriptions of the function types a publication names,
        as the broker chooses them."""
        return self.functions.candidates(pub)


def _predicates(packed: tuple[PackedPredicate, ...]) -> tuple[Predicate, ...]:
    return tuple(Predicate(key, Op(op), value) for key, op, value in packed)


_latest: tuple[str, SnapshotIndex] | None = None  # per process: a worker, or the driver


def cached_index(token: str, load: Callable[[], Packed]) -> SnapshotIndex:
    """This process's index for this snapshot, built on first use; an older one is dropped."""
    global _latest
    if _latest is None or _latest[0] != token:
        _latest = None  # free the old index before building the new one
        _latest = (token, SnapshotIndex(load()))
        if len(_latest[1].matcher) >= heap.SETTLE_FROM:
            heap.settle_heap()  # the old one is collected, the new one kept out of sight
    return _latest[1]


class RunnerHost:
    """The broker's sandboxed runner, kept by a Python worker across tasks on an event loop
    of its own, so that its sandbox processes start once per worker, not per partition."""

    def __init__(self, settings: FunctionSettings) -> None:
        self.loop = asyncio.new_event_loop()
        threading.Thread(
            target=self.loop.run_forever, name="tidings-functions", daemon=True
        ).start()
        self.runner = self.call(_create_runner(settings))

    def call(self, coro: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result()

    def close(self) -> None:
        self.call(self.runner.aclose())
        self.loop.call_soon_threadsafe(self.loop.stop)


async def _create_runner(settings: FunctionSettings) -> FunctionRunner:
    from tidings.sandbox.runner import create_runner

    return create_runner(settings)


_hosts: dict[FunctionSettings, RunnerHost] = {}  # per Python worker process


def runner_host(settings: FunctionSettings) -> RunnerHost:
    host = _hosts.get(settings)
    if host is None:
        host = _hosts[settings] = RunnerHost(settings)
    return host


async def add_function_matches(
    runner: FunctionRunner,
    index: SnapshotIndex,
    pubs: Sequence[Publication],
    found: list[Found],
) -> list[FunctionCall]:
    """Run the function subscriptions each publication meets in the sandbox; a call that
    failed matches only when its subscription fails open (the runner's rule). Returns
    every call's outcome, for the driver to count failures by."""
    work = [(i, index.function_subscriptions(p)) for i, p in enumerate(pubs)]
    work = [(i, subs) for i, subs in work if subs]
    outcomes = await asyncio.gather(*(runner.evaluate(pubs[i], subs) for i, subs in work))
    calls = []
    for (i, subs), results in zip(work, outcomes, strict=True):
        owner = {s.id: s.subscriber_id for s in subs}
        for outcome in results:
            sid = outcome.subscription_id
            calls.append(FunctionCall(pubs[i].published_at, pubs[i].id, sid, outcome.error))
            if outcome.matched:
                found[i].setdefault(owner[sid], set()).add(sid)
    return calls


PASS_SCHEMA = (
    "publication_id string, subscriber_id string, subscription_ids array<string>, "
    "line string, published_at double, error string, valid int"
)


def _arrow_schema() -> pa.Schema:
    import pyarrow as pa

    return pa.schema(
        [
            ("publication_id", pa.string()),
            ("subscriber_id", pa.string()),
            ("subscription_ids", pa.list_(pa.string())),
            ("line", pa.string()),
            ("published_at", pa.float64()),
            ("error", pa.string()),
            ("valid", pa.int32()),
        ]
    )


@dataclass(frozen=True, slots=True)
class MatchOptions:
    """What every partition needs besides the lines: the snapshot and the batch's options."""

    token: str
    snapshot: Broadcast[Packed] | None  # None when the batch is matched in the driver
    functions: FunctionSettings | None = None
    since: float | None = None


def match_lines_batch(
    lines: Sequence[str | None], index: SnapshotIndex, options: MatchOptions
) -> pa.RecordBatch:
    """Log lines -> one row per delivery (`subscriber_id` set), one per function call
    (`publication_id` and `subscription_ids` set, no subscriber; `error` when it failed),
    one per malformed line (`line`, `error`), and one counting the valid publications
    (`valid`)."""
    import pyarrow as pa

    parsed = [eventlog.parse_line(text) for text in lines if text is not None and text.strip()]
    bad = [(None, None, None, row[0], None, row[6], None) for row in parsed if row[6] is not None]
    good = [row for row in parsed if row[6] is None]
    if options.since is not None:
        good = [row for row in good if row[2] >= options.since]
    pubs = [Publication.from_json(orjson.loads(row[0])) for row in good]
    found = index.match(pubs)
    calls: list[FunctionCall] = []
    if options.functions is not None and any(index.function_subscriptions(p) for p in pubs):
        host = runner_host(options.functions)
        calls = host.call(add_function_matches(host.runner, index, pubs, found))
    rows: list[tuple[Any, ...]] = [
        (pub.id, owner, sorted(ids), row[0] if n == 0 else None, pub.published_at, None, None)
        for pub, row, matches in zip(pubs, good, found, strict=True)
        for n, (owner, ids) in enumerate(matches.items())
    ]  # the line (the body) travels once per publication, on its first delivery
    rows += [
        (c.publication_id, None, [c.subscription_id], None, c.published_at, c.error, None)
        for c in calls
    ]
    rows += [*bad, (None, None, None, None, None, None, len(pubs))]
    schema = _arrow_schema()
    columns = zip(*rows, strict=True)
    arrays = [pa.array(list(c), type=f.type) for c, f in zip(columns, schema, strict=True)]
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


def match_values(
    lines: Sequence[str | None], index: SnapshotIndex, options: MatchOptions
) -> Iterator[pa.RecordBatch]:
    """`match_lines_batch` over LINES_PER_PASS lines at a time."""
    for start in range(0, len(lines), LINES_PER_PASS):
        yield match_lines_batch(lines[start : start + LINES_PER_PASS], index, options)


def match_here(
    lines: Sequence[str | None], packed: Packed, options: MatchOptions
) -> Iterator[dict[str, Any]]:
    """The same pass in this process: the rows of PASS_SCHEMA as dicts. The driver uses it
    for a batch so small that a Spark job would cost more than the matching."""
    index = cached_index(packed.token, lambda: packed)
    for batch in match_values(lines, index, options):
        yield from batch.to_pylist()


def _shared(options: MatchOptions) -> Packed:
    if options.snapshot is None:
        raise ValueError("a batch matched in the workers needs the snapshot broadcast")
    return options.snapshot.value


def _matcher(
    options: MatchOptions,
) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    def match_partition(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            index = cached_index(options.token, lambda: _shared(options))
            yield from match_values(batch.column("value").to_pylist(), index, options)

    return match_partition


class Broadcaster:
    """The driver's side: one broadcast per snapshot, released when the next replaces it."""

    def __init__(self, spark: SparkSession) -> None:
        self.spark = spark
        self._current: tuple[Packed, Broadcast[Packed]] | None = None

    def share(self, packed: Packed) -> Broadcast[Packed]:
        if self._current is not None and self._current[0].token == packed.token:
            return self._current[1]
        if self._current is not None:
            self._current[1].unpersist()
        shared = self.spark.sparkContext.broadcast(packed)
        self._current = (packed, shared)
        return shared


def match_lines(lines: DataFrame, options: MatchOptions) -> DataFrame:
    """Parse, quarantine and match raw log lines (column `value`) in one narrow pass: the
    rows of PASS_SCHEMA. Deliveries are one row per (publication, subscriber), with the
    matched subscription ids sorted and the publication's log line and time."""
    return lines.select("value").mapInArrow(_matcher(options), PASS_SCHEMA)
