"""GET /v1/admin/topics: the topics published to, with their publications, deliveries and
rates; guarded by the admin token; bounded whatever the number of topics publishers invent."""

from __future__ import annotations

from typing import Any

import httpx
from tests.api.conftest import Sub

from tidings.broker.traffic import MAX_TOPICS


def topics(http: httpx.Client, admin: dict[str, str]) -> dict[str, Any]:
    response = http.get("/v1/admin/topics", headers=admin)
    assert response.status_code == 200, response.text
    return response.json()  # type: ignore[no-any-return]


def row(seen: dict[str, Any], topic: str) -> dict[str, Any]:
    return next(t for t in seen["topics"] if t["topic"] == topic)


def test_the_topics_need_the_admin_token(http: httpx.Client, sub: Sub) -> None:
    assert http.get("/v1/admin/topics").status_code == 401
    refused = http.get("/v1/admin/topics", headers=sub.auth)
    assert refused.status_code == 403
    assert refused.json()["error"]["code"] == "forbidden"


def test_a_topic_counts_its_publications_and_deliveries_and_its_rates_move(
    http: httpx.Client, admin: dict[str, str]
) -> None:
    subscribers = [Sub(http), Sub(http)]
    for s in subscribers:
        s.subscribe(topics=["rates/#"])
    http.post("/v1/publications", json={"topics": ["rates/quiet"]})
    before = row(topics(http, admin), "rates/quiet")
    assert (before["publications"], before["deliveries"]) == (1, 2)
    for _ in range(5):
        http.post("/v1/publications", json={"topics": ["rates/busy"], "data": 1})
    batch = [{"topics": ["rates/busy"]}] * 5
    assert http.post("/v1/publications/batch", json={"publications": batch}).status_code == 201
    seen = topics(http, admin)
    busy = row(seen, "rates/busy")
    assert (busy["publications"], busy["deliveries"]) == (10, 20)
    assert busy["publications_per_s"] > 0 and busy["deliveries_per_s"] > 0
    assert busy["deliveries_per_s"] > busy["publications_per_s"]  # two subscribers each
    assert busy["publications_per_s"] > row(seen, "rates/quiet")["publications_per_s"]
    assert seen["topics"].index(busy) < seen["topics"].index(row(seen, "rates/quiet"))
    for s in subscribers:
        s.drain()


def test_a_publication_without_a_topic_is_on_none(
    http: httpx.Client, admin: dict[str, str]
) -> None:
    before = topics(http, admin)
    http.post("/v1/publications", json={"attributes": {"x": 1}})
    after = topics(http, admin)
    assert [t["topic"] for t in after["topics"]] == [t["topic"] for t in before["topics"]]
    assert sum(t["publications"] for t in after["topics"]) == sum(
        t["publications"] for t in before["topics"]
    )


def test_invented_topics_past_the_bound_are_summed_as_other(
    http: httpx.Client, admin: dict[str, str]
) -> None:
    before = topics(http, admin)
    count = 2 * MAX_TOPICS + 50  # past the point where the least busy are folded
    batch = [{"topics": [f"invented/{n}"]} for n in range(count)]
    assert http.post("/v1/publications/batch", json={"publications": batch}).status_code == 201
    seen = topics(http, admin)
    assert len(seen["topics"]) == seen["max_topics"] == MAX_TOPICS
    assert seen["other"]["publications"] > 0
    total = sum(t["publications"] for t in seen["topics"]) + seen["other"]["publications"]
    total_before = sum(t["publications"] for t in before["topics"])
    assert total == total_before + before["other"]["publications"] + count
    assert seen["window_s"] > 0
