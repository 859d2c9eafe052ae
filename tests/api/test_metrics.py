"""`/metrics` in the Prometheus text format: counters move with the work done."""

from __future__ import annotations

import httpx
from tests.api.conftest import Sub


def scrape(http: httpx.Client) -> dict[str, float]:
    response = http.get("/metrics")
    assert response.headers["content-type"].startswith("text/plain")
    samples = {}
    for line in response.text.splitlines():
        if line and not line.startswith("#"):
            name, value = line.rsplit(" ", 1)
            samples[name] = float(value)
    return samples


def test_publishing_and_acknowledging_move_the_counters(http: httpx.Client, sub: Sub) -> None:
    sub.subscribe(topics=["metered"])
    before = scrape(http)
    http.post("/v1/publications", json={"topics": ["metered"]})
    http.post("/v1/publications", json={"topics": ["nobody"]})
    queued = scrape(http)
    sub.drain()
    after = scrape(http)

    def grew(samples: dict[str, float], name: str) -> float:
        return samples.get(name, 0) - before.get(name, 0)

    assert grew(queued, "tidings_publications_total") == 2
    assert grew(queued, "tidings_deliveries_enqueued_total") == 1
    assert grew(queued, "tidings_matching_seconds_count") == 2
    assert grew(queued, "tidings_queued_messages") == 1
    assert grew(after, "tidings_deliveries_leased_total") == 1
    assert grew(after, "tidings_deliveries_acked_total") == 1
    assert after["tidings_queued_messages"] == before.get("tidings_queued_messages", 0)


def test_the_matching_histogram_is_cumulative(http: httpx.Client) -> None:
    http.post("/v1/publications", json={"topics": ["any"]})
    samples = scrape(http)
    buckets = [v for k, v in samples.items() if k.startswith("tidings_matching_seconds_bucket")]
    assert buckets == sorted(buckets)
    assert buckets[-1] == samples["tidings_matching_seconds_count"]
