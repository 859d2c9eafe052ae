"""Matchers in processes of their own for the elastic benchmarks: `tidings matcher` processes
joined to a deployment (unassigned until a scale takes them in), and the move of a
deployment's matching from its local matcher to them."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

import orjson

from tidings.elastic.deployment import Deployment


@contextmanager
def matcher_processes(
    zk: str, cluster: str, n: int, command: Sequence[str] = ()
) -> Iterator[list[str]]:
    """`n` `tidings matcher` processes joined to `cluster`; yields their ids once each has
    registered (a JSON line on its stdout); terminates them after. `command`: another
    command line that runs one (a traced matcher), given the same options."""
    cli = list(command) or [sys.executable, "-m", "tidings.cli.main", "matcher"]
    args = ["--zookeeper", zk, "--cluster", cluster]
    procs = [subprocess.Popen([*cli, *args], stdout=subprocess.PIPE) for _ in range(n)]
    try:
        ids = []
        for p in procs:
            line = p.stdout.readline() if p.stdout else b""
            if not line:
                raise RuntimeError(f"a matcher process ended before it joined ({p.wait()})")
            ids.append(orjson.loads(line)["operator"])
        yield ids
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            try:
                p.wait(20)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


async def move_to(d: Deployment, members: Sequence[str]) -> None:
    """Scale `d`'s matchers to `members` (processes started elsewhere) and stop its local
    matchers: from then on the remote ones alone match."""
    local = set(d.matchers)
    report = await d.scaler.scale_matchers(list(members))
    if report.outcome != "done":
        raise RuntimeError(f"the move to remote matchers ended {report.outcome}: {report.reason}")
    for member in local:
        op = d.matchers.pop(member)
        await op.stop()
        await op.coordinator.close()  # its session's threads would outlive the run
