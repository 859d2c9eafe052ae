"""GET /v1/admin/placement: the last placement state published on `placement/state` that
the broker routed; guarded by the admin token; anything on the topic that is not a bounded,
well-formed state is ignored (and counted), never kept."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from tests.api.conftest import Sub

from tidings.admin import admin_token
from tidings.config import load_settings
from tidings.server import EmbeddedServer
from tidings.wire.placement import MAX_STATE_BYTES, MAX_TOPICS

ROUTE = "/v1/admin/placement"


def a_state(at: float = 1_800_000_000.0, **topic: Any) -> dict[str, Any]:
    return {
        "at": at,
        "interval_s": 10.0,
        "regions": ["us-east-1", "eu-central-1", "ap-northeast-1"],
        "topics": [
            {
                "topic": "scores/live",
                "version": 2,
                "regions": ["us-east-1", "eu-central-1"],
                "mode": "direct",
                "clients": [
                    {"region": "us-east-1", "publishers": 2, "subscribers": 2},
                    {"region": "eu-central-1", "publishers": 2, "subscribers": 2},
                ],
                "decision": {
                    "at": at - 5,
                    "objective": "cost",
                    "ratio": 75.0,
                    "max_ms": 444.5,
                    "percentile_ms": 382.6,
                    "cost": 0.0012,
                    "meets": True,
                },
            }
            | topic
        ],
    }


def publish_state(http: httpx.Client, data: Any) -> str:
    published = http.post("/v1/publications", json={"topics": ["placement/state"], "data": data})
    assert published.status_code == 201, published.text
    return str(published.json()["id"])


def placement(http: httpx.Client, admin: dict[str, str]) -> dict[str, Any]:
    answer = http.get(ROUTE, headers=admin)
    assert answer.status_code == 200, answer.text
    return answer.json()  # type: ignore[no-any-return]


def test_the_placement_needs_the_admin_token(http: httpx.Client, sub: Sub) -> None:
    assert http.get(ROUTE).status_code == 401
    refused = http.get(ROUTE, headers=sub.auth)
    assert refused.status_code == 403
    assert refused.json()["error"]["code"] == "forbidden"


def test_before_any_state_the_answer_is_placement_unknown(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    settings = load_settings({"data_dir": tmp_path_factory.mktemp("none")}, env={})
    with EmbeddedServer(settings) as fresh:
        token, _ = admin_token("", fresh.settings.data_dir)
        answer = httpx.get(f"{fresh.url}{ROUTE}", headers={"Authorization": f"Bearer {token}"})
    assert answer.status_code == 404
    error = answer.json()["error"]
    assert error["code"] == "placement_unknown" and "placement/state" in error["message"]


def test_the_last_state_published_is_answered_with_its_publication(
    http: httpx.Client, admin: dict[str, str]
) -> None:
    publish_state(http, a_state(at=1.0))
    latest = publish_state(http, a_state(at=2.0, version=3))
    seen = placement(http, admin)
    assert seen["publication_id"] == latest
    assert seen["state"] == a_state(at=2.0, version=3) | {"omitted": 0}
    assert seen["received_at"] > 0


def test_a_state_in_a_batch_is_kept_and_still_delivered_as_any_publication(
    http: httpx.Client, admin: dict[str, str]
) -> None:
    watcher = Sub(http)
    watcher.subscribe(topics=["placement/#"])
    batch = [{"topics": ["other"], "data": 1}, {"topics": ["placement/state"], "data": a_state()}]
    answered = http.post("/v1/publications/batch", json={"publications": batch})
    assert answered.status_code == 201, answered.text
    assert placement(http, admin)["publication_id"] == answered.json()["publications"][1]["id"]
    [message] = watcher.drain()
    assert message["body"]["data"] == a_state()


@pytest.mark.parametrize(
    ("data", "why"),
    [
        ("a string", "not a placement state"),
        ({"regions": ["x"]}, "not a placement state"),
        (a_state(regions=["nowhere"]), "names regions the state does not list"),
        (a_state(mode="broadcast"), "not a placement state"),
        (a_state() | {"topics": [a_state()["topics"][0]] * (MAX_TOPICS + 1)}, "not a placement"),
        (a_state(filler="x" * MAX_STATE_BYTES), "a state is at most"),
    ],
    ids=["not-an-object", "fields-missing", "unknown-region", "bad-mode", "too-many", "too-large"],
)
def test_what_is_not_a_bounded_state_is_ignored_and_counted_and_the_last_state_kept(
    http: httpx.Client, admin: dict[str, str], data: Any, why: str
) -> None:
    kept = publish_state(http, a_state())
    before = placement(http, admin)["ignored"]
    publish_state(http, data)  # published and routed all the same: only not kept
    seen = placement(http, admin)
    assert seen["publication_id"] == kept
    assert seen["ignored"] == before + 1
    assert why in seen["last_ignored"]


def test_the_placement_is_in_the_openapi_document(http: httpx.Client) -> None:
    document = http.get("/openapi.json").json()
    operation = document["paths"][ROUTE]["get"]
    assert operation["security"]
    answer = operation["responses"]["200"]["content"]["application/json"]["schema"]
    assert answer == {"$ref": "#/components/schemas/PlacementSeen"}
    state = document["components"]["schemas"]["PlacementState"]
    assert {"regions", "topics", "at", "interval_s"} <= set(state["properties"])
