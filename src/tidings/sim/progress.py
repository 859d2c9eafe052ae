"""The live line: publications sent of planned, deliveries and their rate, ETA."""

from __future__ import annotations

import time
from types import TracebackType

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeRemainingColumn,
)


class Line:
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

    def __enter__(self) -> Line:
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
