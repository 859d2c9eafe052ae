"""The webhook routes: set, read, delete, resume; the URL checked; the subscriber's token
required. (Delivery itself: tests/delivery/test_webhooks.py.)"""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from tests.api.conftest import Sub

# no subscription, so nothing is ever pushed to these (192.0.2.0/24: documentation's own)
URL = "http://192.0.2.1:9/hook"
OTHER = "https://hooks.example.org:8443/in?key=1"


def put(sub: Sub, body: Any) -> httpx.Response:
    return sub.http.put(f"{sub.base}/webhook", json=body, headers=sub.auth)


def test_set_read_replace_and_delete_a_webhook(sub: Sub) -> None:
    made = put(sub, {"url": URL})
    assert made.status_code == 200, made.text
    hook = made.json()
    assert hook["secret"].startswith("whsec_") and len(hook["secret"]) == 6 + 43
    assert [hook[k] for k in ("url", "state", "reason", "failures")] == [URL, "active", None, 0]
    assert sub.get("/webhook").json() == hook
    assert sub.get("").json()["webhook"] == {"url": URL, "state": "active", "reason": None}
    replaced = put(sub, {"url": OTHER}).json()
    assert replaced["url"] == OTHER and replaced["secret"] == hook["secret"]
    assert sub.http.delete(f"{sub.base}/webhook", headers=sub.auth).status_code == 204
    assert sub.get("").json()["webhook"] is None
    for gone in (
        sub.get("/webhook"),
        sub.http.delete(f"{sub.base}/webhook", headers=sub.auth),
        sub.post("/webhook/resume"),
    ):
        assert gone.status_code == 404 and gone.json()["error"]["code"] == "not_found"
    assert put(sub, {"url": URL}).json()["secret"] != hook["secret"]  # a new one after delete


def test_a_webhooks_retention_is_the_queues_unless_it_says_less(sub: Sub) -> None:
    week = 7 * 24 * 3600.0  # the queues' retention, by default
    assert put(sub, {"url": URL}).json()["retention_s"] == week
    assert put(sub, {"url": URL, "retention_s": 3600}).json()["retention_s"] == 3600
    assert sub.get("/webhook").json()["retention_s"] == 3600
    assert put(sub, {"url": URL, "retention_s": None}).json()["retention_s"] == week


def test_resuming_an_active_webhook_changes_nothing_but_its_failures(sub: Sub) -> None:
    hook = put(sub, {"url": URL}).json()
    resumed = sub.post("/webhook/resume")
    assert resumed.status_code == 200
    assert {k: resumed.json()[k] for k in ("url", "state", "failures", "secret")} == {
        "url": URL,
        "state": "active",
        "failures": 0,
        "secret": hook["secret"],
    }


@pytest.mark.parametrize(
    ("body", "code", "field"),
    [
        ({"url": "ftp://files.example/x"}, "invalid_field", "url"),
        ({"url": "http://"}, "invalid_field", "url"),
        ({"url": "http:///path"}, "invalid_field", "url"),
        ({"url": "http://a b.example/"}, "invalid_field", "url"),
        ({"url": "http://bücher.example/"}, "invalid_field", "url"),
        ({"url": "http://user:pw@host.example/"}, "invalid_field", "url"),
        ({"url": "http://host.example:99999/"}, "invalid_field", "url"),
        ({"url": "http://host.example:port/"}, "invalid_field", "url"),
        ({"url": "http://host.example:0/"}, "invalid_field", "url"),
        ({"url": "http://[::1/"}, "invalid_field", "url"),
        ({"url": "http://169.254.169.254/latest/meta-data/"}, "invalid_field", "url"),
        ({"url": "http://[::ffff:169.254.169.254]/"}, "invalid_field", "url"),
        ({"url": "http://100.100.100.200/"}, "invalid_field", "url"),
        ({"url": "http://[::]:8080/"}, "invalid_field", "url"),  # reaches [::1] listeners
        ({"url": "http://[::1]:8080/"}, "invalid_field", "url"),
        ({"url": "http://[64:ff9b::a9fe:a9fe]/"}, "invalid_field", "url"),  # NAT64
        ({"url": "http://[2002:a9fe:a9fe::]/"}, "invalid_field", "url"),  # 6to4
        ({"url": "http://2852039166/"}, "invalid_field", "url"),  # 169.254.169.254 as a number
        ({"url": "http://x.example/" + "a" * 2048}, "invalid_field", "url"),
        ({"url": "example.org"}, "invalid_field", "url"),
        ({"url": 42}, "invalid_field", "url"),
        ({}, "missing_field", "url"),
        ({"url": URL, "secret": "mine"}, "invalid_field", "secret"),
        ({"url": URL, "retention_s": 0}, "invalid_field", "retention_s"),
        ({"url": URL, "retention_s": "1h"}, "invalid_field", "retention_s"),
        ({"url": URL, "retention_s": 7 * 24 * 3600 + 1}, "invalid_field", "retention_s"),
    ],
)
def test_a_bad_url_is_refused_naming_it(sub: Sub, body: Any, code: str, field: str) -> None:
    answer = put(sub, body)
    assert answer.status_code == 422, answer.text
    assert answer.json()["error"]["code"] == code and answer.json()["error"]["field"] == field
    assert sub.get("/webhook").status_code == 404  # nothing was stored


def test_a_body_that_is_not_json_is_refused(sub: Sub) -> None:
    answer = sub.http.put(f"{sub.base}/webhook", content=b"{url", headers=sub.auth)
    assert answer.status_code == 400 and answer.json()["error"]["code"] == "invalid_json"


def test_the_webhook_is_the_subscribers_alone(http: httpx.Client, sub: Sub) -> None:
    put(sub, {"url": URL})
    other = Sub(http)
    calls = [
        ("PUT", "/webhook", {"url": OTHER}),
        ("GET", "/webhook", None),
        ("DELETE", "/webhook", None),
        ("POST", "/webhook/resume", None),
    ]
    for method, path, body in calls:
        url = sub.base + path
        assert http.request(method, url, json=body, headers=other.auth).status_code == 403
        assert http.request(method, url, json=body).status_code == 401
    assert sub.get("/webhook").json()["url"] == URL  # untouched


@pytest.mark.parametrize("host", ["127.0.0.1", "127.0.0.2", "localhost", "[::ffff:127.0.0.1]"])
def test_a_webhook_to_this_machine_is_refused_naming_the_setting_that_allows_it(
    sub: Sub, host: str
) -> None:
    answer = put(sub, {"url": f"http://{host}:9/hook"})
    error = answer.json()["error"]
    assert (answer.status_code, error["code"], error["field"]) == (422, "invalid_field", "url")
    assert "denied network" in error["message"]
    assert "webhooks.allow_networks" in error["message"]
    assert sub.get("/webhook").status_code == 404


def test_an_operator_may_allow_this_machine_and_still_not_the_metadata_service(
    local: httpx.Client,
) -> None:
    sub = Sub(local)
    assert put(sub, {"url": "http://127.0.0.1:9/hook"}).status_code == 200
    assert put(sub, {"url": "http://localhost:9/hook"}).status_code == 200
    for url in ("http://169.254.169.254/latest/meta-data/", "http://[::1]:9/hook"):
        refused = put(sub, {"url": url})
        assert refused.status_code == 422 and "denied network" in refused.json()["error"]["message"]
    assert sub.get("/webhook").json()["url"] == "http://localhost:9/hook"


def test_a_webhook_to_the_broker_itself_is_refused(local: httpx.Client) -> None:
    """Even where the operator lets webhooks reach this machine."""
    sub = Sub(local)
    port = str(local.base_url).rstrip("/").rsplit(":", 1)[1]
    embedding = ("[::ffff:7f00:1]", "[::7f00:1]", "[64:ff9b::7f00:1]", "[2002:7f00:1::]")
    for host in ("127.0.0.1", "localhost", "127.0.0.2", *embedding):  # 127.0.0.1 inside IPv6
        answer = put(sub, {"url": f"http://{host}:{port}/api/RegisterSubscriber"})
        assert answer.status_code == 422, (host, answer.text)
        assert answer.json()["error"]["field"] == "url"
        assert "own" in answer.json()["error"]["message"]
    assert sub.get("/webhook").status_code == 404
