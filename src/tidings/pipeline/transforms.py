"""Pure DataFrame -> DataFrame transforms: the matching semantics of
`tidings.matching.semantics`, expressed in Spark.

`pubs` is the valid part of `eventlog.parse_publications` (id, line, published_at, topics,
attributes, function_types); the subscription frames come from `snapshot.to_frames`.
Every matcher answers (pub_id, sub_id, subscriber_id); `deliveries` folds them into one
delivery per (publication, subscriber).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

import orjson

from tidings.config import FunctionSettings
from tidings.model import Publication, subscription_from_json
from tidings.sandbox import FunctionRunner

if TYPE_CHECKING:
    import pandas as pd
    from pyspark.sql import DataFrame

    from tidings.pipeline.snapshot import SnapshotFrames

MATCH_SCHEMA = "pub_id string, sub_id string, subscriber_id string"
MATCH_COLUMNS = ["pub_id", "sub_id", "subscriber_id"]

_TOPIC_PREFIXES = (
    "transform(sequence(0, size(split(topic, '/'))), "
    "j -> array_join(slice(split(topic, '/'), 1, j), '/'))"
)
_SAME_VALUE = "CASE t WHEN 0 THEN a_bool = bool WHEN 1 THEN a_num = num ELSE a_str = str END"
_ORDERED = "a_t = t AND t IN (1, 2) AND CASE t WHEN 1 THEN a_num {op} num ELSE a_str {op} str END"
# One SQL condition per operator; `a_*` is the publication's attribute, the rest the predicate.
PREDICATE_HOLDS = f"""CASE op
  WHEN 'exists' THEN true
  WHEN '=' THEN a_t = t AND {_SAME_VALUE}
  WHEN '!=' THEN a_t = t AND NOT ({_SAME_VALUE})
  WHEN '<' THEN {_ORDERED.format(op="<")}
  WHEN '<=' THEN {_ORDERED.format(op="<=")}
  WHEN '>' THEN {_ORDERED.format(op=">")}
  WHEN '>=' THEN {_ORDERED.format(op=">=")}
  WHEN 'prefix' THEN a_t = 2 AND t = 2 AND startswith(a_str, str)
  WHEN 'suffix' THEN a_t = 2 AND t = 2 AND endswith(a_str, str)
  WHEN 'contains' THEN a_t = 2 AND t = 2 AND contains(a_str, str)
  ELSE false END"""


def topic_matches(pubs: DataFrame, topics: DataFrame) -> DataFrame:
    """Explode each publication's topics into their literal prefixes and join the filters
    on them: an exact filter must equal the topic, a pattern must match its regex."""
    from pyspark.sql import functions as F

    exploded = pubs.select(F.col("id").alias("pub_id"), F.explode("topics").alias("topic"))
    keyed = exploded.withColumn("prefix", F.explode(F.expr(_TOPIC_PREFIXES)))
    joined = keyed.join(topics, "prefix").where(
        "(regex IS NULL AND topic = filter) OR (regex IS NOT NULL AND topic RLIKE regex)"
    )
    return joined.select(*MATCH_COLUMNS).distinct()


_VALUE_KEY = (
    "concat({p}t, ':', CASE {p}t WHEN 0 THEN cast({p}bool AS string) "
    "WHEN 1 THEN cast({p}num + 0.0 AS string) ELSE {p}str END)"
)  # `+ 0.0` turns -0.0 into 0.0, which Python holds equal


def attribute_rows(pubs: DataFrame) -> DataFrame:
    """(pub_id, key, a_t, a_num, a_str, a_bool, vkey): one row per attribute."""
    from pyspark.sql import functions as F

    exploded = pubs.select(F.col("id").alias("pub_id"), F.explode("attributes").alias("a"))
    return exploded.select(
        "pub_id",
        F.col("a.key").alias("key"),
        F.col("a.t").alias("a_t"),
        F.col("a.num").alias("a_num"),
        F.col("a.str").alias("a_str"),
        F.col("a.bool").alias("a_bool"),
    ).withColumn("vkey", F.expr(_VALUE_KEY.format(p="a_")))


def predicate_hits(attributes: DataFrame, predicates: DataFrame) -> DataFrame:
    """(pub_id, sub_id, subscriber_id, n_pos, pidx) for each predicate that holds. Equality
    (and `in`) is an equi-join on (key, typed value), the index of the counting algorithm;
    the other operators join on the key and test the condition."""
    from pyspark.sql import functions as F

    columns = ["pub_id", "sub_id", "subscriber_id", "n_pos", "pidx"]
    equal = predicates.where("op = '='").withColumn("vkey", F.expr(_VALUE_KEY.format(p="")))
    eq_hits = attributes.join(equal.select(*columns[1:], "key", "vkey"), ["key", "vkey"])
    other = attributes.drop("vkey").join(predicates.where("op != '='"), "key")
    return eq_hits.select(*columns).unionByName(other.where(PREDICATE_HOLDS).select(*columns))


def content_matches(pubs: DataFrame, predicates: DataFrame, absent: DataFrame) -> DataFrame:
    """The counting algorithm: the predicates that hold are counted per (publication,
    subscription), matched when the count is the subscription's number of positive
    predicates; then `exists: false` predicates veto where the key is present."""
    from pyspark.sql import functions as F

    attributes = attribute_rows(pubs)
    counted = (
        predicate_hits(attributes, predicates)
        .groupBy("pub_id", "sub_id", "subscriber_id", "n_pos")
        .agg(F.countDistinct("pidx").alias("held"))
        .where("held = n_pos")
        .select(*MATCH_COLUMNS)
    )
    vacuous = (
        absent.where("n_pos = 0")
        .select("sub_id", "subscriber_id")
        .distinct()
        .crossJoin(pubs.select(F.col("id").alias("pub_id")))
        .select(*MATCH_COLUMNS)
    )
    vetoes = attributes.join(absent, "key").select("pub_id", "sub_id").distinct()
    return counted.unionByName(vacuous).join(vetoes, ["pub_id", "sub_id"], "left_anti")


def function_candidates(pubs: DataFrame, functions: DataFrame) -> DataFrame:
    """(pub_id, published_at, line, sub_id, subscriber_id, spec): a publication meets the
    active function subscriptions of the function types it names."""
    from pyspark.sql import functions as F

    exploded = pubs.select(
        F.col("id").alias("pub_id"),
        "published_at",
        "line",
        F.explode("function_types").alias("function_type"),
    )
    return exploded.join(functions, "function_type").select(
        "pub_id", "published_at", "line", "sub_id", "subscriber_id", "spec"
    )


OUTCOME_SCHEMA = (
    "pub_id string, published_at double, sub_id string, subscriber_id string, "
    "matched boolean, error string"
)
OUTCOME_COLUMNS = ["pub_id", "published_at", "sub_id", "subscriber_id", "matched", "error"]


def _evaluate_frames(
    settings: FunctionSettings,
) -> Callable[[Iterator[pd.DataFrame]], Iterator[pd.DataFrame]]:
    def evaluate(frames: Iterator[pd.DataFrame]) -> Iterator[pd.DataFrame]:
        import pandas as pd

        from tidings.pipeline.index import runner_host

        for frame in frames:
            rows = []
            if len(frame):
                host = runner_host(settings)
                rows = host.call(_evaluate(host.runner, frame))
            yield pd.DataFrame(rows, columns=OUTCOME_COLUMNS)

    return evaluate


async def _evaluate(runner: FunctionRunner, frame: pd.DataFrame) -> list[tuple[object, ...]]:
    """Every call's outcome. A failed call matches only when its subscription fails open
    (the runner's rule)."""
    out: list[tuple[object, ...]] = []
    for pub_id, group in frame.groupby("pub_id", sort=False):
        publication = Publication.from_json(orjson.loads(group["line"].iloc[0]))
        subs = [subscription_from_json(orjson.loads(s)) for s in group["spec"]]
        by_id = {s.id: s for s in subs}
        for outcome in await runner.evaluate(publication, subs):
            sub = by_id[outcome.subscription_id]
            call = (str(pub_id), publication.published_at, sub.id, sub.subscriber_id)
            out.append((*call, outcome.matched, outcome.error))
    return out


def function_outcomes(
    pubs: DataFrame, functions: DataFrame, settings: FunctionSettings
) -> DataFrame:
    """Function subscriptions, run by the broker's sandboxed runner inside `mapInPandas`:
    one row per call (OUTCOME_SCHEMA), matched or not, failed or not."""
    candidates = function_candidates(pubs, functions)
    return candidates.mapInPandas(_evaluate_frames(settings), OUTCOME_SCHEMA)


def function_matches(outcomes: DataFrame) -> DataFrame:
    return outcomes.where("matched").select(*MATCH_COLUMNS)


def all_matches(
    pubs: DataFrame, frames: SnapshotFrames, outcomes: DataFrame | None = None
) -> DataFrame:
    """Topic, content and (given the function calls' outcomes) function matches, together."""
    found = topic_matches(pubs, frames.topics).unionByName(
        content_matches(pubs, frames.predicates, frames.absent)
    )
    if outcomes is not None:
        found = found.unionByName(function_matches(outcomes))
    return found


def deliveries(matches: DataFrame, pubs: DataFrame) -> DataFrame:
    """One row per (publication, subscriber): the matched subscription ids, sorted, and
    the publication's log line (the delivered body) and time."""
    from pyspark.sql import functions as F

    grouped = matches.groupBy("pub_id", "subscriber_id").agg(
        F.array_sort(F.collect_set("sub_id")).alias("subscription_ids")
    )
    bodies = pubs.select(F.col("id").alias("pub_id"), "line", "published_at")
    return grouped.join(bodies, "pub_id").withColumnRenamed("pub_id", "publication_id")


def for_subscriber(frames: SnapshotFrames, subscriber_id: str) -> SnapshotFrames:
    """The same snapshot restricted to one subscriber's subscriptions (replay)."""
    from tidings.pipeline.snapshot import SnapshotFrames

    def only(df: DataFrame) -> DataFrame:
        return df.where(df.subscriber_id == subscriber_id)

    return SnapshotFrames(
        frames.version,
        only(frames.topics),
        only(frames.predicates),
        only(frames.absent),
        only(frames.functions),
    )


def since(pubs: DataFrame, epoch_s: float | None) -> DataFrame:
    return pubs if epoch_s is None else pubs.where(pubs.published_at >= epoch_s)
