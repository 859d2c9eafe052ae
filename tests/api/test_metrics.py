"""`/metrics` in the Prometheus text format, parsed with prometheus-client's own parser:
every family described from the start, and the counters move with the work done."""

from __future__ import annotations

from pathlib import Path

import httpx
from prometheus_client.parser import text_string_to_metric_families
from tests.api.conftest import Sub

from tidings.admin import admin_token
from tidings.config import load_settings
from tidings.metrics import COUNTERS
from tidings.server import EmbeddedServer

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def scrape(http: httpx.Client, token: str | None = None) -> tuple[dict[str, str], Samples]:
    """The families' types, and every sample by (name, sorted labels)."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    response = http.get("/metrics", headers=headers)
    assert response.headers["content-type"].startswith("text/plain")
    families = list(text_string_to_metric_families(response.text))
    types = {f.name: f.type for f in families}
    samples = {
        (s.name, tuple(sorted(s.labels.items()))): s.value for f in families for s in f.samples
    }
    return types, samples


def test_every_family_is_described_before_anything_happened(tmp_path: Path) -> None:
    with EmbeddedServer(load_settings({"data_dir": tmp_path}, env={})) as fresh:
        text = httpx.get(f"{fresh.url}/metrics").text
        types, samples = scrape(httpx.Client(base_url=fresh.url))
    for name in COUNTERS:
        assert types[f"tidings_{name}"] == "counter"
        assert f"# HELP tidings_{name}_total " in text
    for name in ("matching_seconds", "publish_to_delivery_seconds", "publish_to_ack_seconds"):
        assert types[f"tidings_{name}"] == "histogram"
    for name in ("subscribers", "subscriptions", "queued_messages", "oldest_message_age_seconds"):
        assert types[f"tidings_{name}"] == "gauge"
    assert types["process_cpu_seconds"] == "counter"  # the process collector
    assert samples[("tidings_deliveries_enqueued_total", (("kind", "content"),))] == 0


def test_publishing_delivering_and_acknowledging_move_the_counters(
    http: httpx.Client, sub: Sub
) -> None:
    sub.subscribe(topics=["metered"])
    _, before = scrape(http)
    http.post("/v1/publications", json={"topics": ["metered"]})
    http.post("/v1/publications", json={"topics": ["nobody"]})
    _, queued = scrape(http)
    sub.drain()
    _, after = scrape(http)

    def grew(samples: Samples, name: str, **labels: str) -> float:
        key = (name, tuple(sorted(labels.items())))
        return samples.get(key, 0) - before.get(key, 0)

    assert grew(queued, "tidings_publications_total") == 2
    assert grew(queued, "tidings_deliveries_enqueued_total", kind="topic") == 1
    assert grew(queued, "tidings_matching_seconds_count") == 2
    assert grew(queued, "tidings_queued_messages", state="ready") == 1
    assert grew(after, "tidings_deliveries_leased_total") == 1
    assert grew(after, "tidings_deliveries_acked_total") == 1
    assert grew(after, "tidings_publish_to_delivery_seconds_count") == 1
    assert grew(after, "tidings_publish_to_ack_seconds_count") == 1
    assert grew(after, "tidings_queued_messages", state="ready") == 0


def test_a_waiting_queue_shows_its_depth_and_age_per_subscriber_to_the_admin(
    http: httpx.Client, sub: Sub, server: EmbeddedServer
) -> None:
    sub.subscribe(topics=["waiting"])
    http.post("/v1/publications", json={"topics": ["waiting"]})
    token, _ = admin_token("", server.settings.data_dir)
    _, samples = scrape(http, token)
    ready = (("state", "ready"), ("subscriber", sub.id))
    assert samples[("tidings_subscriber_queued_messages", ready)] == 1
    age = ("tidings_subscriber_oldest_message_age_seconds", (("subscriber", sub.id),))
    assert samples[age] >= 0
    for anyone in (None, sub.token):  # without the admin's token: aggregates only
        _, seen = scrape(http, anyone)
        assert not any(sub.id in str(labels) for _, labels in seen)
        assert seen[("tidings_queued_messages", (("state", "ready"),))] >= 1
    sub.drain()


def test_requests_are_counted_by_route_template_and_status(http: httpx.Client, sub: Sub) -> None:
    sub.get("/messages")
    http.get("/no/such/path")
    _, samples = scrape(http)
    route = "/v1/subscribers/{subscriber_id}/messages"
    ok = (("method", "GET"), ("route", route), ("status", "200"))
    missing = (("method", "GET"), ("route", "unmatched"), ("status", "404"))
    assert samples[("tidings_http_requests_total", ok)] >= 1
    assert samples[("tidings_http_requests_total", missing)] >= 1
    timed = (("method", "GET"), ("route", route))
    assert samples[("tidings_http_request_seconds_count", timed)] >= 1


def test_large_counts_keep_every_digit(tmp_path: Path) -> None:
    with EmbeddedServer(load_settings({"data_dir": tmp_path}, env={})) as fresh:
        fresh.broker.metrics.inc("expired", 1_234_567)
        _, samples = scrape(httpx.Client(base_url=fresh.url))
    assert samples[("tidings_expired_total", ())] == 1_234_567
