"""Publishers' dedup ids through the API: single, batch, the thesis's field and header, the
bounds; a duplicate delivers nothing and runs no function."""

from __future__ import annotations

import time
import uuid

import httpx
from tests.api.conftest import Sub


def topic() -> str:
    return f"dedup/{uuid.uuid4().hex[:8]}"


def test_a_repeated_publication_is_answered_as_the_first_and_delivered_once(
    http: httpx.Client,
) -> None:
    sub, t = Sub(http), topic()
    sub.subscribe(topics=[t])
    key = uuid.uuid4().hex
    first = http.post("/v1/publications", json={"data": 1, "topics": [t], "dedup_id": key})
    again = http.post("/v1/publications", json={"data": 2, "topics": [t], "dedup_id": key})
    other = http.post("/v1/publications", json={"data": 3, "topics": [t]})
    assert first.status_code == again.status_code == other.status_code == 201
    assert "duplicate" not in first.json()
    assert again.json() == {**first.json(), "duplicate": True}
    assert [m["body"]["data"] for m in sub.pull()] == [1, 3]


def test_a_batch_names_each_publication_and_a_repeat_within_it_is_a_duplicate(
    http: httpx.Client,
) -> None:
    sub, t = Sub(http), topic()
    sub.subscribe(topics=[t])
    a, b = uuid.uuid4().hex, uuid.uuid4().hex
    items = [{"data": i, "topics": [t], "dedup_id": k} for i, k in enumerate([a, b, a])]
    answer = http.post("/v1/publications/batch", json={"publications": items}).json()
    first, second, third = answer["publications"]
    assert third == {**first, "duplicate": True} and second["id"] != first["id"]
    again = http.post("/v1/publications/batch", json={"publications": items[1:2]}).json()
    assert again["publications"] == [{**second, "duplicate": True}]
    assert sorted(m["body"]["data"] for m in sub.pull()) == [0, 1]


def test_the_thesis_api_takes_a_dedup_id_as_a_field_or_a_header(http: httpx.Client) -> None:
    sub, t = Sub(http), topic()
    sub.subscribe(topics=[t])
    field, header = uuid.uuid4().hex, uuid.uuid4().hex
    body = {"message": "m", "topics": [t], "dedupId": field}
    first = http.post("/api/PublishTopics", json=body).json()
    assert http.post("/api/PublishTopics", json=body).json() == {**first, "duplicate": True}
    content = {"message": "c", "content": [{"key": "k", "value": 1}]}
    sent = [
        http.post("/api/PublishContent", json=content, headers={"Tidings-Dedup-Id": header})
        for _ in range(2)
    ]
    assert sent[1].json() == {**sent[0].json(), "duplicate": True}
    assert len(sub.pull()) == 1


def test_a_dedup_id_is_one_to_128_characters(http: httpx.Client) -> None:
    long = {"data": 1, "dedup_id": "x" * 129}
    refused = http.post("/v1/publications", json=long)
    assert refused.status_code == 422 and refused.json()["error"]["field"] == "dedup_id"
    batch = http.post("/v1/publications/batch", json={"publications": [{"dedup_id": ""}]})
    assert batch.status_code == 422
    assert batch.json()["error"]["field"] == "publications[0].dedup_id"
    header = {"Tidings-Dedup-Id": "x" * 129}
    thesis = http.post("/api/PublishTopics", json={"message": 1, "topics": ["t"]}, headers=header)
    assert thesis.status_code == 422
    assert http.post("/v1/publications", json={"data": 1, "dedup_id": "x" * 128}).status_code == 201


def test_the_broker_states_its_limits(http: httpx.Client) -> None:
    limits = http.get("/v1/limits").json()
    assert limits["max_publication_bytes"] == 256 * 1024
    assert limits["max_answer_bytes"] >= limits["max_publication_bytes"] * 4 // 3
    assert limits["dedup_window_s"] == 120.0


def test_a_duplicate_runs_no_function(http: httpx.Client) -> None:
    sub = Sub(http)
    function = {"function_type": "lang", "builtin": "detect_language", "params": {"language": "en"}}
    sub.subscribe(function=function)
    text = "The quick brown fox jumps over the lazy dog, and then it runs away home."
    key = uuid.uuid4().hex
    for body in ({"dedup_id": key}, {"dedup_id": key}, {}):  # the last one marks the end
        sent = http.post(
            "/v1/publications", json={"data": text, "function_types": ["lang"], **body}
        )
        assert sent.status_code == 201
    got: list[dict[str, object]] = []
    deadline = time.monotonic() + 60
    while len(got) < 2 and time.monotonic() < deadline:
        got += sub.pull(wait=1)
    time.sleep(1.0)  # a third delivery, if the duplicate had been evaluated, would be in by now
    got += sub.pull(wait=0.5)
    assert len(got) == 2


def keyed(key: str | None) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"} if key else {}


def test_a_dedup_id_is_its_publishers_own(http: httpx.Client) -> None:
    """Scoped by the key a publisher sends (any secret of its own on an open broker): one
    publisher cannot take another's ids first, suppressing its publications."""
    sub, t, name = Sub(http), topic(), uuid.uuid4().hex
    sub.subscribe(topics=[t])

    def publish(key: str | None, data: int) -> bool:
        body = {"data": data, "topics": [t], "dedup_id": name}
        answer = http.post("/v1/publications", json=body, headers=keyed(key))
        assert answer.status_code == 201, answer.text
        return bool(answer.json().get("duplicate"))

    assert [publish(k, i) for i, k in enumerate(["key-a", "key-b", None])] == [False] * 3
    assert [publish(k, i) for i, k in enumerate(["key-a", "key-b", None], 3)] == [True] * 3
    assert sorted(m["body"]["data"] for m in sub.pull()) == [0, 1, 2]


def test_an_anonymous_publisher_cannot_suppress_a_keyed_ones_publication(
    http: httpx.Client,
) -> None:
    sub, t, name = Sub(http), topic(), uuid.uuid4().hex
    sub.subscribe(topics=[t])
    http.post("/v1/publications", json={"data": "forged", "topics": [t], "dedup_id": name})
    body = {"message": "real", "topics": [t], "dedupId": name}
    victim = http.post("/api/PublishTopics", json=body, headers=keyed("victim-key")).json()
    assert "duplicate" not in victim
    batch = {"publications": [{"data": "batched", "topics": [t], "dedup_id": name}]}
    answer = http.post("/v1/publications/batch", json=batch, headers=keyed("other-key")).json()
    assert "duplicate" not in answer["publications"][0]
    pulled = sorted(m["body"]["data"] for m in sub.pull())
    assert pulled == ["batched", "forged", "real"]
