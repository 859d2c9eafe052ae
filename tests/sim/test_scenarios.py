"""The thesis's correctness scenarios against a broker started here, and a suite that must
fail when an expectation is wrong."""

from __future__ import annotations

import asyncio
import dataclasses

import pytest
from typer.testing import CliRunner

from tidings.errors import TidingsError
from tidings.sim import scenarios
from tidings.sim.scenarios import run_suite, suite


@pytest.mark.slow
def test_every_thesis_scenario_gives_every_subscriber_its_expected_count(broker_url: str) -> None:
    rows = asyncio.run(run_suite(broker_url, suite()))
    assert {r.scenario for r in rows} == {"topic", "content", "function", "mixed", "offline"}
    assert [(r.scenario, r.subscriber) for r in rows if not r.ok] == []
    offline = [r.received for r in rows if r.scenario == "offline"]
    assert offline == [2, 2, 2, 3]  # table 6.8 again, drained after coming back


def broken_content() -> list[scenarios.Scenario]:
    content = next(s for s in suite() if s.name == "content")
    first = dataclasses.replace(content.subscribers[0], expected=0)
    return [dataclasses.replace(content, subscribers=[first, *content.subscribers[1:]])]


def test_a_wrong_expectation_is_a_mismatch(broker_url: str) -> None:
    rows = asyncio.run(run_suite(broker_url, broken_content()))
    first = rows[0]
    assert (first.subscriber, first.expected, first.received, first.ok) == (
        "Subscriber1",
        0,
        1,
        False,
    )
    assert all(r.ok for r in rows[1:])


def test_the_scenarios_command_exits_1_on_a_mismatch(
    broker_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tidings.cli.main import _register, app

    _register()
    monkeypatch.setattr(scenarios, "suite", broken_content)
    result = CliRunner().invoke(app, ["scenarios", "--url", broker_url])
    assert result.exit_code == 1
    assert "MISMATCH" in result.output


def test_the_scenarios_command_passes_the_topic_scenario(broker_url: str) -> None:
    from tidings.cli.main import _register, app

    _register()
    result = CliRunner().invoke(app, ["scenarios", "--url", broker_url, "--only", "topic"])
    assert result.exit_code == 0, result.output
    assert "MISMATCH" not in result.output


def test_through_the_thesis_api_every_count_is_the_thesis_s_own(broker_url: str) -> None:
    chosen = [s for s in suite() if s.name in ("topic", "content", "mixed")]
    rows = asyncio.run(run_suite(broker_url, chosen, api="thesis"))
    assert [(r.scenario, r.subscriber) for r in rows if not r.ok] == []
    assert all(r.expected == r.thesis for r in rows)
    third = next(r for r in rows if (r.scenario, r.subscriber) == ("topic", "Subscriber3"))
    assert third.received == 3  # table 6.2: one message per matching topic


def test_an_unknown_api_is_refused_naming_the_option(broker_url: str) -> None:
    from tidings.cli.main import _register, app

    _register()
    result = CliRunner().invoke(app, ["scenarios", "--url", broker_url, "--api", "soap"])
    assert result.exit_code != 0
    assert isinstance(result.exception, TidingsError)
    assert result.exception.field == "--api"
