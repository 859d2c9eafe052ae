"""A subscriber's token guards its queue and subscriptions."""

from __future__ import annotations

import httpx
import pytest
from tests.api.conftest import Sub

ROUTES = [
    ("GET", ""),
    ("GET", "/subscriptions"),
    ("POST", "/subscriptions"),
    ("GET", "/messages"),
    ("POST", "/messages/ack"),
    ("GET", "/dead-letters"),
    ("POST", "/dead-letters/redrive"),
    ("DELETE", ""),
]


@pytest.mark.parametrize(("method", "path"), ROUTES)
def test_a_call_without_a_token_is_unauthorized(
    http: httpx.Client, sub: Sub, method: str, path: str
) -> None:
    response = http.request(method, sub.base + path, json={"topics": ["a"]})
    assert (response.status_code, response.json()["error"]["code"]) == (401, "unauthorized")


@pytest.mark.parametrize(("method", "path"), ROUTES)
def test_another_subscribers_token_is_forbidden(
    http: httpx.Client, sub: Sub, method: str, path: str
) -> None:
    other = Sub(http)
    response = http.request(method, sub.base + path, headers=other.auth, json={"topics": ["a"]})
    assert (response.status_code, response.json()["error"]["code"]) == (403, "forbidden")


def test_a_foreign_receipt_acknowledges_nothing(http: httpx.Client, sub: Sub) -> None:
    other = Sub(http)
    sub.subscribe(topics=["mine"])
    http.post("/v1/publications", json={"topics": ["mine"]})
    [m] = sub.pull()
    assert other.post("/messages/ack", {"receipts": [m["receipt"]]}).json()["unknown"] == [
        m["receipt"]
    ]


def test_an_unknown_subscriber_answers_as_a_wrong_token_does(http: httpx.Client, sub: Sub) -> None:
    """Without the token nobody can tell whether a subscriber id exists."""
    wrong = {"Authorization": "Bearer x"}
    unknown = http.get("/v1/subscribers/nobody/messages", headers=wrong)
    known = http.get(f"{sub.base}/messages", headers=wrong)
    assert (unknown.status_code, unknown.json()["error"]["code"]) == (403, "forbidden")
    assert (known.status_code, known.json()["error"]["code"]) == (403, "forbidden")
