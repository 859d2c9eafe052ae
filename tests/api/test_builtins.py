"""The function library as the API lists it: each builtin with its parameters' schema."""

from __future__ import annotations

import httpx
from tests.api.conftest import Sub

from tidings.functions import BUILTINS


def test_every_builtin_is_listed_with_the_schema_of_its_params(http: httpx.Client) -> None:
    listed = {b["name"]: b for b in http.get("/v1/functions/builtins").json()["builtins"]}
    assert set(listed) == set(BUILTINS)
    language = listed["detect_language"]
    assert language["module"] == "text" and language["params"]["required"] == ["language"]
    assert language["params"]["properties"]["language"]["type"] == "string"
    assert listed["sentiment"]["params"]["properties"]["label"]["enum"] == [
        "negative",
        "neutral",
        "positive",
    ]
    assert all(b["available"] is (b["extra"] is None) for b in listed.values())


def test_the_listed_schema_is_the_one_a_subscription_is_checked_against(
    http: httpx.Client, sub: Sub
) -> None:
    listed = {b["name"]: b for b in http.get("/v1/functions/builtins").json()["builtins"]}
    properties = listed["key_phrases"]["params"]["properties"]
    assert properties["any_of"]["type"] == "array"
    spec = {"function_type": "text", "builtin": "key_phrases", "params": {"any_of": ["moon"]}}
    assert sub.post("/subscriptions", {"function": spec}).status_code == 201
    spec["params"] = {"any_of": ["moon"], "unlisted": 1}
    refused = sub.post("/subscriptions", {"function": spec})
    assert refused.status_code == 422 and "unlisted" not in properties
