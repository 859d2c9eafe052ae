"""Measured throughputs per instance and workload: the study's data file, or `tidings perf`.

A TOML file holds `[[throughput]]` entries (`instance`, `workload`, `msgs_per_s`); any other file
is read as JSON lines from `tidings perf --json`, whose `received_per_s` is the throughput.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from tidings.cost.files import Doc, Header, header, number, read, text
from tidings.cost.files import array as entries
from tidings.errors import invalid

STUDY_DEFAULT = "rabbitmq-lindmark-jarvela-2019.toml"


@dataclass(frozen=True, slots=True)
class Throughput:
    """One measurement; `origin` names where it came from, for errors about it."""

    instance: str
    workload: str
    msgs_per_s: float
    origin: str


@dataclass(frozen=True, slots=True)
class Measurements:
    header: Header | None
    throughputs: tuple[Throughput, ...]


def load(
    path: Path | None, instance: str | None = None, workload: str | None = None
) -> Measurements:
    """The study's data (no path), a TOML data file, or JSON lines from `tidings perf --json`."""
    if path is None or path.suffix == ".toml":
        return load_toml(path)
    return load_perf(path, instance, workload)


def load_toml(path: Path | None = None) -> Measurements:
    doc = read(path, STUDY_DEFAULT, folder="measurements")
    found = tuple(
        _entry(doc, i, e) for i, e in enumerate(entries(doc, doc.table, "throughput", "throughput"))
    )
    return Measurements(header(doc, priced=False), found)


def _entry(doc: Doc, index: int, table: dict[str, Any]) -> Throughput:
    where = f"throughput[{index}]"
    return Throughput(
        instance=text(doc, table, "instance", f"{where}.instance"),
        workload=text(doc, table, "workload", f"{where}.workload"),
        msgs_per_s=number(doc, table, "msgs_per_s", f"{where}.msgs_per_s"),
        origin=doc.where(f"{where}.instance"),
    )


def load_perf(path: Path, instance: str | None, workload: str | None) -> Measurements:
    try:
        lines = path.read_bytes().splitlines()
    except OSError as exc:
        raise invalid(str(path), f"cannot be read: {exc.strerror or exc}") from None
    found = tuple(
        _perf_line(f"{path}:{n}", raw, instance, workload)
        for n, raw in enumerate(lines, start=1)
        if raw.strip()
    )
    if not found:
        raise invalid(str(path), "holds no JSON lines from `tidings perf --json`")
    return Measurements(None, found)


def _perf_line(where: str, raw: bytes, instance: str | None, workload: str | None) -> Throughput:
    try:
        line = orjson.loads(raw)
    except orjson.JSONDecodeError:
        raise invalid(where, "is not a JSON object") from None
    if not isinstance(line, dict):
        raise invalid(where, "is not a JSON object")
    rate = line.get("received_per_s")
    if isinstance(rate, bool) or not isinstance(rate, int | float) or rate < 0:
        raise invalid(f"{where}.received_per_s", "is required and must be a number >= 0")
    name = instance or line.get("instance")
    if not isinstance(name, str) or not name:
        raise invalid(f"{where}.instance", "names no instance: add the field or give --instance")
    origin = "--instance" if instance else f"{where}.instance"
    return Throughput(name, workload or _workload(line), float(rate), origin)


def _workload(line: dict[str, Any]) -> str:
    """A named workload, else the topic count (top level or in the perf `workload` object)
    named like the study's queue tests: `topics: 10` is `10 queues`."""
    named = line.get("workload")
    if isinstance(named, str) and named:
        return named
    topics = named.get("topics") if isinstance(named, dict) else line.get("topics")
    if isinstance(topics, int) and not isinstance(topics, bool) and topics > 0:
        return f"{topics} queue" if topics == 1 else f"{topics} queues"
    return "perf"


def maxima(throughputs: tuple[Throughput, ...]) -> dict[str, dict[str, float]]:
    """workload -> instance -> highest throughput measured (the study's Maximum Throughput)."""
    found: dict[str, dict[str, float]] = {}
    for t in throughputs:
        per_instance = found.setdefault(t.workload, {})
        per_instance[t.instance] = max(per_instance.get(t.instance, 0.0), t.msgs_per_s)
    return found
