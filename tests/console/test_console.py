"""The console in a real browser: what a person sees and does at each view."""

from __future__ import annotations

import re
import socket
from pathlib import Path
from typing import Any

import httpx
from playwright.sync_api import expect
from tests.console.conftest import admin_page

from tidings.server import EmbeddedServer

TIMEOUT_MS = 20_000


def register_and_subscribe(page: Any) -> None:
    page.goto("/ui/#/subscriber")
    page.click("#register")
    expect(page.locator("#subscriber-token")).to_be_visible()
    page.click("#kind-topic")
    page.fill("#sub-topics", "home/#")
    page.click("#subscribe")
    expect(page.locator("#subscribe-result")).to_contain_text("Subscribed")


def test_a_publication_from_the_publisher_view_arrives_in_the_subscriber_view(
    context: Any, screenshots: Path
) -> None:
    subscriber = context.new_page()
    register_and_subscribe(subscriber)
    subscriber.click("#connect")
    expect(subscriber.locator("#stream-status")).to_have_text("connected", timeout=TIMEOUT_MS)

    publisher = context.new_page()
    publisher.goto("/ui/#/publisher")
    publisher.click("#sample-topic")
    publisher.click("#publish")
    expect(publisher.locator("#pub-result")).to_contain_text("1 deliveries")
    publisher.screenshot(path=screenshots / "publisher.png", full_page=True)

    delivery = subscriber.locator(".delivery").first
    expect(delivery).to_contain_text('{"temp":21.5,"unit":"C"}', timeout=TIMEOUT_MS)
    delivery.locator("button.ack").click()
    expect(delivery).to_contain_text("acked")
    subscriber.screenshot(path=screenshots / "subscriber.png", full_page=True)


def test_a_code_function_that_does_not_compile_is_marked_at_its_line(
    context: Any, screenshots: Path
) -> None:
    page = context.new_page()
    register_and_subscribe(page)
    page.click("#kind-function")
    page.select_option("#fn-mode", "code")
    code = 'def match(publication):\n    text = publication["data"]\n    return open(text)\n'
    page.fill("#code", code)
    page.click("#subscribe")
    expect(page.locator("#code-error")).to_contain_text("line 3")
    expect(page.locator('#code-gutter [data-line="3"]')).to_have_class("bad")
    expect(page.locator('#code-gutter [data-line="2"]')).not_to_have_class("bad")
    page.screenshot(path=screenshots / "code-error.png", full_page=True)


def test_the_subscriber_view_lists_every_subscription_past_the_first_page(
    context: Any, broker: EmbeddedServer
) -> None:
    me = httpx.post(f"{broker.url}/v1/subscribers").json()
    auth = {"Authorization": f"Bearer {me['token']}"}
    with httpx.Client(base_url=broker.url, headers=auth) as http:
        for n in range(101):  # the broker answers 100 a page by default
            http.post(f"/v1/subscribers/{me['id']}/subscriptions", json={"topics": [f"p/{n}"]})
    page = context.new_page()
    page.goto("/ui/#/subscriber")
    page.fill("#existing-id", me["id"])
    page.fill("#existing-token", me["token"])
    page.click("#use-existing")
    rows = page.locator("#subscriptions tr")
    expect(rows).to_have_count(1 + 101, timeout=TIMEOUT_MS)  # the header and each once
    expect(page.locator("#subscriptions")).to_contain_text("p/100")


def a_suspended_function(url: str) -> None:
    """A URL function whose endpoint is never there: suspended after five failures."""
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    me = httpx.post(f"{url}/v1/subscribers").json()
    function = {"function_type": "doomed", "url": f"http://127.0.0.1:{port}/match"}
    auth = {"Authorization": f"Bearer {me['token']}"}
    httpx.post(f"{url}/v1/subscribers/{me['id']}/subscriptions", json={"function": function},
               headers=auth)  # fmt: skip
    for _ in range(5):
        httpx.post(f"{url}/v1/publications", json={"function_types": ["doomed"]})


def test_the_overview_shows_the_broker_with_the_admin_token(
    context: Any, token: str, broker: EmbeddedServer, screenshots: Path
) -> None:
    a_suspended_function(broker.url)
    page = context.new_page()
    page.goto("/ui/")
    page.fill("#admin-token", "not-the-token")
    page.click("#admin-save")
    expect(page.locator("p.error")).to_contain_text("403", timeout=TIMEOUT_MS)
    page.fill("#admin-token", token)
    page.click("#admin-save")
    expect(page.locator(".cards")).to_contain_text("subscribers", timeout=TIMEOUT_MS)
    expect(page.locator("section", has_text="Subscribers").locator("table")).to_be_visible()
    suspended = page.locator("section", has_text="Suspended functions")
    expect(suspended).to_contain_text("consecutive failures", timeout=TIMEOUT_MS)
    page.wait_for_timeout(4500)  # two refreshes: the rate chart has points
    page.screenshot(path=screenshots / "overview.png", full_page=True)


def test_a_simulation_runs_from_the_simulator_view_to_its_summary(
    context: Any, token: str, screenshots: Path
) -> None:
    page = admin_page(context, "simulator", token)
    small = (
        '{"name": "browser-run", "duration": 1, "drain": 5, "quiet": 0.5,'
        ' "subscribers": [{"count": 2, "topics": ["sim/#"]}],'
        ' "publishers": [{"rate": 10, "topics": ["sim/a"]}]}'
    )
    page.fill("#sim-config", small)
    page.click("#sim-run")
    expect(page.locator("#sim-status")).to_contain_text("Finished", timeout=90_000)
    expect(page.locator("#sim-summary")).to_contain_text("deliveries to 2 subscribers")
    with page.expect_download() as download:
        page.click("#sim-download")
    assert download.value.suggested_filename.startswith("simulation-")
    page.screenshot(path=screenshots / "simulator.png", full_page=True)


def test_the_root_leads_to_the_console(context: Any) -> None:
    page = context.new_page()
    page.goto("/")
    expect(page).to_have_url(re.compile(r"/ui/$"))
    expect(page.locator("header h1")).to_have_text("Tidings")


def test_the_api_docs_render_from_the_package_with_no_internet(context: Any) -> None:
    page = context.new_page()
    page.goto("/docs")
    expect(page.locator(".swagger-ui .info .title")).to_contain_text("Tidings", timeout=TIMEOUT_MS)
    expect(page.locator(".opblock-summary-path").first).to_be_visible()
