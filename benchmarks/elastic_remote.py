"""Matchers in processes of their own for the elastic benchmarks: `tidings matcher` processes
joined to a deployment (unassigned until a scale takes them in), the move of a deployment's
matching from its local matcher to them, and a scaler in a process of its own."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import orjson

from tidings.elastic.coordination.coordinator import Coordinator
from tidings.elastic.hosting.deployment import Deployment
from tidings.elastic.protocol.scaling import Scaler


@contextmanager
def matcher_processes(
    zk: str, cluster: str, n: int, command: Sequence[str] = ()
) -> Iterator[list[str]]:
    """`n` `tidings matcher` processes joined to `cluster`; yields their ids once each has
    registered (a JSON line on its stdout); terminates them after. `command`: another
    command line that runs one (a traced matcher), given the same options."""
    with matcher_popens(zk, cluster, n, command) as joined:
        yield [member for _, member in joined]


@contextmanager
def matcher_popens(
    zk: str, cluster: str, n: int, command: Sequence[str] = ()
) -> Iterator[list[tuple[subprocess.Popen[bytes], str]]]:
    """As `matcher_processes`, each process with its id (to kill it)."""
    cli = list(command) or [sys.executable, "-m", "tidings.cli.main", "matcher"]
    args = ["--zookeeper", zk, "--cluster", cluster]
    procs = [subprocess.Popen([*cli, *args], stdout=subprocess.PIPE) for _ in range(n)]
    try:
        joined = []
        for p in procs:
            line = p.stdout.readline() if p.stdout else b""
            if not line:
                raise RuntimeError(f"a matcher process ended before it joined ({p.wait()})")
            joined.append((p, orjson.loads(line)["operator"]))
        yield joined
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


class ScalerProcess:
    """The scaler in a process of its own (as `tidings cluster scale` runs it), with its own
    ZooKeeper session, so that its barriers are not waited for on this process's loop, which
    the access point and the exit point keep busy: `await scale(members)` moves the matcher
    view to those members and answers the report with the scale's start and end times
    (time.monotonic, one clock for the machine's processes)."""

    def __init__(self, zk: str, cluster: str, trace: Path | None = None) -> None:
        env = dict(os.environ)
        if trace is not None:  # its steps timed too (benchmarks/elastic_trace.py)
            env["ELASTIC_TRACE"] = str(trace)
        self._proc = subprocess.Popen(
            [sys.executable, __file__, zk, cluster],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env=env,
        )
        self._ask({"members": None})  # ready: its session and members watch set

    def _ask(self, line: dict[str, Any]) -> dict[str, Any]:
        assert self._proc.stdin is not None and self._proc.stdout is not None
        self._proc.stdin.write(orjson.dumps(line) + b"\n")
        self._proc.stdin.flush()
        answer = self._proc.stdout.readline()
        if not answer:
            raise RuntimeError(f"the scaler process ended ({self._proc.wait()})")
        out: dict[str, Any] = orjson.loads(answer)
        return out

    async def scale(self, members: Sequence[str]) -> dict[str, Any]:
        return await asyncio.to_thread(self._ask, {"members": list(members)})

    def close(self) -> None:
        if self._proc.stdin is not None:
            self._proc.stdin.close()
        try:
            self._proc.wait(20)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()


async def _serve_scales(zk: str, cluster: str) -> None:
    """The scaler process: one JSON line in (`members`, null: just say ready), one out."""
    coordinator = Coordinator(zk, cluster)
    await coordinator.start()
    scaler = Scaler(coordinator)
    config = await coordinator.require_config()
    await scaler.scale_matchers(config.matchers.members)  # unchanged: sets its members watch
    try:
        while line := await asyncio.to_thread(sys.stdin.readline):
            members = orjson.loads(line)["members"]
            if members is None:
                print(orjson.dumps({"ready": True}).decode(), flush=True)
                continue
            began = time.monotonic()
            report = await scaler.scale_matchers(members)
            ended = time.monotonic()
            out = {"from": began, "to": ended, "report": report.to_json()}
            print(orjson.dumps(out).decode(), flush=True)
    finally:
        await coordinator.close()


if __name__ == "__main__":  # python elastic_remote.py ZOOKEEPER CLUSTER
    if "ELASTIC_TRACE" in os.environ:
        import elastic_trace

        elastic_trace.install("scaler", Path(os.environ["ELASTIC_TRACE"]))
    asyncio.run(_serve_scales(sys.argv[1], sys.argv[2]))
