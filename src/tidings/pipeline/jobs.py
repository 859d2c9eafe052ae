"""The jobs: match (once or `--follow`, a Structured Streaming query with a checkpoint),
replay a time range, and the per-batch work they share. Reading and writing happen here;
the matching itself is `transforms`."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol

import orjson

from tidings.config import FunctionSettings, Settings
from tidings.pipeline import DRIVER_LINES, eventlog, index, transforms
from tidings.pipeline.health import FunctionCall, FunctionHealth, StatusStore
from tidings.pipeline.sink import QueueSink
from tidings.pipeline.snapshot import SnapshotFrames, SubscriptionSource, take_snapshot, to_frames

if TYPE_CHECKING:
    from pyspark import Broadcast
    from pyspark.sql import DataFrame, Row, SparkSession
    from pyspark.sql.streaming.query import StreamingQuery


@dataclass(frozen=True, slots=True)
class Paths:
    publications: Path
    quarantine: Path
    checkpoint: Path

    @classmethod
    def of(cls, settings: Settings) -> Paths:
        work = settings.data_dir / "pipeline"
        return cls(settings.log_dir / "publications", work / "quarantine", work / "checkpoint")


@dataclass(frozen=True, slots=True)
class BatchResult:
    batch: str
    publications: int
    quarantined: int
    enqueued: int
    version: int


OnProgress = Callable[[str, int, int], None]
"""(stage, done, total), total 0 when not known: a job says where it is (the CLI draws it)."""
Algorithm = Literal["index", "sql"]
ALGORITHMS: tuple[Algorithm, ...] = ("index", "sql")


class PipelineStore(SubscriptionSource, StatusStore, Protocol):
    """What the jobs need of a Store: the snapshot's reads, and suspending a function."""


class Subscriptions:
    """The versioned snapshot, laid out for either algorithm on first use and kept while
    the store's version stays the same. Each layout is built as the store streams the
    subscriptions, so the driver never holds them all as objects."""

    def __init__(self, spark: SparkSession, store: PipelineStore) -> None:
        self.spark = spark
        self.store = store
        self.version = -1
        self._frames: SnapshotFrames | None = None
        self._packed: index.Packed | None = None
        self._broadcaster = index.Broadcaster(spark)

    def refresh(self) -> None:
        """Forget the layouts if the subscriptions changed since they were taken."""
        if self.version >= 0 and self.store.subscriptions_version() == self.version:
            return
        if self._frames is not None:
            self._frames.unpersist()
        self._frames = self._packed = None

    def frames(self, subscriber_id: str | None = None) -> SnapshotFrames:
        """The snapshot as DataFrames (the `sql` algorithm)."""
        frames = self._frames
        if frames is None:
            taken: tuple[int, SnapshotFrames] = take_snapshot(
                self.store, partial(to_frames, self.spark)
            )
            self.version, frames = taken
            self._frames = frames
        if subscriber_id is None:
            return frames
        return transforms.for_subscriber(frames, subscriber_id)

    def packed(self, subscriber_id: str | None = None) -> index.Packed:
        """The snapshot packed (the `index` algorithm)."""
        if subscriber_id is not None:
            self.version, packed = take_snapshot(
                self.store,
                lambda version, subs: index.pack(
                    version, (s for s in subs if s.subscriber_id == subscriber_id)
                ),
            )
        elif self._packed is None:
            self.version, packed = take_snapshot(self.store, index.pack)
            self._packed = packed
        else:
            packed = self._packed
        return packed

    def share(self, packed: index.Packed) -> Broadcast[index.Packed]:
        """The packed snapshot broadcast to the workers, once per snapshot."""
        return self._broadcaster.share(packed)


@dataclass
class Matching:
    """What one batch needs: subscriptions, the sink, where bad lines go, and options."""

    subscriptions: Subscriptions
    sink: QueueSink
    quarantine: Path
    functions: FunctionSettings | None = None
    since: float | None = None
    subscriber_id: str | None = None
    algorithm: Algorithm = "index"
    # A batch of at most this many lines is matched in the driver (the `index` algorithm):
    # a Spark job with Python workers costs more than matching a few thousand lines.
    # 0 sends every batch to the workers.
    driver_lines: int = DRIVER_LINES
    health: FunctionHealth | None = None  # made on first use from `functions`
    on_progress: OnProgress | None = None  # each batch's stages: snapshot, matching, ...

    def _stage(self, stage: str, done: int = 0) -> None:
        if self.on_progress is not None:
            self.on_progress(stage, done, 0)

    def run(self, lines: DataFrame, batch: str) -> BatchResult:
        """Match one batch of raw log lines (column `value`) into the queues."""
        self._stage(SNAPSHOT)
        self.subscriptions.refresh()  # one snapshot for the whole batch
        if self.algorithm == "sql":
            return self._run_sql(eventlog.parse_publications(lines), batch)
        tally = Tally()
        rows = self._index_pass(lines)
        self._stage(MATCHING)
        added = self.sink.write_rows(self._counted(MATCHING, tally.deliveries(rows)))
        quarantined = write_quarantine(self.quarantine, batch, tally.malformed)
        self._count(tally.calls)
        return BatchResult(batch, tally.valid, quarantined, added, self.subscriptions.version)

    def _counted(self, stage: str, rows: Iterable[Any], every: int = 1000) -> Iterator[Any]:
        """`rows` as they pass, their count said every `every` rows."""
        if self.on_progress is None:
            yield from rows
            return
        n = 0
        for n, row in enumerate(rows, 1):
            yield row
            if n % every == 0:
                self._stage(stage, n)
        self._stage(stage, n)

    def _index_pass(self, lines: DataFrame) -> Iterable[Any]:
        """The rows of `index.PASS_SCHEMA`: from the driver for a small batch, else from the
        workers, partition by partition (a replay's deliveries may not fit in the driver)."""
        packed = self.subscriptions.packed(self.subscriber_id)
        few = few_lines(lines, self.driver_lines)
        if few is not None:
            options = index.MatchOptions(packed.token, None, self.functions, self.since)
            return index.match_here(few, packed, options)
        shared = self.subscriptions.share(packed)
        options = index.MatchOptions(packed.token, shared, self.functions, self.since)
        return index.match_lines(lines, options).toLocalIterator(prefetchPartitions=True)

    def _run_sql(self, parsed: DataFrame, batch: str) -> BatchResult:
        parsed = parsed.cache()
        outcomes = None
        try:
            bad = [(r["line"], r["error"]) for r in eventlog.malformed(parsed).collect()]
            quarantined = write_quarantine(self.quarantine, batch, bad)
            pubs = transforms.since(eventlog.valid(parsed), self.since)
            frames = self.subscriptions.frames(self.subscriber_id)
            self._stage(MATCHING)
            if self.functions is not None:  # cached: each call runs once, for both uses
                outcomes = transforms.function_outcomes(pubs, frames.functions, self.functions)
                outcomes = outcomes.cache()
            found = transforms.all_matches(pubs, frames, outcomes)
            rows = transforms.deliveries(found, pubs).toLocalIterator(prefetchPartitions=True)
            added = self.sink.write_rows(self._counted(MATCHING, rows))
            if outcomes is not None:
                self._count(calls_of(outcomes.collect()))
            version = self.subscriptions.version
            return BatchResult(batch, pubs.count(), quarantined, added, version)
        finally:
            parsed.unpersist()
            if outcomes is not None:
                outcomes.unpersist()

    def _count(self, calls: Iterable[FunctionCall]) -> None:
        """Function failures, by the broker's rule (see `health`); kept across batches."""
        if self.functions is None:
            return
        if self.health is None:
            store = self.subscriptions.store
            self.health = FunctionHealth(store, self.functions.failures_to_suspend)
        self.health.record(calls)


# The stages of a batch, as `Matching.on_progress` hears them (the count: deliveries so far).
SNAPSHOT = "snapshot of the subscriptions"
MATCHING = "matching and enqueueing"


def few_lines(lines: DataFrame, most: int) -> list[str | None] | None:
    """All the lines (column `value`) when there are at most `most`, else None. One Spark
    job with one task, which stops reading after `most` + 1 lines."""
    if most <= 0:
        return None
    rows = lines.select("value").coalesce(1).limit(most + 1).collect()
    return None if len(rows) > most else [row[0] for row in rows]


def calls_of(outcomes: Iterable[Row]) -> Iterator[FunctionCall]:
    """Function call outcomes (transforms.OUTCOME_SCHEMA) as calls to count."""
    for r in outcomes:
        yield FunctionCall(r["published_at"], r["pub_id"], r["sub_id"], r["error"])


class Tally:
    """Splits the rows of one index pass: deliveries pass through; function calls,
    malformed lines and the count of valid publications are kept."""

    def __init__(self) -> None:
        self.malformed: list[tuple[str, str]] = []
        self.calls: list[FunctionCall] = []
        self.valid = 0

    def deliveries(self, rows: Iterable[Row]) -> Iterator[Row]:
        for row in rows:
            if row["subscriber_id"] is not None:
                yield row
            elif row["publication_id"] is not None:
                sid = row["subscription_ids"][0]
                call = FunctionCall(row["published_at"], row["publication_id"], sid, row["error"])
                self.calls.append(call)
            elif row["error"] is not None:
                self.malformed.append((row["line"], row["error"]))
            else:
                self.valid += row["valid"]


def write_quarantine(directory: Path, batch: str, bad: list[tuple[str, str]]) -> int:
    """Write the malformed lines of a batch, with their reasons, to `<batch>.jsonl`
    (rewritten whole if the batch runs again); returns how many there were."""
    if not bad:
        return 0
    directory.mkdir(parents=True, exist_ok=True)
    text = b"".join(
        orjson.dumps({"batch": batch, "line": line, "error": error}) + b"\n" for line, error in bad
    )
    (directory / f"{batch}.jsonl").write_bytes(text)
    return len(bad)


def start_stream(
    spark: SparkSession,
    matching: Matching,
    paths: Paths,
    trigger_s: float | None,
    max_files: int = 1000,
    on_batch: Callable[[BatchResult], None] | None = None,
) -> StreamingQuery:
    """The streaming matcher over the publication log. `trigger_s` None processes what is
    there now and stops (availableNow); otherwise a micro-batch every `trigger_s` seconds.
    `on_batch` hears each batch's result as it ends."""
    lines = eventlog.stream_publication_lines(spark, paths.publications, max_files)

    cores = spark.sparkContext.defaultParallelism

    def each(batch_df: DataFrame, epoch: int) -> None:
        # The file source gives each small log file a partition of its own; a few tasks
        # per batch, not one per file, keep a micro-batch short.
        lines = batch_df.coalesce(cores)
        result = matching.run(lines, f"batch-{epoch:08d}")
        if on_batch is not None:
            on_batch(result)

    writer = lines.writeStream.foreachBatch(each).option(
        "checkpointLocation", str(paths.checkpoint)
    )
    if trigger_s is None:
        writer = writer.trigger(availableNow=True)
    else:
        writer = writer.trigger(processingTime=f"{int(trigger_s * 1000)} milliseconds")
    return writer.start()


def stop(query: StreamingQuery, wait_s: float = 30.0) -> None:
    """Stop after the running micro-batch, if any, has finished: interrupting one is safe
    (it runs again from the checkpoint) but makes Spark report the interruption as an
    error, and a long Python traceback in it overflows Spark's stack."""
    deadline = time.monotonic() + wait_s
    while query.status["isTriggerActive"] and time.monotonic() < deadline:
        time.sleep(0.05)
    query.stop()


def match_available(
    spark: SparkSession,
    matching: Matching,
    paths: Paths,
    on_batch: Callable[[BatchResult], None] | None = None,
) -> list[BatchResult]:
    """Match every publication logged since the checkpoint, then stop."""
    results: list[BatchResult] = []

    def each(result: BatchResult) -> None:
        results.append(result)
        if on_batch is not None:
            on_batch(result)

    query = start_stream(spark, matching, paths, None, on_batch=each)
    query.awaitTermination()
    return results


def replay(spark: SparkSession, matching: Matching, paths: Paths) -> BatchResult:
    """Re-match the whole log (from `matching.since`) against the current subscriptions and
    enqueue what is missing; what was delivered already is not delivered again."""
    lines = eventlog.read_publication_lines(spark, paths.publications)
    batch = f"replay-{int(time.time() * 1000)}"
    return matching.run(lines, batch)
