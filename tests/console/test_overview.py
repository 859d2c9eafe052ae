"""The operator's views in a real browser against a real broker: the live-rates chart, the
topics, the subscribers real and simulated, the elastic deployment and the placement."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from playwright.sync_api import expect
from tests.console.conftest import admin_page

from tidings.config import load_settings
from tidings.errors import TidingsError
from tidings.server import EmbeddedServer

TIMEOUT_MS = 20_000


def publish_to(url: str, topic: str, count: int) -> None:
    with httpx.Client(base_url=url) as http:
        for _ in range(count):
            http.post("/v1/publications", json={"topics": [topic], "data": 1}).raise_for_status()


def a_subscriber_of(url: str, topics: list[str], headers: dict[str, str] | None = None) -> str:
    me = httpx.post(f"{url}/v1/subscribers", json={}, headers=headers or {}).json()
    auth = {"Authorization": f"Bearer {me['token']}"}
    made = httpx.post(
        f"{url}/v1/subscribers/{me['id']}/subscriptions", json={"topics": topics}, headers=auth
    )
    made.raise_for_status()
    return str(me["id"])


def open_overview(context: Any, token: str) -> Any:
    page = admin_page(context, "overview", token)
    expect(page.locator(".cards")).to_contain_text("subscribers", timeout=TIMEOUT_MS)
    return page


def test_the_rates_chart_has_a_time_axis_a_coloured_legend_and_values_under_the_cursor(
    context: Any, token: str, broker: EmbeddedServer, screenshots: Path
) -> None:
    a_subscriber_of(broker.url, ["chart/#"])
    page = open_overview(context, token)
    chart = page.locator("#rates")
    expect(chart.locator("canvas")).to_be_visible(timeout=TIMEOUT_MS)
    publish_to(broker.url, "chart/a", 20)
    # three refreshes at least: points on the chart, the later ones after the publications
    expect(chart.locator(".u-legend")).to_contain_text("publications")
    page.wait_for_timeout(6500)

    # the axes are drawn on the canvas: their settings are read from the chart itself
    axes = chart.evaluate("el => [el.chart.plot.scales.x.time, el.chart.plot.axes[1].label]")
    assert axes == [True, "msg/s"]
    marker = chart.locator(".u-series").nth(1).locator(".u-marker")
    colour = marker.evaluate("el => getComputedStyle(el).borderTopColor")
    assert colour == "rgb(46, 91, 255)"  # the publications' blue, not the default black

    over = chart.locator(".u-over")
    box = over.bounding_box()
    assert box is not None
    page.mouse.move(box["x"] + box["width"] - 3, box["y"] + box["height"] / 2)
    shown = chart.locator(".u-series").nth(1).locator(".u-value")
    expect(shown).to_have_text(re.compile(r"^\d+(\.\d+)? msg/s$"))
    at = chart.locator(".u-series").first.locator(".u-value")
    expect(at).to_have_text(re.compile(r"\d{1,2}:\d{2}:\d{2}"))  # the time under the cursor
    page.screenshot(path=screenshots / "overview-rates.png", full_page=True)


def test_the_topics_table_shows_each_topics_traffic_and_sorts_by_a_column(
    context: Any, token: str, broker: EmbeddedServer, screenshots: Path
) -> None:
    a_subscriber_of(broker.url, ["shop/#"])
    a_subscriber_of(broker.url, ["shop/orders"])
    publish_to(broker.url, "shop/orders", 6)
    publish_to(broker.url, "shop/returns", 2)
    page = open_overview(context, token)
    table = page.locator("#topics table")
    orders = table.locator("tr.topic", has_text="shop/orders")
    expect(orders).to_contain_text("12", timeout=TIMEOUT_MS)  # six publications, two each
    expect(table.locator("th").nth(1)).to_have_attribute("aria-sort", "descending")

    def topics_in_order() -> list[str]:
        cells = table.locator("tr.topic td:first-child").all_inner_texts()
        return [c for c in cells if c.startswith("shop/")]

    page.click('#topics button[data-key="publications"]')
    shop = topics_in_order()
    assert shop.index("shop/orders") < shop.index("shop/returns")
    page.click('#topics button[data-key="publications"]')  # again: the other way
    expect(table.locator("th").nth(3)).to_have_attribute("aria-sort", "ascending")
    shop = topics_in_order()
    assert shop.index("shop/returns") < shop.index("shop/orders")
    page.locator("section:has(#topics)").screenshot(path=screenshots / "topics.png")


MARK = {"Tidings-Simulation": "marked-by-hand"}  # what the simulator's client sends


def row_of(page: Any, subscriber_id: str) -> Any:
    return page.locator("section:has(#subscriber-origin) tr", has_text=subscriber_id)


def test_the_subscribers_can_be_shown_real_simulated_or_all(
    context: Any, token: str, broker: EmbeddedServer, screenshots: Path
) -> None:
    real = a_subscriber_of(broker.url, ["mixed/#"])
    simulated = a_subscriber_of(broker.url, ["mixed/#"], MARK)
    page = open_overview(context, token)
    expect(row_of(page, simulated)).to_contain_text("simulation: marked-by-hand")
    expect(row_of(page, real)).to_be_visible()
    expect(row_of(page, real)).not_to_contain_text("simulation")

    page.select_option("#subscriber-origin", "simulated")
    expect(row_of(page, real)).to_have_count(0, timeout=TIMEOUT_MS)
    expect(row_of(page, simulated)).to_be_visible()
    page.locator("section:has(#subscriber-origin)").screenshot(
        path=screenshots / "subscribers-simulated.png"
    )
    page.select_option("#subscriber-origin", "real")
    expect(row_of(page, simulated)).to_have_count(0, timeout=TIMEOUT_MS)
    expect(row_of(page, real)).to_be_visible()


def test_deleting_a_subscriber_asks_first_and_cancel_keeps_it(
    context: Any, token: str, broker: EmbeddedServer
) -> None:
    doomed = a_subscriber_of(broker.url, ["doomed/#"])
    page = open_overview(context, token)
    row = row_of(page, doomed)
    row.locator("button.danger").click()
    dialog = page.locator("dialog#confirm")
    expect(dialog).to_be_visible()
    expect(page.locator("#confirm-text")).to_contain_text(doomed)
    # the one dialog of every view (js/confirm.js), styled by its one set of rules
    expect(dialog).to_have_class("confirm")
    expect(dialog).to_have_css("max-width", "480px")
    page.click("#confirm-cancel")
    expect(dialog).to_have_count(0)
    page.wait_for_timeout(2500)  # a refresh: still there
    expect(row).to_be_visible()
    assert httpx.get(f"{broker.url}/v1/admin/subscribers", headers={
        "Authorization": f"Bearer {token}"}).json()["subscribers"]  # fmt: skip

    row.locator("button.danger").click()
    page.click("#confirm-ok")
    expect(row).to_have_count(0, timeout=TIMEOUT_MS)
    gone = httpx.get(
        f"{broker.url}/v1/admin/subscribers", headers={"Authorization": f"Bearer {token}"}
    )
    assert doomed not in {s["id"] for s in gone.json()["subscribers"]}


def test_a_simulation_run_from_the_console_has_its_subscribers_and_series_apart(
    context: Any, token: str, screenshots: Path
) -> None:
    page = admin_page(context, "simulator", token)
    config = (
        '{"name": "browser-marked", "duration": 30, "drain": 2, "quiet": 0.5,'
        ' "subscribers": [{"count": 2, "topics": ["marked/#"]}],'
        ' "publishers": [{"rate": 20, "topics": ["marked/a"]}]}'
    )
    page.fill("#sim-config", config)
    page.click("#sim-run")
    expect(page.locator("#sim-status")).to_contain_text("Running", timeout=TIMEOUT_MS)
    expect(page.locator("#sim-numbers")).to_contain_text("publishing", timeout=60_000)

    page.goto("/ui/#/overview")
    page.select_option("#subscriber-origin", "simulated")
    marked = page.locator("section:has(#subscriber-origin) tr", has_text="browser-marked")
    expect(marked).to_have_count(2, timeout=TIMEOUT_MS)
    # the simulated publications' series rises above zero on the chart
    page.wait_for_function(
        "() => (document.getElementById('rates').chart.data[3] || []).some((v) => v > 0)",
        timeout=TIMEOUT_MS,
    )
    page.wait_for_timeout(2500)
    page.screenshot(path=screenshots / "overview.png", full_page=True)


def test_a_broker_that_does_not_match_elastically_says_so_plainly(context: Any, token: str) -> None:
    page = open_overview(context, token)
    expect(page.locator("#cluster-none")).to_contain_text("Not elastic", timeout=TIMEOUT_MS)
    expect(page.locator("#cluster-layers")).to_have_count(0)


@pytest.fixture(scope="module")
def elastic(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedServer]:
    """A broker matching through E-SilboPS's operators, on a ZooKeeper of its own."""
    from tidings.elastic.coordination.zookeeper import local_zookeeper

    try:
        started = local_zookeeper()
        hosts = started.__enter__()
    except TidingsError as exc:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"ZooKeeper cannot start (required under CI): {exc.message}")
        pytest.skip(f"ZooKeeper cannot start: {exc.message}")
    values = {
        "data_dir": tmp_path_factory.mktemp("elastic-console"),
        "matching": "elastic",
        "elastic__zookeeper": hosts,
        "elastic__cluster": "console",
        "elastic__matchers": 2,
        "admin_token": "elastic-admin",
    }
    try:
        with EmbeddedServer(load_settings(values, env={})) as server:
            yield server
    finally:
        started.__exit__(None, None, None)


def test_an_elastic_brokers_layers_operators_and_scaling_are_shown(
    browser: Any, elastic: EmbeddedServer, screenshots: Path
) -> None:
    made = browser.new_context(base_url=elastic.url, viewport={"width": 1280, "height": 900})
    errors: list[str] = []
    outside: list[str] = []
    made.route(
        "**/*",
        lambda route: (
            route.continue_()
            if route.request.url.startswith(elastic.url)
            else (outside.append(route.request.url), route.abort())
        ),
    )
    page = made.new_page()
    page.on("pageerror", lambda e: errors.append(str(e)))
    try:
        page.goto("/ui/#/overview")
        page.fill("#admin-token", "elastic-admin")
        page.click("#admin-save")
        layers = page.locator("#cluster-layers")
        matchers = layers.locator("tr", has_text="matchers")
        expect(matchers.locator("td").nth(2)).to_have_text("2", timeout=TIMEOUT_MS)
        expect(layers.locator("tr", has_text="exit points")).to_be_visible()
        expect(page.locator("#cluster")).to_contain_text("Cluster console on ZooKeeper")
        expect(page.locator("#cluster-running")).to_contain_text("matcher")
        expect(page.locator("#cluster-scaling")).to_contain_text("No scale in progress")
        page.locator("section:has(#cluster)").screenshot(path=screenshots / "elastic.png")
    finally:
        made.close()
    assert outside == [] and errors == []
