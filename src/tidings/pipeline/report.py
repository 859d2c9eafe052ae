"""Analytics over run directories: latency percentiles, throughput, scaling metrics, plots.

A run directory holds the event logs of one run (`publications/` and `deliveries/`, or
`log/publications/` and `log/deliveries/`), and optionally `run.json` describing it
(`publications_per_s`, `subscribers`, `workers`, `seconds`). A directory of such runs is
reported run by run, and the figures compare them.
"""

from __future__ import annotations

import csv
import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

from tidings.errors import ErrorCode, TidingsError
from tidings.pipeline import eventlog

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

OnProgress = Callable[[str, int, int], None]  # (stage, done, total); total 0: not known
RUNS, TABLES = "runs", "tables and plots"  # the stages `report` says
QUANTILES = (0.5, 0.75, 0.95, 0.99)
LATENCY_OF = {"delivered": "publish_to_delivery", "acked": "publish_to_ack"}


@dataclass(frozen=True, slots=True)
class Run:
    name: str
    directory: Path
    meta: dict[str, Any]

    def log(self, which: str) -> Path:
        nested = self.directory / "log" / which
        return nested if nested.is_dir() else self.directory / which


@dataclass(frozen=True, slots=True)
class ScalingRow:
    workers: int
    seconds: float
    speedup: float
    efficiency: float
    karp_flatt: float | None  # undefined for one worker


def karp_flatt(speedup: float, workers: int) -> float | None:
    """The experimentally determined serial fraction e = (1/S - 1/p) / (1 - 1/p)."""
    if workers <= 1:
        return None
    return (1 / speedup - 1 / workers) / (1 - 1 / workers)


def scaling(times: dict[int, float]) -> list[ScalingRow]:
    """S(n) = T(1)/T(n), E(n) = S(n)/n and Karp-Flatt, from the time each worker count took
    on the same work (the smallest count stands for 1 when no one-worker run exists)."""
    if not times:
        return []
    base_workers = min(times)
    base = times[base_workers] * base_workers if base_workers > 1 else times[base_workers]
    rows = []
    for n in sorted(times):
        s = base / times[n]
        rows.append(ScalingRow(n, times[n], s, s / n, karp_flatt(s, n)))
    return rows


def find_runs(run_dir: Path) -> list[Run]:
    """The run itself, or every sub-directory that is a run."""
    if not run_dir.is_dir():
        raise TidingsError(ErrorCode.NOT_FOUND, detail=f"no run directory {run_dir}")
    candidates = [run_dir, *sorted(p for p in run_dir.iterdir() if p.is_dir())]
    runs = [Run(p.name, p, _meta(p)) for p in candidates if _is_run(p)]
    if not runs:
        raise TidingsError(
            ErrorCode.NOT_FOUND, detail=f"no event logs (deliveries/) under {run_dir}"
        )
    return runs


def _is_run(path: Path) -> bool:
    return (path / "deliveries").is_dir() or (path / "log" / "deliveries").is_dir()


def _meta(path: Path) -> dict[str, Any]:
    meta = path / "run.json"
    return dict(orjson.loads(meta.read_bytes())) if meta.is_file() else {}


def latencies(spark: SparkSession, run: Run) -> DataFrame:
    """(subscriber_id, kind, event, at, latency_ms) for each delivered and acked event; the
    matching kind comes from the delivery's `enqueued` event."""
    from pyspark.sql import functions as F

    events = eventlog.read_deliveries(spark, run.log("deliveries")).where("_corrupt IS NULL")
    lines = eventlog.read_publication_lines(spark, run.log("publications"))
    pubs = eventlog.valid(eventlog.parse_publications(lines)).select(
        F.col("id").alias("publication_id"), "published_at"
    )
    kinds = (
        events.where("event = 'enqueued'")
        .groupBy("publication_id", "subscriber_id")
        .agg(F.first("kind", ignorenulls=True).alias("enqueued_kind"))
    )
    timed = events.where("event IN ('delivered', 'acked')").join(pubs, "publication_id")
    return timed.join(kinds, ["publication_id", "subscriber_id"], "left").select(
        "subscriber_id",
        F.coalesce("kind", "enqueued_kind", F.lit("unknown")).alias("kind"),
        "event",
        "at",
        ((F.col("at") - F.col("published_at")) * 1000).alias("latency_ms"),
    )


def percentiles(latency: DataFrame, by: Sequence[str] = ()) -> list[dict[str, Any]]:
    """p50/p75/p95/p99/max (exact, interpolated) of latency_ms per event and `by`."""
    from pyspark.sql import functions as F

    quantiles = F.percentile("latency_ms", F.array(*[F.lit(q) for q in QUANTILES]))
    rows = (
        latency.groupBy("event", *by)
        .agg(quantiles.alias("q"), F.max("latency_ms").alias("max"), F.count("*").alias("n"))
        .orderBy("event", *by)
        .collect()
    )
    return [_percentile_row(r, by) for r in rows]


def _percentile_row(row: Any, by: Sequence[str]) -> dict[str, Any]:
    out: dict[str, Any] = {"latency": LATENCY_OF.get(row["event"], row["event"])}
    out.update({k: row[k] for k in by})
    out.update({f"p{round(q * 100)}_ms": v for q, v in zip(QUANTILES, row["q"], strict=True)})
    return out | {"max_ms": row["max"], "count": row["n"]}


def throughput(latency: DataFrame, window_s: int = 1) -> list[dict[str, Any]]:
    """Delivered messages per window of `window_s` seconds."""
    from pyspark.sql import functions as F

    delivered = latency.where("event = 'delivered'").withColumn("ts", F.timestamp_seconds("at"))
    rows = (
        delivered.groupBy(F.window("ts", f"{window_s} seconds").alias("w"))
        .agg(F.count("*").alias("n"))
        .orderBy("w")
        .collect()
    )
    return [
        {"window_start": r["w"]["start"].isoformat(), "delivered_per_s": r["n"] / window_s}
        for r in rows
    ]


def write_table(path: Path, rows: list[dict[str, Any]]) -> None:
    """CSV and JSON side by side (`name.csv`, `name.json`)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.with_suffix(".json").write_bytes(orjson.dumps(rows, option=orjson.OPT_INDENT_2))
    columns = list(dict.fromkeys(k for r in rows for k in r))
    with path.with_suffix(".csv").open("w", newline="") as out:
        writer = csv.DictWriter(out, columns)
        writer.writeheader()
        writer.writerows(rows)


def plot(rows: Iterable[dict[str, Any]], x: str, fixed: str, path: Path, title: str) -> bool:
    """Latency p50/p99 against `x`, one line per value of `fixed`; False if nothing to plot."""
    points = [r for r in rows if r.get(x) is not None and r["latency"] == "publish_to_delivery"]
    if not points:
        return False
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    for value in sorted({r.get(fixed) for r in points}, key=str):
        line = sorted((r for r in points if r.get(fixed) == value), key=lambda r: r[x])
        for q, style in (("p50_ms", "o-"), ("p99_ms", "s--")):
            label = f"{q[:-3]}, {fixed}={value}"
            ax.plot([r[x] for r in line], [r[q] for r in line], style, label=label)
    ax.set(xlabel=x.replace("_", " "), ylabel="publish to delivery (ms)", title=title)
    if all(r[x] > 0 and r["p50_ms"] > 0 for r in points):
        # rates and sizes step geometrically, and a saturated point is 100x the others
        ax.set_xscale("log")
        ax.set_yscale("log")
    ax.legend(fontsize="small")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return True


def report(
    spark: SparkSession,
    run_dir: Path,
    out_dir: Path | None = None,
    on_progress: OnProgress | None = None,
) -> Path:
    """Write the report of every run under `run_dir` to `out_dir` (default run_dir/report);
    a directory of `benchmarks/elastic.py` JSON lines (`elastic*.jsonl`) gets the elastic
    shapes' scaling table instead. `on_progress` hears "runs" (done of all) and "tables
    and plots"."""
    say = on_progress or _silent
    out = out_dir or run_dir / "report"
    if has_elastic_results(run_dir):
        say("elastic scaling", 0, 0)
        return _elastic_report(spark, run_dir, out)
    summary: list[dict[str, Any]] = []
    per_kind: list[dict[str, Any]] = []
    windows: list[dict[str, Any]] = []
    runs = find_runs(run_dir)
    for done, run in enumerate(runs):
        say(RUNS, done, len(runs))
        latency = latencies(spark, run).cache()
        context = {"run": run.name, **_context(run.meta)}
        summary += [context | r for r in percentiles(latency)]
        per_kind += [context | r for r in percentiles(latency, ["kind"])]
        windows += [context | r for r in throughput(latency)]
        latency.unpersist()
    say(RUNS, len(runs), len(runs))
    say(TABLES, 0, 0)
    write_table(out / "latency", summary)
    write_table(out / "latency_by_kind", per_kind)
    write_table(out / "throughput", windows)
    times = _scaling_times(find_runs(run_dir))
    if times:
        write_table(out / "scaling", [asdict(r) for r in scaling(times)])
    plot(summary, "publications_per_s", "subscribers", out / "latency_vs_rate.png",
         "Latency against publication rate")  # fmt: skip
    plot(summary, "subscribers", "publications_per_s", out / "latency_vs_subscribers.png",
         "Latency against subscribers")  # fmt: skip
    return out


def _silent(stage: str, done: int, total: int) -> None:
    """No one listens."""


def _context(meta: dict[str, Any]) -> dict[str, Any]:
    return {k: meta.get(k) for k in ("publications_per_s", "subscribers", "workers")}


def _scaling_times(runs: list[Run]) -> dict[int, float]:
    timed = [r.meta for r in runs if "workers" in r.meta and "seconds" in r.meta]
    return {int(m["workers"]): float(m["seconds"]) for m in timed if math.isfinite(m["seconds"])}


def has_elastic_results(run_dir: Path) -> bool:
    return run_dir.is_dir() and any(run_dir.glob("elastic*.jsonl"))


def _elastic_report(spark: SparkSession, run_dir: Path, out: Path) -> Path:
    from tidings.pipeline.elastic_plots import elastic_plots
    from tidings.pipeline.elastic_scaling import elastic_scaling

    files = sorted(str(p) for p in run_dir.glob("elastic*.jsonl"))
    rows = [r.asDict() for r in elastic_scaling(spark.read.json(files)).collect()]
    write_table(out / "elastic_scaling", rows)
    elastic_plots(rows, out)
    return out
