"""The native API, end to end over HTTP."""

from __future__ import annotations

import threading
import time

import httpx
from tests.api.conftest import Sub


def publish(http: httpx.Client, **body: object) -> dict[str, object]:
    response = http.post("/v1/publications", json=body)
    assert response.status_code == 201, response.text
    return response.json()  # type: ignore[no-any-return]


def test_registration_returns_an_id_a_token_and_a_queue_url(http: httpx.Client) -> None:
    raw = http.post("/v1/subscribers").json()
    assert raw["queue_url"].endswith(f"/v1/subscribers/{raw['id']}/messages")
    assert len(raw["token"]) >= 40


def test_a_topic_subscriber_receives_a_matching_publication_once(
    http: httpx.Client, sub: Sub
) -> None:
    first = sub.subscribe(topics=["home/#"])
    second = sub.subscribe(topics=["home/kitchen"])
    pub = publish(http, data={"t": 1}, topics=["home/kitchen"])
    [message] = sub.drain()
    assert message["publication_id"] == pub["id"] and message["body"]["data"] == {"t": 1}
    assert sorted(message["subscription_ids"]) == sorted([first["id"], second["id"]])


def test_a_content_subscriber_receives_only_what_satisfies_every_predicate(
    http: httpx.Client, sub: Sub
) -> None:
    sub.subscribe(
        predicates=[
            {"key": "t", "op": ">", "value": 20},
            {"key": "room", "op": "in", "value": ["kitchen", "hall"]},
        ]
    )
    publish(http, attributes={"t": 25, "room": "kitchen"})
    publish(http, attributes={"t": 15, "room": "kitchen"})
    publish(http, attributes={"t": 25, "room": "attic"})
    assert [m["body"]["attributes"]["t"] for m in sub.drain()] == [25]


def test_a_batch_publishes_all_and_reports_each(http: httpx.Client, sub: Sub) -> None:
    sub.subscribe(topics=["b"])
    raw = http.post(
        "/v1/publications/batch", json={"publications": [{"topics": ["b"]}, {"topics": ["c"]}]}
    ).json()
    assert [p["deliveries"] for p in raw["publications"]] == [1, 0]


def test_a_bad_publication_in_a_batch_rejects_the_whole_batch(http: httpx.Client, sub: Sub) -> None:
    sub.subscribe(topics=["bb"])
    response = http.post(
        "/v1/publications/batch", json={"publications": [{"topics": ["bb"]}, {"topics": ["x/#"]}]}
    )
    assert response.json()["error"]["field"] == "publications[1].topics[0]"
    assert sub.drain() == []


def test_messages_come_in_publication_order(http: httpx.Client, sub: Sub) -> None:
    sub.subscribe(topics=["fifo"])
    ids = [publish(http, topics=["fifo"], data=i)["id"] for i in range(20)]
    assert [m["publication_id"] for m in sub.drain()] == ids


def test_an_unacknowledged_message_comes_back_after_its_visibility_timeout(
    http: httpx.Client, sub: Sub
) -> None:
    sub.subscribe(topics=["vis"])
    publish(http, topics=["vis"])
    [first] = sub.pull(visibility=0.3)
    assert sub.pull() == []
    [again] = sub.pull(wait=5)
    assert (first["attempt"], again["attempt"]) == (1, 2)


def test_a_long_poll_returns_as_soon_as_something_arrives(http: httpx.Client, sub: Sub) -> None:
    sub.subscribe(topics=["lp"])
    timer = threading.Timer(
        0.3, lambda: publish(httpx.Client(base_url=str(http.base_url)), topics=["lp"])
    )
    timer.start()
    started = time.monotonic()
    messages = sub.pull(wait=10)
    assert len(messages) == 1 and time.monotonic() - started < 10


def test_a_nacked_message_is_redelivered(http: httpx.Client, sub: Sub) -> None:
    sub.subscribe(topics=["nack"])
    publish(http, topics=["nack"])
    [m] = sub.pull()
    assert sub.post("/messages/nack", {"receipts": [m["receipt"]]}).json()["acked"] == [
        m["receipt"]
    ]
    assert sub.pull()[0]["attempt"] == 2


def test_after_max_attempts_a_message_is_a_dead_letter_and_can_be_redriven(
    http: httpx.Client, sub: Sub
) -> None:  # this module's server allows 2 attempts
    sub.subscribe(topics=["dlq"])
    publish(http, topics=["dlq"], data="poison")
    for _ in range(2):
        sub.pull(visibility=0)
    assert sub.pull() == []
    [dead] = sub.get("/dead-letters").json()["dead_letters"]
    assert (dead["reason"], dead["body"]["data"]) == ("max_attempts", "poison")
    assert sub.post("/dead-letters/redrive", {}).json() == {"redriven": 1}
    assert [m["attempt"] for m in sub.drain()] == [1]


def test_subscriptions_are_listed_a_page_at_a_time_each_exactly_once(sub: Sub) -> None:
    made = sorted(sub.subscribe(topics=[f"page/{n}"])["id"] for n in range(105))
    first = sub.get("/subscriptions").json()  # 100 by default
    seen: list[str] = []
    pages: list[int] = []
    after: str | None = ""
    while after is not None:
        page = sub.get("/subscriptions", limit=20, after=after).json()
        seen += [s["id"] for s in page["subscriptions"]]
        pages.append(len(page["subscriptions"]))
        after = page["next"]
    assert [s["id"] for s in first["subscriptions"]] == made[:100]
    assert first["next"] == made[99]
    assert seen == made and pages == [20, 20, 20, 20, 20, 5]  # in id order, each once


def test_a_page_of_subscriptions_larger_than_allowed_is_refused(sub: Sub) -> None:
    refused = sub.get("/subscriptions", limit=1001)
    assert refused.status_code == 422
    assert (refused.json()["error"]["code"], refused.json()["error"]["field"]) == (
        "invalid_field",
        "limit",
    )


def test_subscriptions_are_listed_fetched_and_deleted(http: httpx.Client, sub: Sub) -> None:
    made = sub.subscribe(topics=["x"])
    assert [s["id"] for s in sub.get("/subscriptions").json()["subscriptions"]] == [made["id"]]
    assert sub.get(f"/subscriptions/{made['id']}").json()["topics"] == ["x"]
    assert (
        sub.http.delete(f"{sub.base}/subscriptions/{made['id']}", headers=sub.auth).status_code
        == 204
    )
    publish(http, topics=["x"])
    assert sub.drain() == []


def test_the_subscriber_info_shows_its_queue_depth(http: httpx.Client, sub: Sub) -> None:
    sub.subscribe(topics=["depth"])
    publish(http, topics=["depth"]), publish(http, topics=["depth"])
    sub.pull(max=1)
    assert sub.get("").json()["depth"] == {"ready": 1, "leased": 1, "dead": 0}


def test_unregistering_removes_the_queue_and_subscriptions(http: httpx.Client, sub: Sub) -> None:
    sub.subscribe(topics=["gone"])
    assert http.delete(sub.base, headers=sub.auth).status_code == 204
    assert publish(http, topics=["gone"])["deliveries"] == 0
    assert sub.get("/messages").status_code == 403  # its token died with it


def test_health_metrics_and_openapi_are_served(http: httpx.Client) -> None:
    assert http.get("/healthz").json() == {"status": "ok"}
    assert "tidings_publications_total" in http.get("/metrics").text
    spec = http.get("/openapi.json").json()
    assert "/v1/publications" in spec["paths"] and "/api/PublishTopics" in spec["paths"]
    assert http.get("/docs").status_code == 200


def test_a_batch_can_answer_with_counts_instead_of_every_id(http: httpx.Client, sub: Sub) -> None:
    sub.subscribe(topics=["counted"])
    batch = {"publications": [{"topics": ["counted"]}, {"topics": ["nobody"]}] * 500}
    answer = http.post("/v1/publications/batch", params={"answer": "count"}, json=batch)
    assert (answer.status_code, answer.json()) == (201, {"published": 1000, "deliveries": 500})
    assert len(answer.content) < 100  # the ids' answer is some 80 KB
    sub.drain()
    refused = http.post("/v1/publications/batch", params={"answer": "all"}, json=batch)
    assert (refused.status_code, refused.json()["error"]["field"]) == (422, "answer")


def test_a_pull_in_the_compact_form_leaves_out_the_repeated_ids(
    http: httpx.Client, sub: Sub
) -> None:
    sub.subscribe(topics=["compact"])
    http.post("/v1/publications", json={"topics": ["compact"], "data": "x"})
    [message] = sub.get("/messages", max=10, form="compact").json()["messages"]
    assert sorted(message) == ["body", "receipt", "subscription_ids"]
    assert message["body"]["data"] == "x" and "attributes" not in message["body"]


def test_an_unknown_message_form_is_a_client_error(sub: Sub) -> None:
    response = sub.get("/messages", form="tiny")
    assert (response.status_code, response.json()["error"]["field"]) == (422, "form")
