"""Two source trees' brokers side by side: this checkout's and a base revision's, at once, in
one of `perf.py`'s cases (issue #30).

    python benchmarks/ab.py BASE [--case 1-1-per-request-64] [--pairs 5] [--seconds S]

BASE is a revision (checked out into a temporary worktree, removed afterwards) or a
directory holding a tree's `src/`. This machine's speed drifts by tens of percent within
minutes, and runs of one tree after the other's could not tell a change of 10%: here each
pair starts a broker from each tree (the embedded default, as `perf.py` starts its
`tidings` target) and runs the case's `tidings perf` against each at once, each load tool
from its broker's tree, so that both see the same drift; which tree starts first alternates.
Each broker's CPU is its own, from /proc, per delivered message.

Prints JSON lines: a header (machine, versions, both trees' revisions), a line a pair (each
tree's messages/s, p99, broker CPU us a message), and a summary: each tree's medians, the
median of the pairs' ratios (this tree over the base: below 1, this tree's broker spends
less a message) and in how many pairs this tree's CPU a message was lower.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
from common import emit, machine, versions
from perf import CASES, case_args, cpu_of, settle

from tidings.server import broker_process

HERE = Path(__file__).resolve().parent.parent  # this checkout


@contextlib.contextmanager
def tree(base: str) -> Iterator[Path]:
    """The base tree: a directory as given, or the revision checked out for the run."""
    given = Path(base)
    if (given / "src" / "tidings").is_dir():
        yield given
        return
    with tempfile.TemporaryDirectory(prefix="tidings-ab-") as scratch:
        path = Path(scratch) / "base"
        git = ["git", "-C", str(HERE), "worktree"]
        subprocess.run([*git, "add", "--detach", str(path), base], check=True, capture_output=True)
        try:
            yield path
        finally:
            subprocess.run([*git, "remove", "--force", str(path)], check=False, capture_output=True)


def revision(root: Path) -> str:
    done = subprocess.run(["git", "-C", str(root), "rev-parse", "--short", "HEAD"],
                          capture_output=True, text=True)  # fmt: skip
    return done.stdout.strip() or str(root)


def pair(case: str, seconds: float, roots: list[Path]) -> list[dict[str, Any]]:
    """One run of the case against a broker of each tree, at once."""
    args = case_args(case, CASES[case], True, None)
    with contextlib.ExitStack() as stack:
        started = []
        for root in roots:
            env = {"PYTHONPATH": str(root / "src")}
            data_dir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="tidings-ab-")))
            process, url = stack.enter_context(broker_process(data_dir, None, env=env))
            started.append((env, process.pid, url))
        for _, pid, _ in started:
            settle([pid])
        before = [cpu_of([pid]) for _, pid, _ in started]
        runs = [
            subprocess.Popen(
                [sys.executable, "-m", "tidings.cli.main", "perf", "-t", "tidings", *args,
                 "-z", str(seconds), "--json", "--url", url],
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, env={**os.environ, **env},
            )
            for env, _, url in started
        ]  # fmt: skip
        said = [run.communicate() for run in runs]
        after = [cpu_of([pid]) for _, pid, _ in started]
    results = []
    for (out, err), run, spent_before, spent_after in zip(said, runs, before, after, strict=True):
        if run.returncode != 0:
            raise SystemExit(err.decode().strip().splitlines()[-1])
        result = orjson.loads(out.splitlines()[-1])
        received = result.get("received") or 0
        spent = (spent_after or 0.0) - (spent_before or 0.0)
        results.append(
            {
                "received_per_s": round(result["received_per_s"], 1),
                "p99_ms": result.get("p99_ms"),
                "broker_cpu_us_per_msg": round(spent * 1e6 / received, 1) if received else None,
            }
        )
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("base", help="a revision, or a directory holding a tree's src/")
    parser.add_argument("--case", default="1-1-per-request-64", choices=sorted(CASES))
    parser.add_argument("--pairs", type=int, default=5)
    parser.add_argument("--seconds", type=float, help="each run's (default: the quick case's)")
    args = parser.parse_args()
    seconds = args.seconds or CASES[args.case].quick_s
    with tree(args.base) as base:
        names = {"base": revision(base), "this": revision(HERE)}
        emit({"benchmark": "ab", "machine": machine(), "versions": versions(), "trees": names,
              "case": args.case, "seconds": seconds})  # fmt: skip
        pairs = []
        for i in range(args.pairs):
            roots = [base, HERE] if i % 2 == 0 else [HERE, base]
            measured = pair(args.case, seconds, roots)
            ours = dict(zip((str(r) for r in roots), measured, strict=True))
            line = {"base": ours[str(base)], "this": ours[str(HERE)],
                    "load_average": [round(x, 2) for x in os.getloadavg()]}  # fmt: skip
            emit({"pair": line})
            pairs.append(line)
    emit({"summary": summary(pairs), "trees": names, "case": args.case})


def summary(pairs: list[dict[str, Any]]) -> dict[str, Any]:
    def median(side: str, metric: str) -> float:
        return statistics.median(p[side][metric] for p in pairs)

    ratios = [
        p["this"]["broker_cpu_us_per_msg"] / p["base"]["broker_cpu_us_per_msg"] for p in pairs
    ]
    return {
        "base": {m: median("base", m) for m in ("received_per_s", "broker_cpu_us_per_msg")},
        "this": {m: median("this", m) for m in ("received_per_s", "broker_cpu_us_per_msg")},
        "cpu_per_msg_this_over_base": round(statistics.median(ratios), 3),
        "pairs_this_lower": sum(r < 1 for r in ratios),
        "pairs": len(pairs),
    }


if __name__ == "__main__":
    main()
