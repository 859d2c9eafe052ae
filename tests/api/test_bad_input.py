"""Every client mistake is a 4xx with a JSON error naming the field; nothing accepted is lost."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from tests.api.conftest import Sub

BAD_BODIES: list[tuple[bytes, str]] = [
    (b"{nope", "invalid_json"),
    (b"\xff\xfe", "invalid_utf8"),
    (b"", "invalid_json"),
    (b"[1, 2]", "invalid_field"),
    (b'"text"', "invalid_field"),
    (b"null", "invalid_field"),
]


@pytest.mark.parametrize(("body", "code"), BAD_BODIES)
def test_malformed_publication_bodies_are_client_errors(
    http: httpx.Client, body: bytes, code: str
) -> None:
    response = http.post("/v1/publications", content=body)
    assert response.status_code in (400, 422) and response.json()["error"]["code"] == code


@pytest.mark.parametrize(
    ("body", "code", "field"),
    [
        ({"topics": "a"}, "invalid_field", "topics"),
        ({"topics": ["a//b"]}, "invalid_topic", "topics[0]"),
        ({"topics": ["forged\n/b"]}, "invalid_topic", "topics[0]"),  # a line break ends no segment
        ({"topics": ["a", "a/b\n"]}, "invalid_topic", "topics[1]"),
        ({"attributes": {"x": {"y": 1}}}, "invalid_field", "attributes.x"),
        ({"function_types": [1]}, "invalid_field", "function_types[0]"),
        ({"extra": 1}, "invalid_field", "extra"),
    ],
)
def test_invalid_publications_name_their_field(
    http: httpx.Client, body: dict[str, Any], code: str, field: str
) -> None:
    error = http.post("/v1/publications", json=body).json()["error"]
    assert (error["code"], error["field"]) == (code, field)


@pytest.mark.parametrize(
    ("body", "code", "field"),
    [
        ({}, "invalid_field", "$"),
        ({"topics": []}, "invalid_field", "topics"),
        ({"topics": ["a/#/b"]}, "invalid_topic", "topics[0]"),
        ({"topics": ["forged\n/#"]}, "invalid_topic", "topics[0]"),
        (
            {"predicates": [{"key": "k", "op": "~", "value": 1}]},
            "unknown_operator",
            "predicates[0].op",
        ),
        (
            {"predicates": [{"key": "k", "op": "in", "value": 3}]},
            "invalid_field",
            "predicates[0].value",
        ),
        (
            {"predicates": [{"key": "k", "op": "=", "value": 1}] * 33},
            "limit_exceeded",
            "predicates",
        ),
        ({"function": {"function_type": "t", "url": "ftp://x"}}, "invalid_field", "function.url"),
        # refused when subscribing, not only at each call: denied addresses in any spelling
        *(
            ({"function": {"function_type": "t", "url": url}}, "function_invalid", "function.url")
            for url in (
                "http://169.254.169.254/latest/meta-data/",
                "http://[::ffff:169.254.169.254]/",
                "http://[::]:8080/",
                "http://2852039166/",
                "http://user:pw@example.com/",
            )
        ),
    ],
)
def test_invalid_subscriptions_name_their_field(
    sub: Sub, body: dict[str, Any], code: str, field: str
) -> None:
    response = sub.post("/subscriptions", body)
    assert response.status_code == 422
    assert (response.json()["error"]["code"], response.json()["error"]["field"]) == (code, field)


@pytest.mark.parametrize("body", [{"extra": 1}, {"ephemeral": False, "topics": ["a"]}])
def test_an_unknown_field_on_registering_is_refused_naming_it(
    http: httpx.Client, body: dict[str, Any]
) -> None:
    response = http.post("/v1/subscribers", json=body)
    assert response.status_code == 422
    error = response.json()["error"]
    assert error["code"] == "invalid_field" and error["field"] in body


def test_an_oversize_publication_is_refused_with_413(http: httpx.Client) -> None:
    response = http.post("/v1/publications", json={"data": "x" * (256 * 1024)})
    assert (response.status_code, response.json()["error"]["code"]) == (413, "payload_too_large")


@pytest.mark.parametrize("query", ["max=0", "max=abc", "wait=99", "visibility=-1"])
def test_out_of_range_pull_parameters_are_named(sub: Sub, query: str) -> None:
    name = query.split("=")[0]
    response = sub.http.get(f"{sub.base}/messages?{query}", headers=sub.auth)
    assert (response.status_code, response.json()["error"]["field"]) == (422, name)


def test_an_unknown_route_and_a_wrong_method_are_json_errors(http: httpx.Client) -> None:
    assert http.get("/v2/nothing").json()["error"]["code"] == "not_found"
    assert http.put("/v1/publications").json()["error"]["code"] == "method_not_allowed"


def test_bad_input_loses_nothing_already_accepted(http: httpx.Client, sub: Sub) -> None:
    sub.subscribe(topics=["kept"])
    http.post("/v1/publications", json={"topics": ["kept"], "data": 1})
    for body, _ in BAD_BODIES:
        http.post("/v1/publications", content=body)
    assert [m["body"]["data"] for m in sub.drain()] == [1]
    assert http.get("/healthz").status_code == 200


WIDE = [
    (b'{"data": 18446744073709551616}', "data"),
    (b'{"data": {"n": [-9223372036854775809]}}', "n"),
]


@pytest.mark.parametrize(("body", "field"), WIDE)
def test_an_integer_past_64_bits_is_refused_as_in_messagepack_not_made_a_float(
    http: httpx.Client, sub: Sub, body: bytes, field: str
) -> None:
    batch = b'{"publications": [' + body + b"]}"
    for path, content in [("/v1/publications", body), ("/v1/publications/batch", batch)]:
        error = http.post(path, content=content).json()["error"]
        assert (error["code"], error["field"]) == ("invalid_json", field)
    subscription = b'{"filter": ' + body + b"}"
    answer = http.post(sub.base + "/subscriptions", content=subscription, headers=sub.auth)
    assert answer.json()["error"]["code"] == "invalid_json"


def test_integers_at_the_64_bit_bounds_and_long_digit_strings_are_kept_exactly(
    http: httpx.Client, sub: Sub
) -> None:
    sub.subscribe(topics=["wide"])
    data = [2**64 - 1, -(2**63), "184467440737095516160", 1e300]
    assert http.post("/v1/publications", json={"topics": ["wide"], "data": data}).status_code == 201
    assert [m["body"]["data"] for m in sub.drain()] == [data]


def _match_returning(expression: str) -> str:
    return f"def match(publication):\n    return {expression}\n"


# each under the 64 KiB code limit, each once a 500 (RecursionError, MemoryError) or code a
# worker could not compile
DEEPLY_NESTED = {
    "minus signs": _match_returning("-" * 5_000 + "1"),
    "parenthesised minus signs": _match_returning("-(" * 1_000 + "1" + ")" * 1_000),
    "lists": _match_returning("[" * 1_000 + "]" * 1_000),
    "an attribute chain": _match_returning("publication" + ".a" * 30_000),
    "subscripts": _match_returning("publication" + "[0]" * 20_000),
    "nots": _match_returning("not " * 16_000 + "True"),
    "lambdas": _match_returning("lambda: " * 1_000 + "1"),
    "a long sum": _match_returning("+".join(["1"] * 30_000)),
    "conditionals": _match_returning("1 if 1 else " * 1_000 + "1"),
}


@pytest.mark.parametrize("source", DEEPLY_NESTED.values(), ids=DEEPLY_NESTED.keys())
def test_deeply_nested_code_is_refused_naming_the_field(
    http: httpx.Client, sub: Sub, source: str
) -> None:
    body = {"function": {"function_type": "nested", "code": source}}
    response = sub.post("/subscriptions", body)
    error = response.json()["error"]
    assert (response.status_code, error["code"]) == (422, "function_invalid"), response.text
    assert error["field"] == "function.code" and "nested" in error["message"]
    assert http.get("/healthz").status_code == 200


def test_deeply_nested_format_fields_are_refused_naming_the_field(
    http: httpx.Client, sub: Sub
) -> None:
    template = "{0:" * 10_000 + "}" * 10_000
    body = {
        "function": {"function_type": "nested", "code": _match_returning(f"'{template}'.format(1)")}
    }
    response = sub.post("/subscriptions", body)
    error = response.json()["error"]
    assert (response.status_code, error["code"]) == (422, "function_forbidden"), response.text
    assert error["field"] == "function.code" and "nested" in error["message"]
    assert http.get("/healthz").status_code == 200


@pytest.mark.parametrize("host", ["127.0.0.1", "127.0.0.2", "localhost", "[::ffff:127.0.0.1]"])
def test_a_url_function_on_this_machine_is_refused_naming_the_setting_that_allows_it(
    sub: Sub, host: str
) -> None:
    response = sub.post("/subscriptions", url_function(f"http://{host}:9/match"))
    error = response.json()["error"]
    assert (response.status_code, error["code"]) == (422, "function_invalid"), response.text
    assert error["field"] == "function.url" and "denied network" in error["message"]
    assert "functions.url_allow_networks" in error["message"]


def test_an_operator_may_let_url_functions_reach_this_machine_and_not_the_metadata_service(
    local: httpx.Client,
) -> None:
    sub = Sub(local)
    assert sub.post("/subscriptions", url_function("http://127.0.0.1:9/match")).status_code == 201
    for url in ("http://169.254.169.254/latest/meta-data/", "http://[::1]:9/match"):
        refused = sub.post("/subscriptions", url_function(url))
        assert refused.status_code == 422, refused.text
        assert refused.json()["error"]["code"] == "function_invalid"


def url_function(url: str) -> dict[str, Any]:
    return {"function": {"function_type": "local", "url": url}}
