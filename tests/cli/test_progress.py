"""The long commands' progress display: bars and spinners on a terminal's stderr, nothing at
all anywhere else."""

from __future__ import annotations

import io
import re
import time
from collections import namedtuple
from typing import Any

from rich.console import Console

from tidings.cli.progress import Stages, cell, spark_tasks

ESCAPE = "\x1b["


def terminal() -> tuple[Console, io.StringIO]:
    out = io.StringIO()
    return Console(file=out, force_terminal=True, width=100), out


def a_job(stages: Stages) -> None:
    stages.update("starting Spark")
    stages.update("runs", 3, 10)
    stages.say("a sentence for the user")
    stages.update("matching and enqueueing", 1200)
    time.sleep(0.3)  # a refresh or two


def test_on_a_terminal_each_stage_is_a_line_with_a_bar_when_its_total_is_known() -> None:
    console, out = terminal()
    with Stages(console=console) as stages:
        a_job(stages)
    drawn = out.getvalue()
    assert ESCAPE in drawn and "━" in drawn
    assert "✓" in drawn  # the stages before the last are marked done
    assert "starting Spark" in drawn and "3/10" in drawn and "1,200" in drawn
    assert "a sentence for the user" in drawn
    assert drawn.endswith("\x1b[2K")  # transient: the lines are erased at the end


def test_a_stage_that_comes_round_again_starts_a_fresh_line() -> None:
    console, out = terminal()
    with Stages(console=console) as stages:
        stages.update("snapshot")
        stages.update("matching", 10)
        stages.update("snapshot")  # the next batch
        stages.update("matching", 3)
    last = out.getvalue().rsplit("\x1b[?25h", 1)[0].rsplit("\r", 1)[-1]  # the last frame
    assert last.count("snapshot") == last.count("matching") == 1
    assert re.search(r"matching\s+3\s", last) and "10" not in last


def test_without_a_terminal_nothing_is_drawn_only_the_sentences_are_written() -> None:
    out = io.StringIO()
    with Stages(console=Console(file=out)) as stages:
        assert not stages.live
        a_job(stages)
    assert out.getvalue() == "a sentence for the user\n"


def test_under_json_nothing_is_drawn_even_on_a_terminal() -> None:
    console, out = terminal()
    with Stages(enabled=False, console=console) as stages:
        stages.update("runs", 1, 2)
    assert out.getvalue() == ""


StageInfo = namedtuple("StageInfo", "stageId name numTasks numCompletedTasks")


class Tracker:
    def __init__(self, stages: list[StageInfo]) -> None:
        self.stages = {s.stageId: s for s in stages}

    def getActiveStageIds(self) -> list[int]:
        return [*self.stages, 99]  # 99: ended between the two calls

    def getStageInfo(self, stage: int) -> StageInfo | None:
        return self.stages.get(stage)


def test_spark_s_running_stages_give_their_tasks_done_of_all() -> None:
    inside = "$anonfun$withThreadLocalCaptured$1 at <unknown>:0"  # no action to name
    running = [StageInfo(3, "collect at jobs.py:120", 4, 1),
               StageInfo(4, "count at x.py:1", 2, 2), StageInfo(5, inside, 1, 0)]  # fmt: skip
    tracker: Any = Tracker(running)
    assert spark_tasks(tracker) == (3, 7, "stage 3: collect, stage 4: count, stage 5")
    idle: Any = Tracker([])
    assert spark_tasks(idle) is None


def test_a_cell_reads_as_a_person_reads_a_number() -> None:
    assert [cell(5.6868), cell(412.345), cell(12345), cell(2.0), cell(None), cell(True)] == [
        "5.69", "412.3", "12,345", "2", "-", "yes",
    ]  # fmt: skip
