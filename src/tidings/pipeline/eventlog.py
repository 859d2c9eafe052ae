"""The read side of the event logs (docs/eventlog.md): schemas, parsing, quarantine.

Each publication line is parsed in Python (inside `mapInPandas`) because attribute values
keep their JSON type (number, string, boolean), which matching depends on and which a
single Spark schema cannot hold. A line that is not a valid publication is kept with the
reason, so a job can quarantine it instead of failing.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

if TYPE_CHECKING:
    import pandas as pd
    from pyspark.sql import DataFrame, SparkSession

ATTRIBUTE = "struct<key:string,t:int,num:double,str:string,bool:boolean>"
PARSED_SCHEMA = (
    "line string, id string, published_at double, topics array<string>, "
    f"attributes array<{ATTRIBUTE}>, function_types array<string>, error string"
)
DELIVERY_SCHEMA = (
    "publication_id string, subscriber_id string, subscription_ids array<string>, "
    "kind string, event string, at double, attempt int, _corrupt string"
)
ParsedRow = tuple[Any, ...]


def _strings(raw: Any, name: str) -> list[str]:
    if not isinstance(raw, list) or not all(isinstance(s, str) and s for s in raw):
        raise ValueError(f"{name} is not an array of non-empty strings")
    return raw


def _attribute(key: str, value: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"key": key, "t": 2, "num": None, "str": None, "bool": None}
    if isinstance(value, bool):
        return out | {"t": 0, "bool": value}
    if isinstance(value, int | float) and not (isinstance(value, float) and math.isnan(value)):
        return out | {"t": 1, "num": float(value)}
    if isinstance(value, str):
        return out | {"str": value}
    raise ValueError(f"attributes.{key} is not a string, number or boolean")


def _fields(line: str) -> ParsedRow:
    raw = orjson.loads(line)
    if not isinstance(raw, dict):
        raise ValueError("not a JSON object")
    pid, at = raw.get("id"), raw.get("published_at")
    if not isinstance(pid, str) or not pid:
        raise ValueError("id is missing or not a string")
    if isinstance(at, bool) or not isinstance(at, int | float):
        raise ValueError("published_at is missing or not a number")
    attributes = raw.get("attributes") or {}
    if not isinstance(attributes, dict):
        raise ValueError("attributes is not an object")
    return (
        line,
        pid,
        float(at),
        _strings(raw.get("topics") or [], "topics"),
        [_attribute(k, v) for k, v in attributes.items()],
        _strings(raw.get("function_types") or [], "function_types"),
        None,
    )


def parse_line(line: str) -> ParsedRow:
    """One log line as a PARSED_SCHEMA row; a malformed line has only `line` and `error`."""
    try:
        return _fields(line)
    except (orjson.JSONDecodeError, ValueError) as exc:
        reason = f"invalid JSON: {exc}" if isinstance(exc, orjson.JSONDecodeError) else str(exc)
        return (line, None, None, None, None, None, reason)


def _parse_frames(frames: Iterator[pd.DataFrame]) -> Iterator[pd.DataFrame]:
    import pandas as pd

    columns = ["line", "id", "published_at", "topics", "attributes", "function_types", "error"]
    for frame in frames:
        rows = [parse_line(v) for v in frame["value"] if v is not None and v.strip()]
        yield pd.DataFrame(rows, columns=columns)


def parse_publications(lines: DataFrame) -> DataFrame:
    """Text lines (column `value`) -> PARSED_SCHEMA; works on batch and streaming frames."""
    return lines.mapInPandas(_parse_frames, PARSED_SCHEMA)


def valid(parsed: DataFrame) -> DataFrame:
    return parsed.where("error IS NULL").drop("error")


def malformed(parsed: DataFrame) -> DataFrame:
    return parsed.where("error IS NOT NULL").select("line", "error")


def read_publication_lines(spark: SparkSession, directory: Path) -> DataFrame:
    """The finished publication log files (names beginning with `_` are in progress)."""
    directory.mkdir(parents=True, exist_ok=True)
    return spark.read.text(str(directory))


def stream_publication_lines(spark: SparkSession, directory: Path, max_files: int) -> DataFrame:
    directory.mkdir(parents=True, exist_ok=True)
    reader = spark.readStream.format("text").option("maxFilesPerTrigger", max_files)
    return reader.load(str(directory))


def read_deliveries(spark: SparkSession, directory: Path) -> DataFrame:
    """Delivery events; a malformed line lands in `_corrupt` with the other columns null."""
    directory.mkdir(parents=True, exist_ok=True)
    return (
        spark.read.schema(DELIVERY_SCHEMA)
        .option("mode", "PERMISSIVE")
        .option("columnNameOfCorruptRecord", "_corrupt")
        .json(str(directory))
    )
