"""The thesis's API and its correctness scenarios (tables 6.1-6.8), verbatim bodies."""

from __future__ import annotations

import threading
from typing import Any

import httpx
import pytest


class CompatSubscriber:
    def __init__(self, http: httpx.Client) -> None:
        raw = http.post("/api/RegisterSubscriber").json()
        self.http, self.id, self.queue = http, raw["subscriberId"], raw["queueUrl"]
        self.auth = {"Authorization": f"Bearer {raw['token']}"}
        self.raw = raw

    def call(self, name: str, body: dict[str, Any]) -> httpx.Response:
        return self.http.post(
            f"/api/{name}", json={"subscriberId": self.id, **body}, headers=self.auth
        )

    def received(self) -> list[dict[str, Any]]:
        answer = self.http.get(self.queue, params={"max": 100}, headers=self.auth)
        messages: list[dict[str, Any]] = answer.json()["messages"]
        if messages:
            self.http.post(
                f"{self.queue}/ack",
                json={"receipts": [m["receipt"] for m in messages]},
                headers=self.auth,
            )
        return messages


def test_registration_answers_the_thesis_fields_and_an_absolute_queue_url(
    http: httpx.Client,
) -> None:
    raw = CompatSubscriber(http).raw
    assert {"subscriberId", "queueName", "queueUrl", "connectionString", "token"} <= set(raw)
    assert raw["queueUrl"].startswith("http://127.0.0.1:")


def run_topic_scenario(http: httpx.Client, offline: bool) -> list[int]:
    subs = [CompatSubscriber(http) for _ in range(4)]
    for s, topics in zip(
        subs, [["topic1", "topic2"], ["topic2"], ["topic2", "topic3"], []], strict=True
    ):
        if topics:
            assert s.call("SubscribeTopics", {"topics": topics}).status_code == 200
    counts = [0] * 4
    for topics in (["topic1"], ["topic2", "topic3"], ["topic3"], ["topic4"]):
        http.post("/api/PublishTopics", json={"message": "Publication text.", "topics": topics})
        if not offline:
            counts = [c + len(s.received()) for c, s in zip(counts, subs, strict=True)]
    if offline:
        counts = [len(s.received()) for s in subs]
    return counts


@pytest.mark.parametrize("offline", [False, True], ids=["online", "offline"])
def test_the_topic_scenario_delivers_2_1_3_0(http: httpx.Client, offline: bool) -> None:
    assert run_topic_scenario(http, offline) == [2, 1, 3, 0]


def run_content_scenario(http: httpx.Client, offline: bool) -> list[int]:
    subs = [CompatSubscriber(http) for _ in range(4)]
    conditions = [
        ("content1", "<", "1000"),
        ("content2", "=", "1000"),
        ("content1", ">", "200"),
        ("content3", "=", "text"),
    ]
    for s, (key, cond, value) in zip(subs, conditions, strict=True):
        response = s.call(
            "SubscribeContent", {"content": [{"key": key, "value": value, "condition": cond}]}
        )
        assert response.status_code == 200, response.text
    counts = [0] * 4
    for key, value in (
        ("content1", "200"),
        ("content2", "500"),
        ("content3", "text"),
        ("content3", "mobile"),
    ):
        http.post(
            "/api/PublishContent",
            json={"message": value, "content": [{"key": key, "value": value}]},
        )
        if not offline:
            counts = [c + len(s.received()) for c, s in zip(counts, subs, strict=True)]
    if offline:
        counts = [len(s.received()) for s in subs]
    return counts


@pytest.mark.parametrize("offline", [False, True], ids=["online", "offline"])
def test_the_content_scenario_delivers_1_0_0_1(http: httpx.Client, offline: bool) -> None:
    assert run_content_scenario(http, offline) == [1, 0, 0, 1]


def test_a_compat_message_carries_the_publication_and_what_matched(http: httpx.Client) -> None:
    s = CompatSubscriber(http)
    s.call("SubscribeTopics", {"topics": ["computer", "science"]})
    http.post(
        "/api/PublishTopics",
        json={"message": "Publication text.", "topics": ["computer", "science"]},
    )
    bodies = sorted((m["body"]["topic"], m["body"]["message"]) for m in s.received())
    assert bodies == [("computer", "Publication text."), ("science", "Publication text.")]


def test_numeric_strings_compare_as_numbers_and_text_as_text(http: httpx.Client) -> None:
    s = CompatSubscriber(http)
    s.call(
        "SubscribeContent",
        {
            "content": [
                {"key": "money", "value": "1000", "condition": ">="},
                {"key": "computer", "value": "Intel", "condition": "="},
            ]
        },
    )
    for money in ("999", "1000.0", "20000"):
        http.post(
            "/api/PublishContent",
            json={
                "message": money,
                "content": [
                    {"key": "computer", "value": "Intel"},
                    {"key": "money", "value": money},
                ],
            },
        )
    assert [m["body"]["message"] for m in s.received()] == ["1000.0", "20000"]


def test_unregistering_deletes_the_queue(http: httpx.Client) -> None:
    s = CompatSubscriber(http)
    assert s.call("UnregisterSubscriber", {"queueUrl": s.queue}).status_code == 200
    assert http.get(s.queue, headers=s.auth).status_code == 403  # its token died with it


@pytest.mark.parametrize(
    ("name", "body", "field"),
    [
        ("SubscribeTopics", {"topics": "topic1"}, "topics"),
        (
            "SubscribeContent",
            {"content": [{"key": "k", "value": "1", "condition": "≈"}]},
            "content[0].condition",
        ),
        ("SubscribeContent", {"content": [{"key": "k"}]}, "content[0].value"),
        (
            "SubscribeFunction",
            {"functionType": "magic", "subscriptionTopic": "t", "matchingFunction": "x"},
            "functionType",
        ),
        ("UnregisterSubscriber", {"queueUrl": "someone-else"}, "queueUrl"),
    ],
)
def test_bad_compat_input_names_the_thesis_field(
    http: httpx.Client, name: str, body: dict[str, Any], field: str
) -> None:
    response = CompatSubscriber(http).call(name, body)
    assert response.status_code == 422 and response.json()["error"]["field"] == field


def test_publishing_without_a_message_is_refused(http: httpx.Client) -> None:
    response = http.post("/api/PublishTopics", json={"topics": ["t"]})
    assert response.json()["error"] == {
        "code": "missing_field",
        "message": "the field is required",
        "field": "message",
    }


def test_compat_calls_need_the_subscribers_token(http: httpx.Client) -> None:
    s = CompatSubscriber(http)
    response = http.post("/api/SubscribeTopics", json={"subscriberId": s.id, "topics": ["a"]})
    assert response.status_code == 401


def test_a_queue_read_waits_for_a_publication(http: httpx.Client) -> None:
    s = CompatSubscriber(http)
    s.call("SubscribeTopics", {"topics": ["late"]})
    url = str(http.base_url).rstrip("/") + "/api/PublishTopics"
    timer = threading.Timer(0.3, httpx.post, [url], {"json": {"message": 1, "topics": ["late"]}})
    timer.start()
    answer = http.get(s.queue, params={"wait": 10}, headers=s.auth).json()
    timer.join()
    assert [m["body"]["message"] for m in answer["messages"]] == [1]


def test_a_compat_queue_is_the_native_queue(http: httpx.Client) -> None:
    s = CompatSubscriber(http)
    s.call("SubscribeTopics", {"topics": ["shared"]})
    http.post("/api/PublishTopics", json={"message": "m", "topics": ["shared"]})
    [first] = http.get(s.queue, headers=s.auth).json()["messages"]
    released = http.post(
        f"/v1/subscribers/{s.id}/messages/nack",
        json={"receipts": [first["receipt"]]},
        headers=s.auth,
    )
    assert released.json()["acked"] == [first["receipt"]]
    [again] = s.received()
    assert (again["id"], again["attempt"]) == (first["id"], 2)
    assert s.received() == []


def test_unregistering_someone_elses_queue_url_is_refused(http: httpx.Client) -> None:
    s, other = CompatSubscriber(http), CompatSubscriber(http)
    response = s.call("UnregisterSubscriber", {"queueUrl": other.queue})
    assert (response.status_code, response.json()["error"]["field"]) == (422, "queueUrl")


def test_contains_values_past_the_subscriber_s_budget_name_the_thesis_field(
    http: httpx.Client,
) -> None:
    s = CompatSubscriber(http)
    for n in range(2):  # 2 x 32 x 1,024 characters: the budget, exactly
        content = [
            {"key": "body", "value": f"{n}{p:02d}".ljust(1024, "z"), "condition": "contains"}
            for p in range(32)
        ]
        assert s.call("SubscribeContent", {"content": content}).status_code == 200
    past = s.call(
        "SubscribeContent", {"content": [{"key": "body", "value": "y", "condition": "contains"}]}
    )
    assert past.status_code == 422, past.text
    assert past.json()["error"]["field"] == "content[0].value"
    assert "max_contains_chars_per_subscriber" in past.json()["error"]["message"]
