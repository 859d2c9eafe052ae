"""The operator's views in a real browser against a real broker: the live-rates chart, the
topics, the subscribers real and simulated, the elastic deployment and the placement."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import httpx
from playwright.sync_api import expect

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
    page = context.new_page()
    page.goto("/ui/#/overview")
    page.fill("#admin-token", token)
    page.click("#admin-save")
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
