"""The subscriber's views in a real browser against a real broker: the queue browsed and
purged, dead letters with their payloads, confirmations, the builtin form, the webhook."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from playwright.sync_api import expect

from tidings.config import load_settings
from tidings.server import EmbeddedServer

TIMEOUT_MS = 20_000


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedServer]:
    """A broker that lets webhooks and URL functions reach this machine (a closed port of
    it is the failing endpoint the webhook test needs), and dead-letters at the 2nd attempt."""
    loopback = {
        "webhooks__allow_networks": "127.0.0.0/8",
        "functions__url_allow_networks": "127.0.0.0/8",
        "queues__max_attempts": 2,
    }
    data = tmp_path_factory.mktemp("subscriber-view")
    with EmbeddedServer(load_settings({"data_dir": data, **loopback}, env={})) as server:
        yield server


class Api:
    """A subscriber as the test sees it through the HTTP API, beside the page."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.http = httpx.Client(base_url=url, timeout=30)
        me = self.http.post("/v1/subscribers").json()
        self.id, self.token = me["id"], me["token"]
        self.http.headers["Authorization"] = f"Bearer {self.token}"
        self.base = f"/v1/subscribers/{self.id}"

    def subscribe(self, **body: Any) -> None:
        assert self.http.post(f"{self.base}/subscriptions", json=body).status_code == 201

    def publish(self, topic: str, *data: Any) -> None:
        for d in data:
            body = {"topics": [topic], "data": d}
            answer = httpx.post(f"{self.url}/v1/publications", json=body)
            assert answer.status_code == 201

    def waiting(self) -> list[dict[str, Any]]:
        return self.http.get(f"{self.base}/queue/messages").json()["messages"]  # type: ignore[no-any-return]

    def pull(self, **params: Any) -> list[dict[str, Any]]:
        params.setdefault("max", 100)
        return self.http.get(f"{self.base}/messages", params=params).json()["messages"]  # type: ignore[no-any-return]


@pytest.fixture
def api(broker: EmbeddedServer) -> Iterator[Api]:
    made = Api(broker.url)
    yield made
    made.http.close()


def open_as(context: Any, api: Api) -> Any:
    page = context.new_page()
    page.goto("/ui/#/subscriber")
    page.fill("#existing-id", api.id)
    page.fill("#existing-token", api.token)
    page.click("#use-existing")
    expect(page.locator("#subscriber-id")).to_have_text(api.id)
    return page


def test_browsing_shows_the_waiting_messages_and_leaves_them_unleased(
    context: Any, api: Api, screenshots: Path
) -> None:
    api.subscribe(topics=["q/#"])
    api.publish("q/a", {"n": 1}, {"n": 2}, "third")
    page = open_as(context, api)
    rows = page.locator("#queue tr.queued")
    expect(rows).to_have_count(3, timeout=TIMEOUT_MS)
    expect(rows.nth(0)).to_contain_text('{"n":1}')
    expect(rows.nth(2)).to_contain_text('"third"')
    expect(rows.locator("td.attempts")).to_have_text(["0", "0", "0"])
    queue = page.locator("section", has=page.locator("#queue"))
    queue.screenshot(path=screenshots / "subscriber-queue.png")
    pulled = api.pull()
    assert [(m["body"]["data"], m["attempt"]) for m in pulled] == [
        ({"n": 1}, 1),
        ({"n": 2}, 1),
        ("third", 1),
    ]


def test_purge_asks_first_cancel_leaves_the_queue_and_confirming_empties_it(
    context: Any, api: Api, screenshots: Path
) -> None:
    api.subscribe(topics=["p/#"])
    api.publish("p/a", 1, 2)
    page = open_as(context, api)
    expect(page.locator("#queue tr.queued")).to_have_count(2, timeout=TIMEOUT_MS)
    page.click("#queue-purge")
    dialog = page.locator("dialog#confirm")
    expect(dialog).to_be_visible()
    expect(dialog).to_contain_text(api.id)
    page.screenshot(path=screenshots / "confirm-purge.png")
    page.click("#confirm-cancel")
    expect(dialog).to_have_count(0)
    assert len(api.waiting()) == 2
    expect(page.locator("#queue tr.queued")).to_have_count(2)
    page.click("#queue-purge")
    page.click("#confirm-ok")
    expect(page.locator("#queue-status")).to_contain_text("Purged 2", timeout=TIMEOUT_MS)
    expect(page.locator("#queue")).to_contain_text("No message waiting")
    assert api.waiting() == [] and api.pull() == []


def test_a_dead_letter_shows_its_payload_and_is_redriven(
    context: Any, api: Api, screenshots: Path
) -> None:
    api.subscribe(topics=["d/#"])
    api.publish("d/a", {"poison": True})
    for _ in range(3):  # two leases, then the next pull dead-letters it (max_attempts 2)
        api.pull(visibility=0)
    page = open_as(context, api)
    dead = page.locator("#dead-letters tr.dead")
    expect(dead).to_have_count(1, timeout=TIMEOUT_MS)
    expect(dead).to_contain_text('{"poison":true}')
    expect(dead).to_contain_text("max_attempts")
    page.locator("section", has=page.locator("#dead-letters")).screenshot(
        path=screenshots / "subscriber-dead-letters.png"
    )
    dead.get_by_role("button", name="Re-drive").click()
    expect(page.locator("#redrive-result")).to_contain_text("Re-drove 1", timeout=TIMEOUT_MS)
    expect(page.locator("#dead-letters")).to_contain_text("None.")
    assert [m["body"]["data"] for m in api.waiting()] == [{"poison": True}]


def test_deleting_a_subscription_asks_first_and_cancel_keeps_it(context: Any, api: Api) -> None:
    api.subscribe(topics=["keep/#"])
    page = open_as(context, api)
    row = page.locator("#subscriptions tr", has_text="keep/#")
    expect(row).to_have_count(1, timeout=TIMEOUT_MS)
    row.get_by_role("button", name="Delete").click()
    page.click("#confirm-cancel")
    expect(page.locator("dialog#confirm")).to_have_count(0)
    assert len(api.http.get(f"{api.base}/subscriptions").json()["subscriptions"]) == 1
    row.get_by_role("button", name="Delete").click()
    page.click("#confirm-ok")
    expect(page.locator("#subscriptions")).to_contain_text("None yet.", timeout=TIMEOUT_MS)
    assert api.http.get(f"{api.base}/subscriptions").json()["subscriptions"] == []


def test_unregistering_asks_first_and_cancel_keeps_the_subscriber(context: Any, api: Api) -> None:
    page = open_as(context, api)
    page.click("#unregister")
    page.click("#confirm-cancel")
    expect(page.locator("dialog#confirm")).to_have_count(0)
    assert api.http.get(api.base).status_code == 200
    page.click("#unregister")
    page.click("#confirm-ok")
    expect(page.locator("#register")).to_be_visible(timeout=TIMEOUT_MS)
    assert api.http.get(api.base).status_code in (403, 404)


def subscriptions_of(api: Api) -> list[dict[str, Any]]:
    return api.http.get(f"{api.base}/subscriptions").json()["subscriptions"]  # type: ignore[no-any-return]


def test_the_builtin_form_posts_each_functions_own_parameters(
    context: Any, api: Api, screenshots: Path
) -> None:
    page = open_as(context, api)
    page.click("#kind-function")
    page.select_option("#fn-mode", "builtin")
    page.select_option("#fn-builtin", "key_phrases")
    page.fill("#fn-param-any_of", "moon, tide")
    form = page.locator("section", has=page.locator("#subscribe"))
    form.screenshot(path=screenshots / "builtin-form.png")
    page.click("#subscribe")
    expect(page.locator("#subscribe-result")).to_contain_text("Subscribed", timeout=TIMEOUT_MS)
    page.select_option("#fn-builtin", "sentiment")
    expect(page.locator("#fn-param-any_of")).to_have_count(0)
    page.select_option("#fn-param-label", "negative")
    first = page.locator("#subscribe-result").inner_text()
    page.click("#subscribe")
    # the second's answer names another subscription (the first's "Subscribed" is still shown)
    expect(page.locator("#subscribe-result")).not_to_have_text(first, timeout=TIMEOUT_MS)
    expect(page.locator("#subscribe-result")).to_contain_text("Subscribed")
    page.select_option("#fn-mode", "url")
    expect(page.locator("#fn-url-params")).to_have_value("{}")  # nothing carried over
    made = sorted(
        ((s["function"]["builtin"], s["function"]["params"]) for s in subscriptions_of(api)),
    )
    assert made == [
        ("key_phrases", {"any_of": ["moon", "tide"]}),
        ("sentiment", {"label": "negative"}),
    ]


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_a_webhook_is_set_its_failure_shown_and_deleted_after_confirming(
    context: Any, api: Api, screenshots: Path
) -> None:
    api.subscribe(topics=["w/#"])
    page = open_as(context, api)
    expect(page.locator("#webhook-status")).to_contain_text("No webhook", timeout=TIMEOUT_MS)
    page.fill("#webhook-url", f"http://127.0.0.1:{closed_port()}/hook")
    page.click("#webhook-save")
    expect(page.locator("#webhook-state")).to_have_text("active", timeout=TIMEOUT_MS)
    api.publish("w/a", "pushed")
    reason = page.locator("#webhook-reason")
    for _ in range(40):  # the first failed request is recorded; refresh until it shows
        page.click("#webhook-refresh")
        if reason.inner_text() != "none":
            break
        page.wait_for_timeout(500)
    expect(reason).not_to_have_text("none")
    page.locator("#webhook-status").screenshot(path=screenshots / "subscriber-webhook.png")
    page.click("#webhook-delete")
    page.click("#confirm-cancel")
    assert api.http.get(f"{api.base}/webhook").status_code == 200
    page.click("#webhook-delete")
    page.click("#confirm-ok")
    expect(page.locator("#webhook-status")).to_contain_text("No webhook", timeout=TIMEOUT_MS)
    assert api.http.get(f"{api.base}/webhook").status_code == 404


PENDING = "() => (document.querySelector('#pub-result')?.textContent || '').includes('pending')"


def test_a_function_publish_shows_its_evaluation_pending_then_delivered(
    context: Any, api: Api, screenshots: Path
) -> None:
    spec = {"function_type": "text", "builtin": "detect_language", "params": {"language": "en"}}
    api.subscribe(function=spec)
    page = context.new_page()
    page.goto("/ui/#/publisher")
    page.click("#sample-text")
    page.click("#publish")
    page.wait_for_function(PENDING, timeout=TIMEOUT_MS)  # every frame: a short state is seen
    expect(page.locator("#pub-result")).to_contain_text("0 deliveries; function evaluation pending")
    done = "1 deliveries (function evaluation done: 1 more)"
    expect(page.locator("#pub-result")).to_contain_text(done, timeout=60_000)
    expect(page.locator("#pub-log .item").first).to_contain_text(done)
    page.screenshot(path=screenshots / "publisher-function.png", full_page=True)
    [delivered] = api.pull()
    assert "Waikato" in delivered["body"]["data"]
