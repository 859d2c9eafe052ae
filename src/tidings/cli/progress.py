"""The long commands' progress on stderr, and their end summary on stdout.

`Stages` draws one line per stage of a job on stderr: a bar when the stage's total is known,
a spinner (and a count, when there is one) when it is not; a line for Spark's running tasks
while a Spark job runs. It is transient (gone when the command ends) and draws only on a
terminal: when stderr is a pipe or a file, or under `--json`, it draws nothing at all.
`update(stage, done, total)` has the shape of the jobs' `on_progress` callbacks; `say`
writes a plain sentence on stderr, terminal or not (what a user must know at once, such as
"starting Spark").

The summary is a rich `Table` on stdout (`show`), or with `--json` one JSON object
(`emit`); stdout never carries anything else.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable, Iterable, Sequence
from types import TracebackType
from typing import TYPE_CHECKING, Any

import orjson
import typer
from rich import box
from rich.console import Console, RenderableType
from rich.progress import (
    BarColumn,
    Progress,
    ProgressColumn,
    SpinnerColumn,
    Task,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
)
from rich.table import Table
from rich.text import Text

if TYPE_CHECKING:
    from pyspark import StatusTracker
    from pyspark.sql import SparkSession

OnProgress = Callable[[str, int, int], None]
"""(stage, done, total): total 0 when it is not known."""

SPARK = "Spark tasks"
STARTING = "starting Spark"


class _Bar(ProgressColumn):
    """A bar for a stage whose total is known; nothing for a spinner-only stage."""

    def __init__(self, width: int) -> None:
        super().__init__()
        self._bar = BarColumn(bar_width=width)

    def render(self, task: Task) -> RenderableType:
        return self._bar.render(task) if task.fields.get("known") else Text("")


class _Count(ProgressColumn):
    """`done/total`, or `done` alone when the total is not known (nothing for 0)."""

    def render(self, task: Task) -> RenderableType:
        done = int(task.completed)
        if task.fields.get("known"):
            return Text(f"{done:,}/{int(task.total or 0):,}")
        return Text(f"{done:,}" if done else "")


def on_terminal() -> bool:
    """Whether stderr is a terminal that can draw a live display."""
    console = Console(stderr=True)
    return console.is_terminal and not console.is_dumb_terminal


class Stages:
    """A job's stages on stderr, on a terminal only; silent when `enabled` is false."""

    def __init__(self, enabled: bool = True, console: Console | None = None) -> None:
        self.console = console if console is not None else Console(stderr=True)
        self.live = enabled and self.console.is_terminal and not self.console.is_dumb_terminal
        self._progress: Progress | None = None
        if self.live:
            self._progress = Progress(
                SpinnerColumn(finished_text="[green]✓[/]"),
                TextColumn("{task.description}"),
                _Bar(30),
                _Count(),
                TextColumn("[dim]{task.fields[detail]}"),
                TimeElapsedColumn(),
                console=self.console,
                transient=True,
                # results printed meanwhile (a followed batch) appear above the bars when
                # stdout is the same terminal, and go straight to a pipe or file otherwise
                redirect_stdout=sys.stdout.isatty() and self.console.file is sys.stderr,
            )
        self._tasks: dict[str, TaskID] = {}
        self._open: list[str] = []
        self._watch: threading.Thread | None = None
        self._stop = threading.Event()

    def __enter__(self) -> Stages:
        if self._progress is not None:
            self._progress.start()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self._stop.set()
        if self._watch is not None:
            self._watch.join(timeout=5)
        if self._progress is not None:
            self._progress.stop()

    def update(self, stage: str, done: int = 0, total: int = 0, detail: str = "") -> None:
        """Show `stage` with `done` of `total` (0: unknown). A stage not open starts a new
        line (one that comes round again, as the next batch's, moves to the end), and the
        lines before it are marked done."""
        progress = self._progress
        if progress is None:
            return
        known = total > 0
        if stage not in self._open:
            self.finish()
            old = self._tasks.pop(stage, None)
            if old is not None:
                progress.remove_task(old)
            self._tasks[stage] = progress.add_task(
                stage, total=total if known else None, completed=done, detail=detail, known=known
            )
            self._open.append(stage)
        task = self._tasks[stage]
        progress.update(
            task, total=total if known else None, completed=done, detail=detail, known=known
        )

    def __call__(self, stage: str, done: int, total: int) -> None:
        """The jobs' `on_progress` callback."""
        self.update(stage, done, total)

    def finish(self) -> None:
        """Mark every open stage done."""
        progress = self._progress
        if progress is None:
            return
        for stage in self._open:
            task = self._tasks[stage]
            shown = next(t for t in progress.tasks if t.id == task)
            end = max(int(shown.completed), int(shown.total or 0))
            progress.update(task, total=end, completed=end)
        self._open.clear()

    def say(self, text: str) -> None:
        """One plain line on stderr (above the bars when they are drawn)."""
        self.console.print(text, markup=False, highlight=False, soft_wrap=True)

    def watch_spark(self, spark: SparkSession, every_s: float = 0.5) -> None:
        """A line for Spark's running stages: their tasks done of their total, from the
        status tracker, while the display lasts (hidden while no stage runs)."""
        progress = self._progress
        if progress is None or self._watch is not None:
            return
        from py4j.protocol import Py4JError

        task = progress.add_task(SPARK, total=None, detail="", known=True, visible=False)
        tracker = spark.sparkContext.statusTracker()

        def poll() -> None:
            while not self._stop.wait(every_s):
                try:
                    running = spark_tasks(tracker)
                except (Py4JError, OSError):  # Spark is stopping: the line just ends
                    return
                if running is None:
                    progress.update(task, visible=False)
                else:
                    done, total, detail = running
                    progress.update(task, visible=True, completed=done, total=total,
                                    detail=detail)  # fmt: skip

        self._watch = threading.Thread(target=poll, name="tidings-spark-progress", daemon=True)
        self._watch.start()


def start_spark(stages: Stages, master: str, app_name: str = "tidings-pipeline") -> SparkSession:
    """The session, its start shown as a stage, then a line for its running tasks; Spark's
    own console bar off (these lines replace it)."""
    from tidings.pipeline.session import build_session

    stages.update(STARTING)
    spark = build_session(master, app_name, console_progress=False)
    stages.watch_spark(spark)
    return spark


def spark_tasks(tracker: StatusTracker) -> tuple[int, int, str] | None:
    """(tasks done, tasks, "stage N: name") over Spark's running stages; None when none runs."""
    stages = [tracker.getStageInfo(i) for i in tracker.getActiveStageIds()]
    running = [s for s in stages if s is not None]
    if not running:
        return None
    done = sum(s.numCompletedTasks for s in running)
    total = sum(s.numTasks for s in running)
    return done, max(total, done), ", ".join(_stage_name(s.stageId, s.name) for s in running)


def _stage_name(stage: int, name: str) -> str:
    """`stage 3: collect` from Spark's "collect at jobs.py:120"; the number alone for a
    name of Spark's insides (`$anonfun$...`)."""
    action = name.split(" at ")[0]
    return f"stage {stage}: {action}" if action.isidentifier() else f"stage {stage}"


def emit(body: Any) -> None:
    """One JSON object (or one line of a JSON Lines stream) on stdout."""
    typer.echo(orjson.dumps(body, option=orjson.OPT_NON_STR_KEYS).decode())


def table(title: str, columns: Sequence[str], rows: Iterable[Sequence[Any]]) -> Table:
    """A summary table: a column of numbers to the right, any other to the left, each cell
    as `cell` writes it (folded on a narrow terminal, never cut); light rules (a heavy one
    is a progress bar's)."""
    rows = [list(row) for row in rows]
    made = Table(title=title, box=box.SIMPLE, show_edge=False, title_justify="left")
    for i, column in enumerate(columns):
        cells = [row[i] for row in rows if i < len(row) and row[i] is not None]
        number = bool(cells) and all(_number(value) for value in cells)
        made.add_column(column, justify="right" if number else "left", overflow="fold")
    for row in rows:
        made.add_row(*(cell(value) for value in row))
    return made


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def show(*parts: RenderableType) -> None:
    """Tables and lines on stdout, for a person: a line is never wrapped, and a table not
    written to a terminal takes its natural width (up to 200 columns), not 80."""
    console = Console()
    if not console.is_terminal:
        console.width = max(console.width, 200)
    for part in parts:
        line = isinstance(part, str)
        console.print(part, soft_wrap=line, highlight=not line, markup=not line)


def cell(value: Any) -> str:
    """A number as a person reads it: 5.69, 412.3, 12,345; whole numbers without a point."""
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float) and not value.is_integer():
        return f"{value:,.2f}" if abs(value) < 100 else f"{value:,.1f}"
    return f"{int(value):,}" if isinstance(value, int | float) else str(value)
