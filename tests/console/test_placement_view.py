"""The overview's placement in a real browser against a real broker: a plain note until the
controller's state has come, then the regions by name with their topics and clients, each
topic's regions, mode, clients and decision, and what the broker ignored."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import httpx
import msgspec
from playwright.sync_api import expect
from tests.console.conftest import admin_page

from tidings.client.multiregion import Placement
from tidings.placement.model import Choice, Configuration, Evaluation, Mode
from tidings.placement.regions import TopicCounts
from tidings.placement.state import Decided, build
from tidings.server import EmbeddedServer

TIMEOUT_MS = 20_000
NAMES = ["us-east-1", "eu-central-1", "ap-northeast-1"]


def decided(regions: tuple[int, ...], percentile: float, meets: bool, at: float) -> Decided:
    evaluation = Evaluation(Configuration(regions, Mode.DIRECT), percentile, 0.0012, meets)
    return Decided(Choice(evaluation, 12), 75.0, 444.5, at)


def a_state() -> dict[str, Any]:
    """As the controller builds it (`tidings.placement.state`): two topics it solved, one
    it was given; clients at the regions their managers counted them."""
    now = time.time()
    deployed = {
        "scores/live": Placement(2, (0, 1), "direct"),
        "alerts/eu": Placement(1, (1,), "direct"),
        "quotes/asia": Placement(1, (2,), "direct"),
    }
    decisions = {
        "scores/live": decided((0, 1), 382.6, True, now - 40),
        "alerts/eu": decided((1,), 512.0, False, now - 95),
    }
    counts = [
        {"scores/live": TopicCounts({0: [1.0], 1: [1.0]}, frozenset({2, 3}))},
        {
            "scores/live": TopicCounts({4: [1.0], 5: [1.0]}, frozenset({6, 7})),
            "alerts/eu": TopicCounts({4: [1.0]}, frozenset({6})),
        },
        {},
    ]
    state = build(NAMES, deployed, decisions, counts, 10.0, now)
    return msgspec.to_builtins(state)  # type: ignore[no-any-return]


def publish_state(url: str, data: Any) -> None:
    body = {"topics": ["placement/state"], "data": data}
    httpx.post(f"{url}/v1/publications", json=body).raise_for_status()


def test_the_placement_shows_regions_topics_and_clients_once_the_controller_publishes(
    context: Any, token: str, broker: EmbeddedServer, screenshots: Path
) -> None:
    page = admin_page(context, "overview", token)
    expect(page.locator("#placement-none")).to_contain_text(
        "No placement state", timeout=TIMEOUT_MS
    )
    expect(page.locator("#placement-topics")).to_have_count(0)

    publish_state(broker.url, a_state())
    topics = page.locator("#placement-topics")
    scores = topics.locator("tr", has_text="scores/live")
    expect(scores).to_contain_text("us-east-1", timeout=TIMEOUT_MS)
    expect(scores.locator(".tag.region")).to_have_text(["us-east-1", "eu-central-1"])
    expect(scores).to_contain_text("eu-central-1: 2 publishers, 2 subscribers")
    expect(scores).to_contain_text("cost: the cheapest meeting the bound")
    expect(scores).to_contain_text("75 % within 444.5 ms: 382.6 ms")
    alerts = topics.locator("tr", has_text="alerts/eu")
    expect(alerts).to_contain_text("latency: none meets the bound")
    expect(alerts).to_contain_text("(not met)")
    expect(topics.locator("tr", has_text="quotes/asia")).to_contain_text("not solved")
    regions = page.locator("#placement-regions")
    # us-east-1 serves one topic; eu-central-1 two; their clients summed over the topics
    expect(regions.locator("tr", has_text="us-east-1").locator("td")).to_have_text(
        ["us-east-1", "1", "2", "2"]
    )
    expect(regions.locator("tr", has_text="eu-central-1").locator("td")).to_have_text(
        ["eu-central-1", "2", "3", "3"]
    )
    expect(page.locator("#placement-none")).to_have_count(0)
    page.locator("section:has(#placement)").screenshot(path=screenshots / "placement.png")

    publish_state(broker.url, {"regions": "not a state"})
    expect(page.locator("#placement-ignored")).to_contain_text(
        "1 publication on placement/state ignored", timeout=TIMEOUT_MS
    )
    expect(scores).to_be_visible()  # the last state is kept
