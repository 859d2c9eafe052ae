"""A subscriber's token guards its queue and subscriptions."""

from __future__ import annotations

import uuid
from typing import Any

import httpx
import pytest
from tests.api.conftest import Sub

from tidings.server import EmbeddedServer

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


@pytest.fixture
def store_reads(server: EmbeddedServer, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every look at a subscriber the broker's real store is asked for, as it happens."""
    reads: list[str] = []
    store = server.broker.store.sync
    for name in ("get_subscriber", "token_owner"):
        real = getattr(store, name)

        def counted(key: str, real: Any = real, name: str = name) -> Any:
            reads.append(name)
            return real(key)

        monkeypatch.setattr(store, name, counted)
    return reads


def reads_for(http: httpx.Client, reads: list[str], path: str, token: str) -> list[str]:
    reads.clear()
    response = http.get(path, headers={"Authorization": f"Bearer {token}"})
    assert (response.status_code, response.json()["error"]["code"]) == (403, "forbidden")
    return list(reads)


@pytest.mark.parametrize("route", ["", "/messages", "/subscriptions"])
def test_a_wrong_token_asks_the_store_the_same_whether_the_id_exists_or_not(
    http: httpx.Client, sub: Sub, store_reads: list[str], route: str
) -> None:
    """Time would tell a known id from an unknown one if only one of them cost a store read:
    the token is looked up, never the id it is used on."""
    someone_else = Sub(http).token  # a valid token, known to the broker since registering
    known = reads_for(http, store_reads, sub.base + route, someone_else)
    unknown = reads_for(
        http, store_reads, f"/v1/subscribers/{uuid.uuid4().hex}{route}", someone_else
    )
    assert known == unknown == []
    for first, then in ((sub.base, "/v1/subscribers/nobody"), ("/v1/subscribers/none", sub.base)):
        guessed = [reads_for(http, store_reads, p + route, uuid.uuid4().hex) for p in (first, then)]
        assert guessed == [["token_owner"], ["token_owner"]]  # one read per new token, any id
