"""AWS Lambda's handlers as Lambda runs them: API Gateway's events (HTTP API v2, REST API
v1) and an EventBridge schedule's, each function instance a process of its own (a fresh one
per request: the cold path; one for many: the warm path), over PostgreSQL."""

from __future__ import annotations

import orjson
import pytest
from tests.serverless.door import door, invoke, scenarios
from tests.test_readme import blocks, run

from tidings.serverless.events import Request, aws_event

pytestmark = [pytest.mark.service, pytest.mark.slow]
SCHEDULED = {
    "version": "0",
    "id": "53dc4d37-cffa-4f76-80c9-8b7d4a4d2eaa",
    "detail-type": "Scheduled Event",
    "source": "aws.events",
    "account": "123456789012",
    "time": "2026-11-27T00:00:00Z",
    "region": "us-east-1",
    "resources": ["arn:aws:events:us-east-1:123456789012:rule/tidings-housekeeping"],
    "detail": {},
}


@pytest.mark.parametrize("fmt", ["v2", "v1"])
def test_the_readme_tour_runs_as_written_through_one_warm_instance(schema: str, fmt: str) -> None:
    [tour] = [b for b in blocks() if "# 1. Register a subscriber" in b]
    with door(schema, "--format", fmt, "--instances", "1") as url:
        done = run(tour, url.rsplit(":", 1)[1])
    assert done.returncode == 0, done.stderr
    assert '"hello"\n"hot!"\n' in done.stdout
    assert '"acked":["' in done.stdout and '"unknown":[]' in done.stdout


def test_the_thesis_calls_run_as_written_with_a_fresh_instance_for_every_request(
    schema: str,
) -> None:
    [thesis] = [b for b in blocks() if "RegisterSubscriber" in b]
    with door(schema, "--format", "v1", "--cold") as url:
        done = run(thesis, url.rsplit(":", 1)[1])
    assert done.returncode == 0, done.stderr
    assert '"deliveries":2' in done.stdout and '"message":"Publication text."' in done.stdout


def test_the_thesis_s_correctness_scenarios_pass_through_the_handler(schema: str) -> None:
    # several instances, each with its own index: a subscription made through one matches
    # through another once the staleness bound has passed (the scenarios wait for it)
    with door(schema, "--instances", "3", TIDINGS_SUBSCRIPTIONS__STALENESS_S="0.5") as url:
        done = scenarios(url)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert "MISMATCH" not in done.stdout


def test_binary_bodies_cross_the_gateway_whole_both_ways(schema: str) -> None:
    import httpx
    import msgspec

    packed = {"content-type": "application/msgpack"}
    with door(schema, "--instances", "1") as url, httpx.Client(base_url=url) as http:
        me = http.post("/v1/subscribers", json={}).json()
        auth = {"authorization": f"Bearer {me['token']}"}
        http.post(f"/v1/subscribers/{me['id']}/subscriptions", json={"topics": ["t"]},
                  headers=auth)  # fmt: skip
        body = msgspec.msgpack.encode({"data": b"\x00\xff binary", "topics": ["t"]})
        published = http.post("/v1/publications", content=body, headers=packed)
        assert published.status_code == 201 and published.json()["deliveries"] == 1
        pulled = http.get(f"/v1/subscribers/{me['id']}/messages?encoding=msgpack", headers=auth)
    assert pulled.headers["content-type"] == "application/msgpack"
    [message] = msgspec.msgpack.decode(pulled.content)["messages"]
    assert message["body"]["data"] == b"\x00\xff binary"


def test_a_schedule_s_event_runs_the_chores_in_a_fresh_instance(schema: str) -> None:
    register = aws_event(Request("POST", "/v1/subscribers", headers={"host": "a.example",
                         "content-type": "application/json"}, body=b"{}"))  # fmt: skip
    said = invoke("aws", [register, SCHEDULED], schema, TIDINGS_SERVERLESS__PUSH_S="1")
    created, chores = said[0]["answer"], said[1]["answer"]
    assert created["statusCode"] == 201
    assert orjson.loads(created["body"])["queue_url"].startswith("https://a.example/v1/")
    assert set(chores) >= {"messages_expired", "subscribers_expired", "evaluations_resumed"}
    # the cold start's phases, as the start-up benchmark reads them
    assert {"connect_s", "load_s"} <= set(said[0]["timings"]) and said[0]["import_s"] > 0
