"""A publication's function evaluations, said in the publish answer and followed after it."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from tests.api.conftest import Sub

from tidings.config import AccessSettings, load_settings
from tidings.server import EmbeddedServer


def progress_until_evaluated(http: httpx.Client, pid: str) -> dict[str, Any]:
    deadline = time.monotonic() + 30  # generous: a loaded machine starts the runner slowly
    while True:
        seen: dict[str, Any] = http.get(f"/v1/publications/{pid}").json()
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
    done = progress_until_evaluated(http, published["id"])
    assert done == {"id": published["id"], "evaluating": False, "deliveries": 2}
    assert [len(sub.pull()), len(matching.pull())] == [1, 1]


def test_a_publish_owing_no_evaluation_leaves_the_field_out(http: httpx.Client) -> None:
    published = http.post("/v1/publications", json={"topics": ["nobody/here"]}).json()
    assert "evaluations" not in published
    seen = http.get(f"/v1/publications/{published['id']}").json()
    assert seen == {"id": published["id"], "evaluating": False, "deliveries": 0}


@pytest.fixture(scope="module")
def keyed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedServer]:
    settings = load_settings({"data_dir": tmp_path_factory.mktemp("keyed")}, env={})
    access = AccessSettings(publish_keys="pub=news/")
    with EmbeddedServer(dataclasses.replace(settings, access=access)) as srv:
        yield srv


def test_progress_needs_a_publisher_key_where_the_operator_requires_them(
    keyed: EmbeddedServer,
) -> None:
    with httpx.Client(base_url=keyed.url, timeout=30) as http:
        pid = http.post(
            "/v1/publications", json={"topics": ["news/a"]}, headers={"Authorization": "Bearer pub"}
        ).json()["id"]
        assert http.get(f"/v1/publications/{pid}").status_code == 401
        wrong = {"Authorization": "Bearer nope"}
        assert http.get(f"/v1/publications/{pid}", headers=wrong).status_code == 403
        good = {"Authorization": "Bearer pub"}
        assert http.get(f"/v1/publications/{pid}", headers=good).json()["evaluating"] is False
