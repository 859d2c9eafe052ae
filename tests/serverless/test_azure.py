"""Azure Functions' app as the host runs it: the HTTP trigger's requests and the timer's,
each function instance a process of its own (fresh per request: the cold path; one for many:
the warm path), over PostgreSQL."""

from __future__ import annotations

import base64

import orjson
import pytest
from tests.serverless.door import door, invoke, scenarios
from tests.test_readme import blocks, run

pytestmark = [pytest.mark.service, pytest.mark.slow]


def test_the_readme_tour_runs_as_written_through_one_warm_instance(schema: str) -> None:
    [tour] = [b for b in blocks() if "# 1. Register a subscriber" in b]
    with door(schema, "--platform", "azure", "--instances", "1") as url:
        done = run(tour, url.rsplit(":", 1)[1])
    assert done.returncode == 0, done.stderr
    assert '"hello"\n"hot!"\n' in done.stdout
    assert '"acked":["' in done.stdout and '"unknown":[]' in done.stdout


def test_the_thesis_calls_run_as_written_with_a_fresh_instance_for_every_request(
    schema: str,
) -> None:
    [thesis] = [b for b in blocks() if "RegisterSubscriber" in b]
    with door(schema, "--platform", "azure", "--cold") as url:
        done = run(thesis, url.rsplit(":", 1)[1])
    assert done.returncode == 0, done.stderr
    assert '"deliveries":2' in done.stdout and '"message":"Publication text."' in done.stdout


def test_the_thesis_s_correctness_scenarios_pass_through_the_function(schema: str) -> None:
    args = ("--platform", "azure", "--instances", "3")
    with door(schema, *args, TIDINGS_SUBSCRIPTIONS__STALENESS_S="0.5") as url:
        done = scenarios(url)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert "MISMATCH" not in done.stdout


def test_the_timer_runs_the_chores_in_the_instance_the_requests_warmed(schema: str) -> None:
    register = {"method": "POST", "url": "https://fn.example/v1/subscribers",
                "headers": {"content-type": "application/json"},
                "body": base64.b64encode(b"{}").decode()}  # fmt: skip
    said = invoke("azure", [register, {"timer": {}}], schema, TIDINGS_SERVERLESS__PUSH_S="1")
    created = said[0]["answer"]
    assert created["status"] == 201
    queue_url = orjson.loads(base64.b64decode(created["body"]))["queue_url"]
    assert queue_url.startswith("https://fn.example/v1/subscribers/")
    assert said[1]["answer"] == {"status": 0}  # a timer answers nothing
    assert {"connect_s", "load_s"} <= set(said[0]["timings"])
