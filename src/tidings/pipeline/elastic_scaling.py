"""Speedup, efficiency and Karp-Flatt of the elastic deployment shapes, from the JSON lines
`benchmarks/elastic.py` writes: a pure DataFrame -> DataFrame transform.

A shape `1-n-k` (access points - matchers - exit points) is compared with the `1-1-1` of
the same subscription count and the same placement (`matchers_in`: this process, or
processes of their own): S(n) = X(n) / X(1) on throughput X, E(n) = S(n) / n, and
e = (1/S - 1/n) / (1 - 1/n) for n > 1 (issue #16).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import DataFrame


def elastic_scaling(lines: DataFrame) -> DataFrame:
    """One row per (subscriptions, matchers_in, shape): throughput, matchers, speedup,
    efficiency, karp_flatt (null for one matcher)."""
    from pyspark.sql import functions as F

    placed = (
        F.coalesce(F.col("matchers_in"), F.lit("this process"))
        if "matchers_in" in lines.columns
        else F.lit("this process")
    )
    shapes = lines.where(F.col("shape").rlike(r"^\d+-\d+-\d+$")).select(
        F.col("workload.subscriptions").alias("subscriptions"),
        placed.alias("matchers_in"),
        "shape",
        F.split("shape", "-").getItem(1).cast("int").alias("matchers"),
        F.col("throughput_per_s").alias("throughput"),
    )
    base = shapes.where(F.col("shape") == "1-1-1").select(
        "subscriptions", "matchers_in", F.col("throughput").alias("base")
    )
    n, s = F.col("matchers"), F.col("throughput") / F.col("base")
    return (
        shapes.join(base, ["subscriptions", "matchers_in"])
        .select(
            "subscriptions",
            "matchers_in",
            "shape",
            "matchers",
            "throughput",
            s.alias("speedup"),
            (s / n).alias("efficiency"),
            F.when(n > 1, (1 / s - 1 / n) / (1 - 1 / n)).alias("karp_flatt"),
        )
        .orderBy("subscriptions", "matchers_in", "shape")
    )
