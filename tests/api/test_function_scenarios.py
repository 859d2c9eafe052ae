"""Function-based matching end to end: the thesis's scenarios (tables 6.5-6.8) and the
paper's population example, through a real server and its sandbox workers."""

from __future__ import annotations

import time
from typing import Any

import httpx
import pytest
from tests.api.test_compat import CompatSubscriber
from tests.functions.images import WITH_FACE, WITHOUT_FACES, encoded

ENGLISH = "The weather in Munich is sunny and warm today."
SPANISH = "El tiempo en Madrid es soleado y cálido hoy."
POPULATION = """
import re

POPULATION = {"New Zealand": 4_900_000, "Waikato": 500_000, "Munich": 1_500_000,
              "Germany": 83_000_000}

def match(publication):
    text = publication["data"] if isinstance(publication["data"], str) else ""
    return any(place in text and people > 4_000_000 for place, people in POPULATION.items())
"""


def settle(subs: list[CompatSubscriber], expected_total: int, timeout: float = 90) -> list[int]:
    """Counts per subscriber once function deliveries (asynchronous) have arrived."""
    got: list[list[Any]] = [[] for _ in subs]
    deadline = time.monotonic() + timeout
    while sum(map(len, got)) < expected_total and time.monotonic() < deadline:
        for mine, s in zip(got, subs, strict=True):
            mine += [m["body"]["message"] for m in s.received()]
        time.sleep(0.2)
    time.sleep(0.5)  # nothing more may arrive
    for mine, s in zip(got, subs, strict=True):
        mine += [m["body"]["message"] for m in s.received()]
    return [len(mine) for mine in got]


def subscribe_function(
    s: CompatSubscriber, kind: str, topic: str, fn: str, params: dict[str, Any] | None = None
) -> None:
    body = {"functionType": kind, "subscriptionTopic": topic, "matchingFunction": fn}
    if params is not None:
        body["parameters"] = params
    response = s.call("SubscribeFunction", body)
    assert response.status_code == 200, response.text


@pytest.mark.slow
def test_the_function_scenario_gives_each_subscriber_exactly_one(http: httpx.Client) -> None:
    english, faces = CompatSubscriber(http), CompatSubscriber(http)
    subscribe_function(english, "builtin", "text", "detect_language", {"language": "en"})
    subscribe_function(faces, "builtin", "vision", "detect_faces")
    for message, topic in (
        (SPANISH, "text"),
        (ENGLISH, "text"),
        ({"image": encoded(WITH_FACE)}, "vision"),
        ({"image": encoded(WITHOUT_FACES[0])}, "vision"),
    ):
        body = {"message": message, "subscriptionTopics": [topic]}
        assert http.post("/api/PublishFunctions", json=body).status_code == 200
    assert settle([english, faces], 2) == [1, 1]


@pytest.mark.slow
def test_the_mixed_scenario_delivers_2_2_2_3(http: httpx.Client) -> None:
    # subscribers on topic1 / content1 / English text, in four combinations (table 6.7)
    combos = [
        ("topic", "content"),
        ("content", "function"),
        ("topic", "function"),
        ("topic", "content", "function"),
    ]
    subs = [CompatSubscriber(http) for _ in combos]
    for s, kinds in zip(subs, combos, strict=True):
        if "topic" in kinds:
            assert s.call("SubscribeTopics", {"topics": ["topic1"]}).status_code == 200
        if "content" in kinds:
            content = [{"key": "content1", "value": "1", "condition": "="}]
            response = s.call("SubscribeContent", {"content": content})
            assert response.status_code == 200, response.text
        if "function" in kinds:
            subscribe_function(s, "builtin", "text", "detect_language", {"language": "en"})
    http.post("/api/PublishTopics", json={"message": "m1", "topics": ["topic1"]})
    http.post(
        "/api/PublishContent",
        json={"message": "m2", "content": [{"key": "content1", "value": "1"}]},
    )
    http.post("/api/PublishFunctions", json={"message": ENGLISH, "subscriptionTopics": ["text"]})
    expected = [2, 2, 2, 3]
    assert settle(subs, sum(expected)) == expected


def test_the_papers_population_example_runs_as_subscriber_code(http: httpx.Client) -> None:
    s = CompatSubscriber(http)
    subscribe_function(s, "code", "places", POPULATION)
    for text in (
        "DEBS2018 will be held at the University of Waikato in New Zealand.",
        "Oktoberfest happens in Munich.",
    ):
        http.post("/api/PublishFunctions", json={"message": text, "subscriptionTopics": ["places"]})
    [received] = [m["body"]["message"] for m in _wait(s)]
    assert "New Zealand" in received


def _wait(s: CompatSubscriber) -> list[dict[str, Any]]:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        got = s.received()
        if got:
            time.sleep(0.5)
            return got + s.received()
        time.sleep(0.1)
    return []


def test_a_url_function_can_point_at_the_brokers_own_library(http: httpx.Client) -> None:
    s = CompatSubscriber(http)
    url = str(http.base_url).rstrip("/") + "/api/DetectLanguages"
    warm = {"publication": {"data": "warm up"}, "params": {"language": "en"}}
    assert http.post(url, json=warm, timeout=60).status_code == 200  # load the models once
    subscribe_function(s, "url", "text", url, {"language": "es"})
    http.post("/api/PublishFunctions", json={"message": ENGLISH, "subscriptionTopics": ["text"]})
    http.post("/api/PublishFunctions", json={"message": SPANISH, "subscriptionTopics": ["text"]})
    assert [m["body"]["message"] for m in _wait(s)] == [SPANISH]


def test_a_url_function_cannot_point_at_the_brokers_other_paths(http: httpx.Client) -> None:
    """Called with a publication, the broker's own /api/RegisterSubscriber would register a
    subscriber per evaluation: only its library is a URL function's target there."""
    s = CompatSubscriber(http)
    url = str(http.base_url).rstrip("/") + "/api/RegisterSubscriber"
    body = {"functionType": "url", "subscriptionTopic": "t", "matchingFunction": url}
    error = s.call("SubscribeFunction", body).json()["error"]
    assert error["code"] == "function_invalid" and "own" in error["message"]


def test_forbidden_subscriber_code_is_refused_with_the_line(http: httpx.Client) -> None:
    s = CompatSubscriber(http)
    body = {
        "functionType": "code",
        "subscriptionTopic": "t",
        "matchingFunction": "def match(p):\n    import os\n    return True\n",
    }
    error = s.call("SubscribeFunction", body).json()["error"]
    assert error["code"] == "function_forbidden" and "line 2" in error["message"]
    assert error["field"] == "matchingFunction"


def test_a_failing_function_is_suspended_and_its_owner_can_resume_it(http: httpx.Client) -> None:
    raw = http.post("/v1/subscribers").json()
    auth = {"Authorization": f"Bearer {raw['token']}"}
    base = f"/v1/subscribers/{raw['id']}/subscriptions"
    sub = http.post(
        base,
        headers=auth,
        json={"function": {"function_type": "boom", "code": "def match(p):\n    return 1 / 0\n"}},
    ).json()
    for _ in range(5):
        http.post("/v1/publications", json={"function_types": ["boom"]})
    deadline = time.monotonic() + 30
    while http.get(f"{base}/{sub['id']}", headers=auth).json()["status"] != "suspended":
        assert time.monotonic() < deadline
        time.sleep(0.2)
    state = http.get(f"{base}/{sub['id']}", headers=auth).json()
    assert "ZeroDivisionError" in state["status_reason"]
    assert http.post(f"{base}/{sub['id']}/resume", headers=auth).json()["status"] == "active"


def test_a_runaway_function_does_not_hold_back_topic_and_content_deliveries(
    http: httpx.Client,
) -> None:
    owner = http.post("/v1/subscribers").json()
    auth = {"Authorization": f"Bearer {owner['token']}"}
    runaway = {"function_type": "spin", "code": "def match(p):\n    while True:\n        pass\n"}
    http.post(
        f"/v1/subscribers/{owner['id']}/subscriptions", headers=auth, json={"function": runaway}
    )
    reader = http.post("/v1/subscribers").json()
    rauth = {"Authorization": f"Bearer {reader['token']}"}
    http.post(
        f"/v1/subscribers/{reader['id']}/subscriptions", headers=rauth, json={"topics": ["news"]}
    )
    # each answer reports the topic deliveries already committed, while the runaway spins
    answers = [
        http.post("/v1/publications", json={"topics": ["news"], "function_types": ["spin"]})
        for _ in range(10)
    ]
    assert [a.json()["deliveries"] for a in answers] == [1] * 10
    got = http.get(f"/v1/subscribers/{reader['id']}/messages", params={"max": 100}, headers=rauth)
    assert len(got.json()["messages"]) == 10
