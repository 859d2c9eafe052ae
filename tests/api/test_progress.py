"""A publication's function evaluations, said in the publish answer and followed after it."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from tests.api.conftest import Sub

from tidings.client import Client
from tidings.config import AccessSettings, load_settings
from tidings.ids import new_id
from tidings.server import EmbeddedServer


def progress_of(http: httpx.Client, published: dict[str, Any], **kw: Any) -> dict[str, Any]:
    """Read with the publish answer's progress token, as its publisher does."""
    params = {"token": published["progress_token"]}
    answer: dict[str, Any] = http.get(
        f"/v1/publications/{published['id']}", params=params, **kw
    ).json()
    return answer


def progress_until_evaluated(http: httpx.Client, published: dict[str, Any]) -> dict[str, Any]:
    deadline = time.monotonic() + 30  # generous: a loaded machine starts the runner slowly
    while True:
        seen = progress_of(http, published)
        if not seen["evaluating"] or time.monotonic() > deadline:
            return seen
        time.sleep(0.1)


def test_a_function_publish_says_its_pending_evaluations_then_its_outcome(
    http: httpx.Client, sub: Sub
) -> None:
    spec = {"function_type": "prog", "builtin": "key_phrases", "params": {"any_of": ["tide"]}}
    matching = Sub(http)  # one delivery per subscriber and publication: another subscriber
    matching.subscribe(function=spec)
    sub.subscribe(topics=["prog/t"])
    body = {"topics": ["prog/t"], "function_types": ["prog"], "data": "the tide turns"}
    published = http.post("/v1/publications", json=body).json()
    assert (published["deliveries"], published["evaluations"]) == (1, 1)
    done = progress_until_evaluated(http, published)
    assert done == {"id": published["id"], "evaluating": False, "deliveries": 2}
    assert [len(sub.pull()), len(matching.pull())] == [1, 1]


def test_a_publish_owing_no_evaluation_leaves_the_field_out(http: httpx.Client) -> None:
    published = http.post("/v1/publications", json={"topics": ["nobody/here"]}).json()
    assert "evaluations" not in published
    seen = progress_of(http, published)
    assert seen == {"id": published["id"], "evaluating": False, "deliveries": 0}


def test_a_subscriber_that_learns_the_id_cannot_count_the_other_deliveries(
    http: httpx.Client, sub: Sub
) -> None:
    sub.subscribe(topics=["spied/t"])
    Sub(http).subscribe(topics=["spied/t"])
    published = http.post("/v1/publications", json={"topics": ["spied/t"]}).json()
    (message,) = sub.pull()
    pid = message["publication_id"]
    unknown = {"evaluating": False, "deliveries": 0}
    assert http.get(f"/v1/publications/{pid}").json() == {"id": pid, **unknown}
    wrong = {"token": published["progress_token"][:-2] + "AA"}
    assert http.get(f"/v1/publications/{pid}", params=wrong).json() == {"id": pid, **unknown}
    assert http.get(f"/v1/publications/{pid}", headers=sub.auth).json() == {"id": pid, **unknown}
    assert progress_of(http, published)["deliveries"] == 2


def test_a_wrong_token_answers_exactly_as_an_unknown_id(http: httpx.Client) -> None:
    published = http.post("/v1/publications", json={"topics": ["nobody/here"]}).json()
    other = http.post("/v1/publications", json={"topics": ["nobody/here"]}).json()
    wrong = {"token": other["progress_token"]}  # another publication's token
    known = http.get(f"/v1/publications/{published['id']}", params=wrong)
    unknown = http.get(f"/v1/publications/{new_id()}", params=wrong)  # as long, never used
    assert (known.status_code, known.headers["content-length"]) == (
        unknown.status_code,
        unknown.headers["content-length"],
    )
    assert known.json() | {"id": "x"} == unknown.json() | {"id": "x"}


def test_batch_answers_carry_each_publication_its_own_token(http: httpx.Client, sub: Sub) -> None:
    sub.subscribe(topics=["batch/t"])
    body = {"publications": [{"topics": ["batch/t"]}, {"topics": ["batch/none"]}]}
    first, second = http.post("/v1/publications/batch", json=body).json()["publications"]
    assert first["progress_token"] != second["progress_token"]
    assert [progress_of(http, first)["deliveries"], progress_of(http, second)["deliveries"]] == [
        1,
        0,
    ]


def test_the_admin_reads_any_publication_without_its_token(
    http: httpx.Client, sub: Sub, admin: dict[str, str]
) -> None:
    sub.subscribe(topics=["admin/t"])
    pid = http.post("/v1/publications", json={"topics": ["admin/t"]}).json()["id"]
    assert http.get(f"/v1/publications/{pid}", headers=admin).json()["deliveries"] == 1


def test_the_client_follows_its_own_publish(server: EmbeddedServer, sub: Sub) -> None:
    sub.subscribe(topics=["client/t"])
    with Client(server.url) as client:
        published = client.publish({"n": 1}, topics=["client/t"])
        assert client.progress(published).deliveries == 1


@pytest.fixture(scope="module")
def keyed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedServer]:
    settings = load_settings({"data_dir": tmp_path_factory.mktemp("keyed")}, env={})
    access = AccessSettings(publish_keys="pub=news/")
    with EmbeddedServer(dataclasses.replace(settings, access=access)) as srv:
        yield srv


def test_another_publisher_key_does_not_read_a_publication_it_did_not_make(
    keyed: EmbeddedServer,
) -> None:
    with httpx.Client(base_url=keyed.url, timeout=30) as http:
        key = {"Authorization": "Bearer pub"}
        registered = http.post("/v1/subscribers").json()
        subscriber = {"Authorization": f"Bearer {registered['token']}"}
        subscribed = http.post(
            f"/v1/subscribers/{registered['id']}/subscriptions",
            json={"topics": ["news/a"]},
            headers=subscriber,
        )
        assert subscribed.status_code == 201
        published = http.post("/v1/publications", json={"topics": ["news/a"]}, headers=key).json()
        pid = published["id"]
        assert http.get(f"/v1/publications/{pid}", headers=key).json()["deliveries"] == 0
        assert progress_of(http, published)["deliveries"] == 1
