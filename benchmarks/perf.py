"""Tidings side by side with the peer brokers on this machine: one harness, one sitting.

    python benchmarks/perf.py [--quick] [--runs N] [--targets tidings,rabbitmq,...]
        [--cases 1-1-batched,...]

Every (case, target) runs `--runs` times (3; 1 with --quick), interleaved over the targets, each
run a `tidings perf` process of its own with its consumers in processes of their own; Tidings
gets a fresh broker process (SQLite in a temporary directory) per run. Each line is the median
run of one (case, target) by the case's metric, with every run's figure, the broker process's
memory (before, peak, after, from /proc), the broker's CPU time over the run and per delivered
message (from /proc: the headline figure, since time spent waiting for a loaded machine's
cores is not counted), the load average before and after, and ratios measured in the same
run: on Tidings' line Tidings over each peer (throughput and CPU per message), on a peer's
line Tidings over it, and how the peer compares with the figure issue #14 measured on this
machine kind.

Durable peers run durable: JetStream with file storage and publish acks, RabbitMQ with durable
queues, persistent messages and publisher confirms (MQTT: QoS 1, kept sessions).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
import psycopg

sys.path.insert(0, str(Path(__file__).parent))
from common import emit, machine, versions

from tidings.balancer import haproxy, partitioned
from tidings.matching.kernels import warm_up
from tidings.ports import free_port
from tidings.server import broker_process, broker_processes
from tidings.sim.perf.cpu import cpu_seconds
from tidings.sim.perf.memory import BROKER_COMMANDS, RssSampler, pid_of

TARGETS = ["tidings", "nats-jetstream", "rabbitmq", "nats", "redis"]  # the issue's columns
KNOWN_TARGETS = [
    *TARGETS,
    *("tidings-rows", "tidings-pg", "tidings-pglog", "tidings-ha3", "tidings-ha3-log"),
    *("tidings-http", "mqtt"),
]
# a Tidings target's store: tidings-rows keeps its queues as rows, as before issue #30
# (`tidings` runs the embedded default, the log); tidings-pg is PostgreSQL as several brokers
# share it (rows), tidings-pglog PostgreSQL with the queues a log (one broker owns them),
# each run in a schema of its own, dropped afterwards; tidings-ha3 is three brokers sharing
# PostgreSQL (rows) behind HAProxy, their CPU summed (HAProxy's and PostgreSQL's not counted,
# as PostgreSQL's is not for tidings-pg and tidings-pglog); tidings-ha3-log the same three
# with the queues a log cut into three partitions, one owned by each broker
PG = "postgresql://postgres@127.0.0.1:5432/test"
TIDINGS_STORES = {
    "tidings-rows": "sqlite:///{data_dir}/tidings.db?layout=rows",
    "tidings-pg": PG + "?schema={schema}",
    "tidings-pglog": PG + "?schema={schema}&layout=log",
    "tidings-ha3": PG + "?schema={schema}",
    "tidings-ha3-log": PG + "?schema={schema}",
}
CLUSTER = {"tidings-ha3": 3, "tidings-ha3-log": 3}  # brokers behind HAProxy
PARTITIONS = {"tidings-ha3-log": 3}
DURABLE = {t: ["--confirm", "--persistent"] for t in ("nats-jetstream", "rabbitmq", "mqtt")}
ONE_TO_ONE = ["-x", "1", "-y", "1", "-s", "150", "--processes", "1"]
FAN_OUT = ["-x", "1", "-y", "100", "-s", "150", "--batch", "1", "--processes", "2"]
# issue #14's table, this machine kind: 1 -> 1 msg/s, fan-out deliveries/s
ISSUE = {
    "1-1-batched": {
        "tidings": 17_200, "nats-jetstream": 57_400, "rabbitmq": 36_700, "nats": 250_000,
        "redis": 122_000,
    },
    "1-1-per-request-64": {"tidings": 2_900},
    "fanout-500x100": {
        "tidings": 12_700, "nats-jetstream": 50_000, "rabbitmq": 25_000, "nats": 50_000,
        "redis": 50_000,
    },
}  # fmt: skip


@dataclass(frozen=True)
class Case:
    args: list[str]
    full_s: float
    quick_s: float
    targets: tuple[str, ...] | None = None  # None: every target asked for
    metric: str = "received_per_s"
    messages: tuple[int, int] | None = None  # (full, quick): stop after these many instead


CASES: dict[str, Case] = {
    "1-1-batched": Case([*ONE_TO_ONE, "--batch", "100", "--inflight", "8"], 10, 3),
    "1-1-per-request-64": Case(
        [*ONE_TO_ONE, "--batch", "1", "--inflight", "64"],
        10,
        3,
        targets=("tidings", "tidings-rows"),
    ),
    "fanout-500x100": Case([*FAN_OUT, "-r", "500"], 60, 5),
    # a delivery's latency at a rate every durable broker here sustains: the flat-out cases'
    # p99 is the backlog a publisher builds faster than the broker drains it
    "1-1-latency-5000": Case([*ONE_TO_ONE, "--batch", "10", "-r", "5000"], 10, 3, metric="p99_ms"),
    "backlog-1e6": Case(
        [*ONE_TO_ONE, "--offline", "--batch", "500", "--inflight", "4", "--drain", "900"],
        3600,
        3600,
        targets=("tidings", "tidings-rows", "rabbitmq", "nats-jetstream"),
        metric="drain_per_s",
        messages=(1_000_000, 100_000),
    ),
    "overload": Case(FAN_OUT, 60, 5, targets=("tidings",)),  # rate: see overload_rate
}


@dataclass
class Runs:
    """Every run of one (case, target), and the load average around them."""

    results: list[dict[str, Any]] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)
    load_before: list[float] = field(default_factory=lambda: _load())
    load_after: list[float] = field(default_factory=list)


def _load() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


@contextlib.contextmanager
def broker(target: str) -> Iterator[tuple[str | None, list[int]]]:
    """The URL to pass (Tidings: broker processes of its own) and the brokers' process ids."""
    if not target.startswith("tidings"):
        pid = pid_of(BROKER_COMMANDS[target])
        yield None, [pid] if pid else []
        return
    with tempfile.TemporaryDirectory(prefix="tidings-bench-") as data_dir:
        store = TIDINGS_STORES.get(target)
        schema = f"bench_{uuid.uuid4().hex[:12]}"
        url = store.format(data_dir=data_dir, schema=schema) if store else None
        n, partitions = CLUSTER.get(target, 1), PARTITIONS.get(target, 0)
        try:
            with brokers(Path(data_dir), n, url, partitions) as (address, pids):
                yield address, pids
        finally:
            if store and store.startswith(PG):
                with psycopg.connect(PG, autocommit=True) as conn:
                    conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
                    for p in range(partitions):
                        conn.execute(f'DROP SCHEMA IF EXISTS "{schema}_p{p}" CASCADE')


@contextlib.contextmanager
def brokers(
    root: Path, n: int, store: str | None, partitions: int = 0
) -> Iterator[tuple[str, list[int]]]:
    """One broker, or n behind HAProxy (as `scripts/ha-cluster.py` runs them), on `store`
    (None: the embedded default) cut into `partitions` if any."""
    args = ["--store", store] if store else []
    if n == 1:
        with broker_process(root, None, *args) as (process, url):
            yield url, [process.pid]
        return
    ports = [free_port() for _ in range(n)]
    env = {"TIDINGS_WEBHOOKS__SECRETS_KEY_FILE": str(root / "secrets.key")}
    dirs = [root / f"broker{i}" for i in range(n)]
    each = [
        ["--store", partitioned(store, partitions, i, n)]
        for i in range(n if partitions and store else 0)
    ]
    shared = [] if each else args
    addresses = [f"127.0.0.1:{port}" for port in ports]
    with (
        broker_processes(dirs, ports, *shared, env=env, each=each) as started,
        haproxy(free_port(), addresses, partitions) as url,
    ):
        yield url, [process.pid for process, _ in started]


def run_once(target: str, args: list[str], seconds: float) -> dict[str, Any] | str:
    """One `tidings perf` run: its JSON summary with the broker's memory, or why it failed."""
    with broker(target) as (url, pids):
        client = "tidings" if target in TIDINGS_STORES else target
        command = [sys.executable, "-m", "tidings.cli.main", "perf", "-t", client, *args]
        command += [*DURABLE.get(target, []), "-z", str(seconds), "--json"]
        command += ["--settle", "2"] if target in CLUSTER else []
        command += ["--url", url] if url else []
        settle(pids)
        sampler = RssSampler(pids[0]).start() if pids else None  # (a cluster's first broker)
        cpu_before = cpu_of(pids)
        try:
            done = subprocess.run(command, capture_output=True, text=True, timeout=seconds + 1200)
        except subprocess.TimeoutExpired:
            return "timed out"
        finally:
            memory = sampler.stop() if sampler else {}
        cpu_after = cpu_of(pids)
    if done.returncode != 0:
        return (done.stderr.strip().splitlines() or [f"exit {done.returncode}"])[-1]
    result: dict[str, Any] = orjson.loads(done.stdout.splitlines()[-1])
    return result | {"broker_memory": memory} | _cpu(cpu_before, cpu_after, result)


def settle(pids: list[int], quiet_s: float = 0.25, most_s: float = 10.0) -> None:
    """Wait until the brokers are idle (under 10% of a core over `quiet_s`; `most_s` at
    most): a broker answers `/healthz` before it has loaded its matching kernels and their
    imports (about 0.5 s of CPU), which is its start's cost, not the run's."""
    deadline = time.monotonic() + most_s
    before = cpu_of(pids)
    while before is not None and time.monotonic() < deadline:
        time.sleep(quiet_s)
        now = cpu_of(pids)
        if now is None or now - before < 0.1 * quiet_s:
            return
        before = now


def cpu_of(pids: list[int]) -> float | None:
    """The brokers' CPU seconds together (None: one is gone, or none is known)."""
    spent = [cpu_seconds(pid) for pid in pids]
    return None if not spent or None in spent else sum(s for s in spent if s is not None)


def _cpu(before: float | None, after: float | None, result: dict[str, Any]) -> dict[str, Any]:
    """The broker's CPU seconds over the run, and microseconds per delivered message."""
    if before is None or after is None:
        return {"broker_cpu_s": None, "broker_cpu_us_per_msg": None}
    spent = after - before
    received = result.get("received") or 0
    per = round(spent * 1e6 / received, 1) if received else None
    return {"broker_cpu_s": round(spent, 2), "broker_cpu_us_per_msg": per}


def case_args(name: str, case: Case, quick: bool, rate: float | None) -> list[str]:
    args = list(case.args)
    if case.messages:
        args += ["--messages", str(case.messages[1] if quick else case.messages[0])]
    if rate is not None:
        args += ["-r", f"{rate:g}"]
    return args


def measure(
    name: str, case: Case, targets: list[str], quick: bool, runs: int, rate: float | None
) -> dict[str, Runs]:
    chosen = [t for t in targets if case.targets is None or t in case.targets]
    measured = {t: Runs() for t in chosen}
    seconds = case.quick_s if quick else case.full_s
    for _ in range(runs):  # interleaved: a drift in the machine's load touches every target
        for target in chosen:
            outcome = run_once(target, case_args(name, case, quick, rate), seconds)
            if isinstance(outcome, str):
                print(f"# {name} {target}: {outcome}", file=sys.stderr)
                measured[target].failures.append(outcome)
            else:
                measured[target].results.append(outcome)
    for target_runs in measured.values():
        target_runs.load_after = _load()
    return measured


def median_run(results: list[dict[str, Any]], metric: str) -> dict[str, Any]:
    ordered = sorted(results, key=lambda r: r.get(metric) or 0.0)
    return ordered[(len(ordered) - 1) // 2]


KEEP = (
    "sent", "received", "expected", "lost", "duplicates", "closed", "wasted", "send_errors",
    "first_error", "sent_per_s", "received_per_s", "drain_per_s", "p50_ms", "p95_ms", "p99_ms",
    "max_ms", "broker_memory", "broker_cpu_s", "broker_cpu_us_per_msg", "workload",
)  # fmt: skip


def lines(name: str, case: Case, measured: dict[str, Runs]) -> list[dict[str, Any]]:
    medians = {
        t: median_run(r.results, case.metric)[case.metric] for t, r in measured.items() if r.results
    }
    cpu = {
        t: median_run(r.results, case.metric).get("broker_cpu_us_per_msg")
        for t, r in measured.items()
        if r.results
    }
    out = []
    for target, runs in measured.items():
        if not runs.results:
            out.append(
                {"benchmark": "perf", "case": name, "target": target, "failed": runs.failures}
            )
            continue
        median = median_run(runs.results, case.metric)
        record = {"benchmark": "perf", "case": name, "target": target, "metric": case.metric}
        record |= {k: _rounded(median.get(k)) for k in KEEP}
        record["runs"] = [round(r.get(case.metric) or 0.0, 1) for r in runs.results]
        record["failed_runs"] = runs.failures
        record |= _ratios(target, medians)
        record |= _cpu_ratios(target, cpu)
        record |= _against_issue(name, target, medians[target])
        record |= {"load_avg_before": runs.load_before, "load_avg_after": runs.load_after}
        out.append(record)
    return out


def _rounded(value: Any) -> Any:
    return round(value, 2) if isinstance(value, float) else value


def _ratios(target: str, medians: dict[str, float]) -> dict[str, Any]:
    """On a Tidings line (either layout), it over every other target; on a peer's line,
    Tidings (the rows layout) over it."""
    if target.startswith("tidings"):
        mine = medians[target]
        peers = {t: round(mine / m, 3) for t, m in medians.items() if t != target and m}
        return {"tidings_over_peer": peers}
    tidings = medians.get("tidings")
    if not tidings:
        return {}
    return {"tidings_over_this": round(tidings / medians[target], 3) if medians[target] else None}


def _cpu_ratios(target: str, per_msg: dict[str, float | None]) -> dict[str, Any]:
    """On a Tidings line, its broker CPU per delivered message over each other target's
    (below 1: it spends less)."""
    mine = per_msg.get(target)
    if not target.startswith("tidings") or not mine:
        return {}
    peers = {t: round(mine / m, 3) for t, m in per_msg.items() if t != target and m}
    return {"cpu_per_msg_over_peer": peers}


def _against_issue(name: str, target: str, figure: float) -> dict[str, Any]:
    """The issue's figure for this (case, target), and this run's figure over it."""
    issue = ISSUE.get(name, {}).get(target)
    if issue is None:
        return {}
    ratio = figure / issue
    return {
        "issue_figure": issue,
        "over_issue": round(ratio, 3),
        "within_20pct": abs(ratio - 1) <= 0.2,
        "at_least_80pct": ratio >= 0.8,  # the tool did not hold the broker below the issue's
    }


def overload_rate(fan_out: dict[str, Runs] | None) -> float:
    """Twice the publication rate Tidings sustained in this run's fan-out (100 consumers);
    without one, twice the fan-out's 500/s."""
    runs = fan_out.get("tidings") if fan_out else None
    if not runs or not runs.results:
        return 1000.0
    delivered = median_run(runs.results, "received_per_s")["received_per_s"]
    return round(2 * min(500.0, delivered / 100), 1)


def broker_versions() -> dict[str, str]:
    packages = ["rabbitmq-server", "nats-server", "redis-server", "mosquitto"]
    done = subprocess.run(
        ["dpkg-query", "-W", "-f", "${Package} ${Version}\\n", *packages],
        capture_output=True,
        text=True,
    )
    return dict(line.split(" ", 1) for line in done.stdout.splitlines() if " " in line)


def parse() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="short runs, one run each")
    parser.add_argument("--runs", type=int, help="runs per (case, target); median reported")
    parser.add_argument("--targets", default=",".join(TARGETS))
    parser.add_argument("--cases", default=",".join(CASES))
    args = parser.parse_args()
    for option, chosen, known in (
        ("--targets", args.targets, KNOWN_TARGETS),
        ("--cases", args.cases, list(CASES)),
    ):
        unknown = [c for c in chosen.split(",") if c not in known]
        if unknown:
            parser.error(f"{option}: unknown {', '.join(unknown)}; one of {', '.join(known)}")
    if args.runs is not None and args.runs < 1:
        parser.error("--runs: must be at least 1")
    return args


def main() -> None:
    args = parse()
    runs = args.runs or (1 if args.quick else 3)
    header = {"machine": machine(), "load_avg": _load(), "runs": runs, "quick": args.quick}
    header["versions"] = versions("nats-py", "redis", "hiredis", "uvloop") | broker_versions()
    emit(header)
    if any(t.startswith("tidings") for t in args.targets.split(",")):
        warm_up()  # numba's disk cache filled here, not in the first Tidings run's broker
    measured: dict[str, dict[str, Runs]] = {}
    for name in args.cases.split(","):
        case = CASES[name]
        rate = overload_rate(measured.get("fanout-500x100")) if name == "overload" else None
        measured[name] = measure(name, case, args.targets.split(","), args.quick, runs, rate)
        for record in lines(name, case, measured[name]):
            emit(record | {"machine": header["machine"], "versions": header["versions"]})


if __name__ == "__main__":
    main()
