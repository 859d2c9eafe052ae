"""Lanes: who is suspect, and which queued calls a suspension cancels."""

from __future__ import annotations

from tidings.config import FunctionSettings
from tidings.sandbox import FunctionOutcome
from tidings.sandbox import lanes as lanes_module
from tidings.sandbox.lanes import MAX_PAUSE_S, Lanes


def test_a_subscriber_is_suspect_while_its_calls_fail_or_run_slow() -> None:
    lanes = Lanes(FunctionSettings())
    lanes.observe("u", [FunctionOutcome("s", False, "cpu time limit exceeded")], slow=False)
    assert lanes.suspect("u")
    lanes.observe("u", [FunctionOutcome("s", True)], slow=True)
    assert lanes.suspect("u")
    lanes.observe("u", [FunctionOutcome("s", True)], slow=False)
    assert not lanes.suspect("u")


def test_a_cancellation_reaches_the_evaluations_started_before_it_only() -> None:
    lanes = Lanes(FunctionSettings())
    before = lanes.ticket()
    lanes.cancel("s")
    after = lanes.ticket()
    assert lanes.cancelled("s", before) and not lanes.cancelled("s", after)
    assert not lanes.cancelled("other", before)


def test_the_quarantine_queue_is_bounded_while_its_subscriber_keeps_failing() -> None:
    lanes = Lanes(FunctionSettings(quarantine_queue=2))
    lanes.gate("u").waiting = lanes.gate("v").waiting = 2
    lanes.pause("u", ["ZeroDivisionError: division by zero"])
    assert lanes.full("u") and not lanes.full("v")  # v failed once only: it waits its turn


SPIN = ["cpu time limit exceeded"]


def test_a_runaways_pause_doubles_and_a_success_ends_it() -> None:
    lanes = Lanes(FunctionSettings(cpu_ms=100))
    assert [lanes.pause("u", SPIN) for _ in range(3)] == [0.1, 0.2, 0.4]
    assert lanes.pause("u", [None]) == 0.0
    assert lanes.pause("u", ["killed: time or memory limit exceeded"]) == 0.1
    assert max(lanes.pause("u", SPIN) for _ in range(20)) == MAX_PAUSE_S


def test_a_function_that_merely_raises_costs_nothing_and_is_not_paused() -> None:
    lanes = Lanes(FunctionSettings(cpu_ms=100))
    raised = ["ZeroDivisionError: division by zero"]
    assert [lanes.pause("u", raised) for _ in range(3)] == [0.0] * 3
    assert lanes.gate("u").failures == 3  # still failing in a row: still bounded and shed


def test_cancellations_are_forgotten_once_no_evaluation_started_before_them_runs() -> None:
    lanes = Lanes(FunctionSettings())
    running = lanes.ticket()
    for n in range(3 * lanes_module.PRUNE_AT):
        lanes.cancel(f"s{n}")
    assert lanes.cancelled("s0", running)  # the evaluation that started before still runs
    lanes.done(running)
    later = lanes.ticket()
    lanes.cancel("last")
    lanes.done(later)
    assert lanes.remembered() < lanes_module.PRUNE_AT
    assert not lanes.cancelled("s0", lanes.ticket())
