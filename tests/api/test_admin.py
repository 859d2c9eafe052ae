"""The admin calls: guarded by the admin token; the overview, subscribers page by page,
deletion."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from tests.api.conftest import Sub

from tidings.admin import admin_token
from tidings.api.v1.admin import without_password
from tidings.config import load_settings
from tidings.server import EmbeddedServer


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedServer]:
    """The API's broker, whose operator lets URL functions reach this machine (loopback is
    denied by default): the suspended function below calls a closed port here."""
    local = {"functions__url_allow_networks": "127.0.0.0/8"}
    settings = load_settings({"data_dir": tmp_path_factory.mktemp("broker"), **local}, env={})
    with EmbeddedServer(settings) as srv:
        yield srv


def test_admin_calls_need_the_admin_token(http: httpx.Client, sub: Sub) -> None:
    assert http.get("/v1/admin/overview").status_code == 401
    assert http.get("/v1/admin/overview", headers=sub.auth).status_code == 403


def test_the_overview_counts_subscribers_subscriptions_and_queues(
    http: httpx.Client, sub: Sub, admin: dict[str, str]
) -> None:
    sub.subscribe(topics=["overview"])
    http.post("/v1/publications", json={"topics": ["overview"]})
    seen = http.get("/v1/admin/overview", headers=admin).json()
    assert seen["subscribers"] >= 1 and seen["subscriptions"]["topic"] >= 1
    assert seen["queues"]["ready"] >= 1 and seen["counters"]["publications"] >= 1
    assert "admin_token" not in seen["settings"]
    assert seen["versions"]["tidings"]
    sub.drain()


def test_a_suspended_function_is_listed_with_its_reason(
    http: httpx.Client, sub: Sub, admin: dict[str, str]
) -> None:
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    function = {"function_type": "doomed", "url": f"http://127.0.0.1:{port}/match"}
    made = sub.subscribe(function=function)
    for _ in range(5):
        http.post("/v1/publications", json={"function_types": ["doomed"]})
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        suspended = http.get("/v1/admin/overview", headers=admin).json()["suspended"]
        if any(s["id"] == made["id"] for s in suspended):
            break
        time.sleep(0.2)
    [mine] = [s for s in suspended if s["id"] == made["id"]]
    assert mine["function_type"] == "doomed" and "consecutive failures" in mine["reason"]


def test_subscribers_come_page_by_page_with_depth_and_last_activity(
    http: httpx.Client, admin: dict[str, str]
) -> None:
    made = {Sub(http).id for _ in range(3)}
    listed: list[dict[str, object]] = []
    after = ""
    while True:
        page = http.get(
            "/v1/admin/subscribers", params={"limit": 2, "after": after}, headers=admin
        ).json()
        listed += page["subscribers"]
        if page["next"] is None:
            break
        after = page["next"]
    ids = [s["id"] for s in listed]
    assert made <= set(ids) and ids == sorted(ids)
    one = next(s for s in listed if s["id"] in made)
    assert one["depth"] == {"ready": 0, "leased": 0, "dead": 0}
    assert one["last_seen"] >= one["created_at"] and one["ephemeral"] is False


def test_the_admin_deletes_a_subscriber_and_its_token_dies(
    http: httpx.Client, sub: Sub, admin: dict[str, str]
) -> None:
    assert http.delete(f"/v1/admin/subscribers/{sub.id}", headers=admin).status_code == 204
    assert sub.get("/messages").status_code == 403
    gone = http.delete(f"/v1/admin/subscribers/{sub.id}", headers=admin)
    assert gone.json()["error"]["code"] == "subscriber_not_found"


def test_a_store_password_is_never_shown() -> None:
    assert without_password("postgresql://u:secret@h:5432/db") == "postgresql://u:***@h:5432/db"
    assert without_password("sqlite:///x/tidings.db") == "sqlite:///x/tidings.db"


def test_a_made_admin_token_is_kept_and_a_configured_one_wins(tmp_path: Path) -> None:
    directory = tmp_path
    made, fresh = admin_token("", directory)
    again, fresh_again = admin_token("", directory)
    assert (fresh, fresh_again, again) == (True, False, made)
    assert (directory / "admin-token").stat().st_mode & 0o077 == 0
    assert admin_token("mine", directory) == ("mine", False)


SMALL_RUN = {
    "name": "console-run",
    "duration": 1,
    "drain": 5,
    "quiet": 0.5,
    "subscribers": [{"count": 2, "topics": ["sim/#"]}],
    "publishers": [{"rate": 10, "topics": ["sim/a"]}],
}


def test_a_simulation_runs_against_this_broker_and_reports_as_it_goes(
    http: httpx.Client, admin: dict[str, str]
) -> None:
    started = http.post("/v1/admin/simulations", json={"config": SMALL_RUN}, headers=admin)
    assert started.status_code == 202, started.text
    run = started.json()
    again = http.post("/v1/admin/simulations", json={"config": SMALL_RUN}, headers=admin)
    assert again.status_code == 409  # one at a time
    deadline = time.monotonic() + 90
    state = run
    while state["status"] == "running" and time.monotonic() < deadline:
        time.sleep(0.5)
        state = http.get(f"/v1/admin/simulations/{run['id']}", headers=admin).json()
    assert state["status"] == "done", state["error"]
    assert state["progress"]["delivered"] == state["summary"]["deliveries"] > 0
    assert state["progress"]["p99_ms"] is not None
    kept = http.get(f"/v1/admin/simulations/{run['id']}/summary", headers=admin)
    assert kept.headers["content-disposition"].startswith("attachment")
    assert kept.json() == state["summary"]


def test_a_bad_simulation_config_names_its_field(http: httpx.Client, admin: dict[str, str]) -> None:
    bad = {"config": SMALL_RUN | {"duration": -1}}
    refused = http.post("/v1/admin/simulations", json=bad, headers=admin)
    assert refused.status_code == 422
    assert refused.json()["error"]["field"] == "duration"
