"""Many topics at once on Spark (section IV-C: topics are independent).

A table of topics (Parquet or JSON Lines; per row `topic`, `publishers` [{client, sizes}],
`subscribers`, `ratio`, `max_ms`, optional `modes`) over one world (regions, L, LR, alpha,
beta) is solved with `mapInArrow`: each partition is one Python worker that decodes its rows
into `Topic`s and runs the same solver as `tidings placement solve`. One row out per topic;
a topic that does not fit the world (a client with no row in L, a bad ratio) gets its
`error` filled in instead of failing the others.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec

from tidings.errors import TidingsError, invalid
from tidings.placement.files import Topic, World, check_topic, to_instance
from tidings.placement.solver import solve

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame, SparkSession

INPUT_DDL = (
    "topic STRING, publishers ARRAY<STRUCT<client: BIGINT, sizes: ARRAY<DOUBLE>>>, "
    "subscribers ARRAY<BIGINT>, ratio DOUBLE, max_ms DOUBLE, modes ARRAY<STRING>"
)
OUTPUT_DDL = (
    "topic STRING, regions ARRAY<INT>, mode STRING, percentile_ms DOUBLE, cost DOUBLE, "
    "meets BOOLEAN, configurations BIGINT, seconds DOUBLE, error STRING"
)
COLUMNS = ("topic", "publishers", "subscribers", "ratio", "max_ms")


def solve_row(world: World, row: dict[str, Any]) -> dict[str, Any]:
    """One topic's answer, as `tidings placement solve` prints it, or its error."""
    name = row.get("topic")
    fields = {k: v for k, v in row.items() if k != "topic" and not (k == "modes" and v is None)}
    started = time.perf_counter()
    try:
        topic = msgspec.convert(fields, Topic)
        check_topic(topic, len(world.L), f"topic {name!r}")
    except msgspec.ValidationError as exc:
        return _failed(name, str(exc).replace("`$.", "`").replace("`$`", "the row"))
    except TidingsError as exc:
        return _failed(name, f"{exc.field}: {exc.message}")
    choice = solve(to_instance(world, topic))
    return {"topic": name, **choice.to_json(time.perf_counter() - started), "error": None}


def _failed(name: object, message: str) -> dict[str, Any]:
    empty = dict.fromkeys(("regions", "mode", "percentile_ms", "cost", "meets", "seconds"))
    return {"topic": name, **empty, "configurations": None, "error": message}


def read_topics(spark: SparkSession, path: Path) -> DataFrame:
    """Parquet (a file or directory of them) or JSON Lines, with the input's types."""
    from pyspark.sql import functions as F

    if not path.exists():
        raise invalid(str(path), "no such file or directory")
    parquet = path.suffix == ".parquet" or (path.is_dir() and any(path.glob("*.parquet")))
    if parquet:
        frame = spark.read.parquet(str(path))
    else:
        frame = spark.read.schema(INPUT_DDL).json(str(path))
    missing = [c for c in COLUMNS if c not in frame.columns]
    if missing:
        raise invalid(missing[0], f"{path}: the topics table has no column {missing[0]!r}")
    if "modes" not in frame.columns:
        frame = frame.withColumn("modes", F.lit(None).cast("array<string>"))
    target = spark.createDataFrame([], INPUT_DDL).schema
    return frame.select(*(F.col(f.name).cast(f.dataType).alias(f.name) for f in target.fields))


def solve_topics(frame: DataFrame, world: World, partitions: int) -> DataFrame:
    """One output row per topic; each partition solved by one Python worker."""
    encoded = msgspec.json.encode(world)
    broadcast = frame.sparkSession.sparkContext.broadcast(encoded)

    def per_partition(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        import pyarrow as pa

        from tidings.placement.many_topics import output_schema, solve_row

        here = msgspec.json.decode(broadcast.value, type=World)
        for batch in batches:
            rows = [solve_row(here, row) for row in batch.to_pylist()]
            yield pa.RecordBatch.from_pylist(rows, schema=output_schema())

    return frame.repartition(partitions).mapInArrow(per_partition, OUTPUT_DDL)


def write_answers(frame: DataFrame, out: Path, fmt: str) -> None:
    writer = frame.write.mode("overwrite")
    if fmt == "parquet":
        writer.parquet(str(out))
    else:
        writer.json(str(out))


def output_schema() -> pa.Schema:
    import pyarrow as pa

    return pa.schema(
        [
            ("topic", pa.string()),
            ("regions", pa.list_(pa.int32())),
            ("mode", pa.string()),
            ("percentile_ms", pa.float64()),
            ("cost", pa.float64()),
            ("meets", pa.bool_()),
            ("configurations", pa.int64()),
            ("seconds", pa.float64()),
            ("error", pa.string()),
        ]
    )
