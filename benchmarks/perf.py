"""Tidings side by side with the peer brokers on this machine, through `tidings perf`.

    python benchmarks/perf.py [--quick] [--targets tidings,rabbitmq,...] [--cases ...]

Every case runs the same workload code against every target, each run in its own `tidings perf`
process (Tidings: a broker process of its own, SQLite in a temporary directory). The baseline,
measured in the same run, is core NATS (at most once, nothing kept): each line carries
`ratio_vs_nats` = received/s divided by core NATS's received/s for the same case.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson

sys.path.insert(0, str(Path(__file__).parent))
from common import emit, machine, versions

BASELINE = "nats"
TARGETS = ["nats", "tidings", "tidings-http", "rabbitmq", "nats-jetstream", "mqtt", "redis"]
CASES: dict[str, list[str]] = {
    "1-1-150B": ["-x", "1", "-y", "1", "-s", "150"],
    "1-1-1KiB": ["-x", "1", "-y", "1", "-s", "1024"],
    "1-100-fanout-500": ["-x", "1", "-y", "100", "-s", "150", "-r", "500", "--processes", "2"],
    "content-1pct-500": [
        "-x", "1", "-y", "100", "-s", "150", "-r", "500", "--selectivity", "0.01",
        "--processes", "2",
    ],
}  # fmt: skip


def perf(target: str, args: list[str], duration: float) -> dict[str, Any] | None:
    command = [sys.executable, "-m", "tidings.cli.main", "perf", "-t", target, *args]
    command += ["-z", str(duration), "--json"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=duration * 10 + 120)
    if done.returncode != 0:
        print(f"# {target}: {done.stderr.strip().splitlines()[-1:]}", file=sys.stderr)
        return None
    result: dict[str, Any] = orjson.loads(done.stdout.splitlines()[-1])
    return result


def record(case: str, result: dict[str, Any], baseline: dict[str, Any] | None) -> dict[str, Any]:
    keep = ("target", "sent_per_s", "received_per_s", "p50_ms", "p95_ms", "p99_ms", "max_ms")
    out = {"benchmark": "perf", "case": case, **{k: result.get(k) for k in keep}}
    out |= {k: result[k] for k in ("lost", "duplicates", "wasted", "send_errors")}
    out["ratio_vs_nats"] = (
        round(result["received_per_s"] / baseline["received_per_s"], 3)
        if baseline and baseline["received_per_s"]
        else None
    )
    out["workload"] = result["workload"]
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="3 s per run instead of 10 s")
    parser.add_argument("--targets", default=",".join(TARGETS))
    parser.add_argument("--cases", default=",".join(CASES))
    args = parser.parse_args()
    duration = 3.0 if args.quick else 10.0
    targets = [BASELINE] + [t for t in args.targets.split(",") if t != BASELINE]
    emit({"machine": machine(), "versions": versions("aio-pika", "nats-py", "paho-mqtt", "redis")})
    for case in args.cases.split(","):
        baseline = None
        for target in targets:
            result = perf(target, CASES[case], duration)
            if result is None:
                continue
            baseline = baseline or (result if target == BASELINE else None)
            emit(record(case, result, baseline))


if __name__ == "__main__":
    main()
