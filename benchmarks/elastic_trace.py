"""Where a scale's time and the notification pauses go: timestamps (time.monotonic, one
clock for every process of the machine) of the operators' steps, their long inbox batches and
the garbage collector's passes, in this process and in traced `tidings matcher` processes.

`python benchmarks/elastic.py --fig13 --trace DIR`: the matchers run as
`python benchmarks/elastic_trace.py matcher ...` (this module wraps the methods below, then
runs `tidings matcher`), each writing `DIR/<pid>.jsonl` when it ends; the benchmark's process
writes its own. `breakdown(DIR, windows)` lines them up per scale. Nothing here changes what
the operators do: each wrapped method is timed and called as it is.
"""

from __future__ import annotations

import atexit
import functools
import gc
import inspect
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson

EVENTS: list[dict[str, Any]] = []
LONG_BATCH_S = 0.005  # inbox batches at least this long are recorded
WHO = {"name": "", "pid": os.getpid()}

# class -> the methods timed (coroutines and plain functions)
METHODS: dict[str, tuple[str, ...]] = {
    "tidings.elastic.operators.matcher:MatcherOperator": (
        "on_scale",
        "shrink_now",
        "tidy",
        "_shrink",
        "drop_slices",
        "_free",
        "fresh_config",
        "resolve",
        "_forward_change",
    ),
    "tidings.elastic.operators.matcher_scale:MatcherScale": (
        "_begin",
        "start",
        "add_state",
        "_build",
        "_ready",
        "change",
    ),
    "tidings.elastic.operators.access_point:AccessPointOperator": ("on_scale",),
    "tidings.elastic.operators.exit_point:ExitPointOperator": ("_matcher_change", "_release"),
    "tidings.elastic.coordination.coordinator:Coordinator": (
        "begin_scale",
        "set_phase",
        "arrive",
        "arrived",
        "wait_barrier",
        "config",
        "require_config",
        "scale",
    ),
    "tidings.elastic.operators.slices:Slice": ("add",),
}


# what a breakdown lists always (the protocol's steps); anything else when this long
STEPS = {
    "MatcherScale.start",
    "MatcherScale.add_state",
    "MatcherScale._build",
    "MatcherScale._ready",
    "MatcherOperator._forward_change",
    "MatcherScale.change",
    "AccessPointOperator.on_scale",
    "ExitPointOperator._matcher_change",
    "Coordinator.begin_scale",
    "Coordinator.set_phase",
    "Coordinator.arrive",
    "Coordinator.wait_barrier",
    "decode",
}
LONG_STEP_S = 0.02


def record(kind: str, start: float, end: float, **detail: Any) -> None:
    EVENTS.append({"kind": kind, "at": start, "s": end - start, "who": WHO["name"], **detail})


def _describe(args: tuple[Any, ...]) -> dict[str, Any]:
    """What an event says of its call: the operator, the scale and barrier, the sizes."""
    out: dict[str, Any] = {}
    for a in args:
        name = type(a).__name__
        if hasattr(a, "role") and hasattr(a, "id"):
            out["op"] = a.id
        elif name == "ScaleState":
            out["scale"], out["phase"] = a.id, a.phase
        elif name in ("StartScale", "ChangeMatcher", "ChangeMatcherOnExitPoint"):
            out["scale"], out["msg"] = a.scale, name
        elif name == "AddMatcherState":
            out["scale"], out["msg"], out["records"] = a.scale, name, len(a.records)
        elif name == "list":
            out["n"] = len(a)
        elif (isinstance(a, str) and len(a) < 40) or (
            isinstance(a, int) and not isinstance(a, bool)
        ):
            out.setdefault("args", []).append(a)
    return out


def _timed(qualified: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    if inspect.iscoroutinefunction(fn):

        @functools.wraps(fn)
        async def co(*args: Any, **kwargs: Any) -> Any:
            start = time.monotonic()
            try:
                return await fn(*args, **kwargs)
            finally:
                record(qualified, start, time.monotonic(), **_describe(args))

        return co

    @functools.wraps(fn)
    def plain(*args: Any, **kwargs: Any) -> Any:
        start = time.monotonic()
        try:
            return fn(*args, **kwargs)
        finally:
            record(qualified, start, time.monotonic(), **_describe(args))

    return plain


def _handle(fn: Callable[..., Any]) -> Callable[..., Any]:
    """An operator's inbox batch: recorded when long, or when it holds anything but
    publications and partial results."""

    @functools.wraps(fn)
    async def handle(self: Any, batch: list[Any]) -> None:
        start = time.monotonic()
        try:
            await fn(self, batch)
        finally:
            end = time.monotonic()
            kinds = {type(m).__name__ for m in batch} - {"Publish", "Partials", "Committed"}
            if end - start >= LONG_BATCH_S or kinds:
                record("handle", start, end, op=self.id, n=len(batch), control=sorted(kinds))

    return handle


def _decode(fn: Callable[[bytes], Any]) -> Callable[[bytes], Any]:
    @functools.wraps(fn)
    def decode(frame: bytes) -> Any:
        if len(frame) < 100_000:
            return fn(frame)
        start = time.monotonic()
        message = fn(frame)
        record("decode", start, time.monotonic(), bytes=len(frame), msg=type(message).__name__)
        return message

    return decode


def _gc(phase: str, info: dict[str, int], started: list[float] = [0.0]) -> None:  # noqa: B006
    if phase == "start":
        started[0] = time.monotonic()
    else:
        end = time.monotonic()
        if info["generation"] == 2 or end - started[0] >= 0.005:
            record("gc", started[0], end, generation=info["generation"])


def install(name: str, directory: Path) -> None:
    """Time the methods above in this process; write the events to `directory` at exit."""
    import importlib

    from tidings.elastic.protocol import channels, wire

    WHO["name"] = name
    for qualified, methods in METHODS.items():
        module, _, cls_name = qualified.partition(":")
        cls = getattr(importlib.import_module(module), cls_name)
        for method in methods:
            setattr(cls, method, _timed(f"{cls_name}.{method}", getattr(cls, method)))
        if cls_name.endswith("Operator"):
            cls.handle = _handle(cls.handle)
    assert channels.wire is wire  # the inbox decodes through this module's function
    wire.decode = _decode(wire.decode)
    gc.callbacks.append(_gc)
    directory.mkdir(parents=True, exist_ok=True)
    atexit.register(write, directory)


def write(directory: Path) -> None:
    """This process's events, to `directory/<name>-<pid>.jsonl` (again: all of them)."""
    path = directory / f"{WHO['name']}.jsonl"
    path.write_bytes(b"".join(orjson.dumps(e) + b"\n" for e in EVENTS))


def load(directory: Path) -> list[dict[str, Any]]:
    events = []
    for path in sorted(directory.glob("*.jsonl")):
        events += [orjson.loads(line) for line in path.read_bytes().splitlines() if line]
    return sorted(events, key=lambda e: e["at"])


def breakdown(directory: Path, windows: list[dict[str, Any]], t0: float) -> list[dict[str, Any]]:
    """Per scale window: every traced step inside it (seconds from the window's start, its
    duration, who), and the longest inbox batches and collector passes of each process."""
    events = load(directory)
    out = []
    for w in windows:
        lo, hi = t0 + w["from_s"], t0 + w["to_s"]
        inside = [e for e in events if e["at"] < hi and e["at"] + e["s"] > lo]
        steps = []
        for e in inside:
            if e["kind"] not in STEPS and e["s"] < LONG_STEP_S:
                continue
            detail = {k: v for k, v in e.items() if k not in ("kind", "at", "s", "who") and v != []}
            steps.append(
                {
                    "from_s": round(e["at"] - lo, 4),
                    "s": round(e["s"], 4),
                    "who": e["who"],
                    "what": e["kind"],
                    **detail,
                }
            )
        out.append({"scale": w["scale"], "steps": steps})
    return out


def matcher_command(directory: Path) -> list[str]:
    """The command line of a traced `tidings matcher` (options follow)."""
    return [sys.executable, str(Path(__file__).resolve()), str(directory), "matcher"]


if __name__ == "__main__":  # python elastic_trace.py DIR matcher --zookeeper ... --cluster ...
    trace_dir = Path(sys.argv.pop(1))
    install(f"matcher-{os.getpid()}", trace_dir)  # the id is known once it has joined
    from tidings.cli.main import main

    main()
