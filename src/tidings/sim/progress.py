"""The live line: publications sent of planned, deliveries and their rate, ETA; and the
same as a JSON file rewritten as it goes, for a watcher in another process (the console)."""

from __future__ import annotations

import os
import time
from pathlib import Path
from types import TracebackType

import orjson
from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeRemainingColumn,
)


class ProgressLine:
    """A rich progress line on stderr; silent when `show` is false."""

    def __init__(self, planned: int, show: bool) -> None:
        self._progress: Progress | None = None
        self._task = TaskID(0)
        self._last = (time.monotonic(), 0)
        self._rate = 0.0
        if show:
            self._progress = Progress(
                TextColumn("[bold]{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn("{task.fields[delivered]} delivered ({task.fields[rate]:.0f}/s)"),
                TextColumn("ETA"),
                TimeRemainingColumn(),
                console=Console(stderr=True),
            )
            self._task = self._progress.add_task("publishing", total=planned, delivered=0, rate=0)

    def __enter__(self) -> ProgressLine:
        if self._progress is not None:
            self._progress.start()
        return self

    def __exit__(self, *exc: type[BaseException] | BaseException | TracebackType | None) -> None:
        if self._progress is not None:
            self._progress.stop()

    def update(self, published: int, delivered: int, phase: str) -> None:
        now = time.monotonic()
        then, before = self._last
        if now - then >= 1.0:
            self._rate, self._last = (delivered - before) / (now - then), (now, delivered)
        if self._progress is not None:
            self._progress.update(
                self._task,
                completed=published,
                description=phase,
                delivered=delivered,
                rate=self._rate,
            )


class ProgressFile:
    """`{"phase", "published", "planned", "delivered", "delivered_per_s", "p50_ms", "p99_ms",
    "at"}` at `path`, replaced whole (write, then rename) at most twice a second."""

    EVERY_S = 0.5

    def __init__(self, path: Path | None, planned: int) -> None:
        self.path, self.planned = path, planned
        self._written = 0.0
        self._last = (time.monotonic(), 0)
        self._rate = 0.0

    def update(
        self, published: int, delivered: int, phase: str, latencies: list[float], final: bool
    ) -> None:
        now = time.monotonic()
        if self.path is None or (now - self._written < self.EVERY_S and not final):
            return
        then, before = self._last
        if now > then:
            self._rate, self._last = (delivered - before) / (now - then), (now, delivered)
        ordered = sorted(latencies)

        def ms(q: float) -> float | None:
            return round(ordered[int(q * (len(ordered) - 1))] * 1000, 2) if ordered else None

        state = {
            "phase": phase,
            "published": published,
            "planned": self.planned,
            "delivered": delivered,
            "delivered_per_s": round(self._rate, 1),
            "p50_ms": ms(0.5),
            "p99_ms": ms(0.99),
            "at": time.time(),
        }
        partial = self.path.with_suffix(".tmp")
        partial.write_bytes(orjson.dumps(state))
        os.replace(partial, self.path)
        self._written = now
