"""The run's events log (`events.jsonl`, format in docs/sim.md) and what is derived from it.

Each process appends to its own part file; `merge` joins them into `events.jsonl` at the end
(also after Ctrl-C). `export` writes the event-log layout `tidings pipeline report` reads.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import numpy as np
import orjson

QUANTILES = (50, 75, 95, 99)
PARTS = "parts"


class EventWriter:
    """JSON lines to `<run>/parts/<name>.jsonl`, flushed on `flush` and `close`."""

    def __init__(self, run_dir: Path, name: str) -> None:
        (run_dir / PARTS).mkdir(parents=True, exist_ok=True)
        self._file: IO[bytes] = open(run_dir / PARTS / f"{name}.jsonl", "ab")  # noqa: SIM115

    def write(self, event: dict[str, Any]) -> None:
        self._file.write(orjson.dumps(event) + b"\n")

    def flush(self) -> None:
        self._file.flush()

    def close(self) -> None:
        self._file.close()


def merge(run_dir: Path) -> Path:
    """Concatenate the part files into `events.jsonl` (a torn last line is dropped later)."""
    out = run_dir / "events.jsonl"
    parts = sorted((run_dir / PARTS).glob("*.jsonl")) if (run_dir / PARTS).is_dir() else []
    with out.open("ab") as sink:
        for part in parts:
            with part.open("rb") as source:
                shutil.copyfileobj(source, sink)
    shutil.rmtree(run_dir / PARTS, ignore_errors=True)
    return out


def read(path: Path) -> Iterator[dict[str, Any]]:
    """Every whole event; a line torn by a hard stop is skipped."""
    with path.open("rb") as lines:
        for line in lines:
            try:
                yield orjson.loads(line)
            except orjson.JSONDecodeError:
                continue


def export(run_dir: Path, meta: dict[str, Any]) -> None:
    """`publications/`, `deliveries/` and `run.json` for `tidings pipeline report`."""
    pubs, dels = run_dir / "publications", run_dir / "deliveries"
    pubs.mkdir(exist_ok=True)
    dels.mkdir(exist_ok=True)
    with (pubs / "sim.jsonl").open("wb") as p, (dels / "sim.jsonl").open("wb") as d:
        for event in read(run_dir / "events.jsonl"):
            if event["event"] == "published":
                p.write(orjson.dumps(_publication(event)) + b"\n")
            elif event["event"] == "delivered":
                d.write(orjson.dumps(_delivery(event)) + b"\n")
    (run_dir / "run.json").write_bytes(orjson.dumps(meta, option=orjson.OPT_INDENT_2))


def _publication(event: dict[str, Any]) -> dict[str, Any]:
    # published_at is the publisher's send time, so report latencies are end to end
    keys = ("topics", "attributes", "function_types")
    return {"id": event["publication_id"], "published_at": event["sent_at"]} | {
        k: event.get(k) for k in keys
    }


def _delivery(event: dict[str, Any]) -> dict[str, Any]:
    keys = ("publication_id", "subscriber_id", "subscription_ids", "kind", "at", "attempt")
    return {k: event.get(k) for k in keys} | {"event": "delivered"}


def latencies_ms(events: list[dict[str, Any]]) -> dict[str, list[float]]:
    """Publish-to-delivery latency of each delivery, by matching kind."""
    sent = {e["publication_id"]: e["sent_at"] for e in events if e["event"] == "published"}
    out: dict[str, list[float]] = {}
    for e in events:
        if e["event"] == "delivered" and e["publication_id"] in sent:
            ms = (e["at"] - sent[e["publication_id"]]) * 1000
            out.setdefault(e.get("kind") or "unknown", []).append(ms)
    return out


def percentiles(values: list[float]) -> dict[str, Any]:
    """p50/p75/p95/p99/max in ms (linear interpolation, as Spark's `percentile`)."""
    if not values:
        return {f"p{q}_ms": None for q in QUANTILES} | {"max_ms": None, "count": 0}
    points = np.percentile(np.asarray(values), QUANTILES)
    out = {f"p{q}_ms": round(float(v), 3) for q, v in zip(QUANTILES, points, strict=True)}
    return out | {"max_ms": round(max(values), 3), "count": len(values)}


def summarize(events: list[dict[str, Any]], subscribers: int) -> dict[str, Any]:
    published = [e for e in events if e["event"] == "published"]
    ids = {e["publication_id"] for e in published}
    everything = [e for e in events if e["event"] == "delivered"]
    delivered = [e for e in everything if e["publication_id"] in ids]  # not warm-up ones
    pairs = [(e["publication_id"], e["subscriber_id"]) for e in delivered]
    by_kind = latencies_ms(events)
    per_subscriber = _per_subscriber(delivered)
    return {
        "publications": len(published),
        "deliveries": len(delivered),
        "redelivered": len(pairs) - len(set(pairs)),
        "unlogged_deliveries": len(everything) - len(delivered),
        "publish_errors": sum(1 for e in events if e["event"] == "error"),
        "subscribers": subscribers,
        "received_min": min(per_subscriber.values(), default=0),
        "received_max": max(per_subscriber.values(), default=0),
        "latency": percentiles([v for vs in by_kind.values() for v in vs]),
        "latency_by_kind": {k: percentiles(v) for k, v in sorted(by_kind.items())},
    }


def _per_subscriber(delivered: list[dict[str, Any]]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for e in delivered:
        counts[e["subscriber_id"]] = counts.get(e["subscriber_id"], 0) + 1
    return counts
