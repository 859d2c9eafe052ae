"""The thesis's end-to-end experiments (section 6.4, figs. 6.9-6.13) at this machine's scale.

`publication-rate`: fixed subscribers, rising publications/s. `subscribers`: fixed rate,
rising subscribers. `payload`: rising payload size. Each runs for topic, content and function
matching; every point is one simulator run (a run directory), and the analysis writes
latency tables (CSV, JSON) and PNG plots: Spark's report when Spark is available, numpy else.
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib.util
import math
import shutil
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import orjson

from tidings.errors import invalid
from tidings.sim import events, rundir
from tidings.sim.config import PublisherGroup, SimConfig, SubscriberGroup, check
from tidings.sim.scenarios import EN_TEXT, ENGLISH
from tidings.sim.simulation import Embedded, RunOptions, broker, run

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

KINDS = ("topic", "content", "function")
PER_PUBLISHER_RATE = 25.0  # one publisher task keeps up with this comfortably
Analytics = Literal["auto", "spark", "numpy"]
# a stage of the work after the points (starting Spark, analysing, plotting): entered as it
# begins, left when it is done (`tidings experiment` says both, with the time taken)
OnStage = Callable[[str], AbstractContextManager[object]]


@dataclass(frozen=True)
class Point:
    label: str
    subscribers: int
    rate: float
    payload_kib: float


@dataclass(frozen=True)
class Experiment:
    name: str
    x: str  # the column plotted on the x axis
    plot: str
    full: list[Point]
    quick: list[Point]


def _rates(subs: int, rates: list[float], kib: float = 1) -> list[Point]:
    return [Point(f"rate-{r:g}", subs, r, kib) for r in rates]


def _subs(rate: float, counts: list[int]) -> list[Point]:
    return [Point(f"subscribers-{n}", n, rate, 1) for n in counts]


def _payloads(subs: int, rate: float, sizes: list[float]) -> list[Point]:
    return [Point(f"payload-{k:g}k", subs, rate, k) for k in sizes]


EXPERIMENTS = {
    e.name: e
    for e in (
        Experiment("publication-rate", "publications_per_s", "latency_vs_rate.png",
                   _rates(100, [5, 10, 25, 50, 100, 250, 500]), _rates(4, [5, 20])),
        Experiment("subscribers", "subscribers", "latency_vs_subscribers.png",
                   _subs(50, [50, 100, 250, 500]), _subs(10, [2, 6])),
        Experiment("payload", "payload_kib", "latency_vs_payload.png",
                   _payloads(50, 20, [1, 4, 16, 64, 128, 250]), _payloads(3, 5, [1, 16])),
    )
}  # fmt: skip


def experiment(name: str) -> Experiment:
    if name not in EXPERIMENTS:
        raise invalid("NAME", f"no experiment {name!r}; known: {', '.join(EXPERIMENTS)}")
    return EXPERIMENTS[name]


def _subscriber(kind: str, count: int) -> SubscriberGroup:
    if kind == "topic":
        return SubscriberGroup(count=count, topics=["experiment/load"])
    if kind == "content":
        predicates = [
            {"key": "price", "op": "<", "value": 1000},
            {"key": "quantity", "op": ">=", "value": 5},
        ]
        return SubscriberGroup(count=count, predicates=predicates)
    return SubscriberGroup(count=count, functions=[EN_TEXT])


def _publisher(kind: str, rate: float, payload_bytes: int) -> PublisherGroup:
    count = max(1, math.ceil(rate / PER_PUBLISHER_RATE))
    shapes: dict[str, dict[str, Any]] = {
        "topic": {"topics": ["experiment/load"]},
        "content": {"attributes": {"price": 500, "quantity": 10}},
        "function": {"function_types": ["text"], "text": ENGLISH},
    }
    shape = shapes[kind]
    return PublisherGroup(count=count, rate=rate / count, payload_bytes=payload_bytes, **shape)


def point_config(kind: str, point: Point, quick: bool, seed: int = 0) -> SimConfig:
    payload = min(int(point.payload_kib * 1024), 250 * 1024)
    return check(
        SimConfig(
            name=point.label,
            duration=1.5 if quick else 10.0,
            drain=5.0 if quick else 30.0,
            quiet=0.5 if quick else 1.0,
            warmup=10.0,
            seed=seed,
            subscribers=[_subscriber(kind, point.subscribers)],
            publishers=[_publisher(kind, point.rate, payload)],
        )
    )


@dataclass
class ExperimentSettings:
    kinds: list[str]
    quick: bool = False
    url: str | None = None
    processes: int = 1
    progress: bool = True
    analytics: Analytics = "auto"
    spark: SparkSession | None = None
    embedded: Embedded | None = None  # a broker of its own when no URL is given


def run_experiment(
    spec: Experiment,
    settings: ExperimentSettings,
    out: Path,
    on_point: Callable[[str], None] | None = None,
    on_stage: OnStage | None = None,
) -> list[dict[str, Any]]:
    """Every point for every kind under `out/<kind>/<point>/`, then the analysis; returns
    the latency rows (also in `out/latency.{csv,json}`)."""
    points = spec.quick if settings.quick else spec.full
    rows: list[dict[str, Any]] = []
    with broker(
        settings.url, out, settings.embedded
    ) as url:  # one broker for every point: warm, comparable
        live = dataclasses.replace(settings, url=url)
        for kind in settings.kinds:
            for point in points:
                if on_point is not None:
                    on_point(f"{kind} {point.label}")
                _run_point(kind, point, live, out / kind / point.label)
    stage = on_stage or (lambda _: contextlib.nullcontext())
    engine = "spark" if uses_spark(settings) else "numpy"
    if engine == "spark" and settings.spark is None:
        with stage("starting Spark"):  # once for every kind
            settings = dataclasses.replace(settings, spark=_session())
    for kind in settings.kinds:
        with stage(f"analysing {len(points)} points of {kind} with {engine}"):
            rows += [r | {"matching": kind} for r in analyse(out / kind, spec, settings)]
    with stage(f"plotting {spec.plot}"):
        _write(rows, spec, out)
    return rows


def _run_point(kind: str, point: Point, settings: ExperimentSettings, run_dir: Path) -> None:
    run_dir.mkdir(parents=True)
    config = point_config(kind, point, settings.quick)
    run(config, run_dir, RunOptions(settings.url, settings.processes, settings.progress))
    meta = orjson.loads((run_dir / "run.json").read_bytes())
    meta |= {"payload_kib": point.payload_kib, "matching": kind}
    rundir.write_json(run_dir / "run.json", meta)


def spark_available() -> bool:
    return importlib.util.find_spec("pyspark") is not None and shutil.which("java") is not None


def uses_spark(settings: ExperimentSettings) -> bool:
    return settings.analytics == "spark" or (
        settings.analytics == "auto" and (settings.spark is not None or spark_available())
    )


def analyse(kind_dir: Path, spec: Experiment, settings: ExperimentSettings) -> list[dict[str, Any]]:
    rows = _spark_rows(kind_dir, settings) if uses_spark(settings) else _numpy_rows(kind_dir)
    meta = {p.name: _meta(p) for p in kind_dir.iterdir() if (p / "run.json").is_file()}
    return [r | {"payload_kib": meta.get(r["run"], {}).get("payload_kib")} for r in rows]


def _meta(run_dir: Path) -> dict[str, Any]:
    return dict(orjson.loads((run_dir / "run.json").read_bytes()))


def _spark_rows(kind_dir: Path, settings: ExperimentSettings) -> list[dict[str, Any]]:
    from tidings.pipeline.report import report

    out = report(settings.spark or _session(), kind_dir)
    rows = orjson.loads((out / "latency.json").read_bytes())
    return [r for r in rows if r["latency"] == "publish_to_delivery"]


def _session() -> SparkSession:
    from tidings.pipeline.session import build_session

    return build_session(app_name="tidings-experiment")


def _numpy_rows(kind_dir: Path) -> list[dict[str, Any]]:
    """The report's latency table (publish to delivery) computed in-process."""
    from tidings.pipeline.report import plot, write_table

    rows = []
    for run_dir in sorted(p for p in kind_dir.iterdir() if (p / "run.json").is_file()):
        meta = _meta(run_dir)
        logged = list(events.read(run_dir / "events.jsonl"))
        values = [v for vs in events.latencies_ms(logged).values() for v in vs]
        context = {k: meta.get(k) for k in ("publications_per_s", "subscribers", "workers")}
        rows.append({"run": run_dir.name, **context, "latency": "publish_to_delivery"}
                    | events.percentiles(values))  # fmt: skip
    out = kind_dir / "report"
    out.mkdir(exist_ok=True)
    write_table(out / "latency", rows)
    plot(rows, "publications_per_s", "subscribers", out / "latency_vs_rate.png",
         "Latency against publication rate")  # fmt: skip
    plot(rows, "subscribers", "publications_per_s", out / "latency_vs_subscribers.png",
         "Latency against subscribers")  # fmt: skip
    return rows


def _write(rows: list[dict[str, Any]], spec: Experiment, out: Path) -> None:
    from tidings.pipeline.report import plot, write_table

    write_table(out / "latency", rows)
    title = f"{spec.name}: publish to delivery latency"
    plot(rows, spec.x, "matching", out / spec.plot, title)
