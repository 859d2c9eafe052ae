from __future__ import annotations

from pathlib import Path

import orjson
import pytest
from pyspark.sql import SparkSession

from tidings.errors import ErrorCode, TidingsError
from tidings.model import Publication
from tidings.pipeline.report import karp_flatt, report, scaling

from .workloads import line, write_log


def test_karp_flatt_is_the_serial_fraction_and_undefined_for_one_worker() -> None:
    assert karp_flatt(1.6, 2) == pytest.approx(0.25)
    assert karp_flatt(4.0, 4) == pytest.approx(0.0)
    assert karp_flatt(1.0, 1) is None


def test_scaling_gives_speedup_efficiency_and_karp_flatt_from_run_times() -> None:
    rows = scaling({1: 100.0, 2: 62.5, 4: 40.0})
    assert [(r.workers, r.speedup, r.efficiency) for r in rows] == [
        (1, 1.0, 1.0),
        (2, 1.6, 0.8),
        (4, 2.5, 0.625),
    ]
    assert rows[1].karp_flatt == pytest.approx(0.25)
    assert rows[2].karp_flatt == pytest.approx((1 / 2.5 - 0.25) / 0.75)


def write_run(run: Path, rate: int, subscribers: int) -> None:
    """100 publications delivered after 1..100 ms and acknowledged 1 s after delivery."""
    pubs = [Publication(f"p{i:03d}", 1000.0 + i, None, ("t",)) for i in range(100)]
    write_log(run / "publications", "0000000000001-1-000001", [line(p) for p in pubs])
    events = []
    for i, p in enumerate(pubs):
        base = {"publication_id": p.id, "subscriber_id": "s", "subscription_ids": ["x"]}
        events += [
            base | {"event": "enqueued", "kind": "topic", "at": p.published_at, "attempt": 0},
            base | {"event": "delivered", "kind": None, "at": p.published_at + (i + 1) / 1000},
            base | {"event": "acked", "kind": None, "at": p.published_at + 1 + (i + 1) / 1000},
        ]
    write_log(run / "deliveries", "0000000000001-1-000001", [line(e) for e in events])
    meta = {"publications_per_s": rate, "subscribers": subscribers}
    (run / "run.json").write_bytes(orjson.dumps(meta))


@pytest.mark.spark
def test_known_latencies_give_known_percentiles_tables_and_plots(
    spark: SparkSession, tmp_path: Path
) -> None:
    write_run(tmp_path / "r100", 100, 10)
    write_run(tmp_path / "r1000", 1000, 10)
    out = report(spark, tmp_path)
    rows = orjson.loads((out / "latency.json").read_bytes())
    delivery = [r for r in rows if r["latency"] == "publish_to_delivery"]
    assert len(delivery) == 2
    assert delivery[0]["p50_ms"] == pytest.approx(50.5, abs=1e-6)
    assert delivery[0]["p99_ms"] == pytest.approx(99.01, abs=1e-6)
    assert delivery[0]["max_ms"] == pytest.approx(100.0, abs=1e-6)
    ack = next(r for r in rows if r["latency"] == "publish_to_ack")
    assert ack["p50_ms"] == pytest.approx(1050.5, abs=1e-6)
    by_kind = orjson.loads((out / "latency_by_kind.json").read_bytes())
    assert {r["kind"] for r in by_kind} == {"topic"}
    assert (out / "latency.csv").read_text().startswith("run,")
    assert (out / "latency_vs_rate.png").read_bytes().startswith(b"\x89PNG")


def test_a_directory_without_logs_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(TidingsError) as caught:
        report(None, tmp_path)  # type: ignore[arg-type]
    assert caught.value.code is ErrorCode.NOT_FOUND
