"""Simulator runs end to end against a real broker: what was published arrives, is logged
with its timestamps, and lands in a run directory the report can read."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson

from tidings.ports import free_port
from tidings.sim.config import parse_config
from tidings.sim.events import read
from tidings.sim.simulation import RunOptions, run


def simulate(raw: dict[str, Any], tmp_path: Path, url: str, processes: int = 1) -> Any:
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    return run(parse_config(raw), run_dir, RunOptions(url, processes, progress=False))


def test_a_thesis_format_config_runs_and_every_topic_subscriber_gets_every_publication(
    tmp_path: Path, broker_url: str
) -> None:
    raw = {
        "baseUrl": "http://unused.invalid/api",
        "applicationMode": "Simulator",
        "nodesCount": 4,
        "topicsMetadata": {"nodesCount": 3, "topics": ["topic1", "topic2"]},
        "duration": 1,
        "rate": 4,
    }
    outcome = simulate(raw, tmp_path, broker_url)
    summary = outcome.summary
    assert summary["publications"] == 8
    assert summary["deliveries"] == 8 * 3  # the fourth subscriber subscribed to nothing
    assert summary["received_min"] == summary["received_max"] == 8
    files = {p.name for p in outcome.run_dir.iterdir()}
    expected = {"config.json", "environment.json", "events.jsonl", "summary.json", "run.json"}
    assert expected | {"publications", "deliveries"} <= files


def test_every_delivery_is_logged_after_its_publication_with_kind_and_subscriber(
    tmp_path: Path, broker_url: str
) -> None:
    raw = {
        "duration": 1,
        "quiet": 0.3,
        "subscribers": [{"count": 2, "predicates": [{"key": "t", "op": ">", "value": 1}]}],
        "publishers": [{"rate": 5, "attributes": {"t": {"choice": [0, 5]}}, "payload_bytes": 64}],
    }
    outcome = simulate(raw, tmp_path, broker_url)
    logged = list(read(outcome.run_dir / "events.jsonl"))
    sent = {e["publication_id"]: e for e in logged if e["event"] == "published"}
    matching = {p for p, e in sent.items() if e["attributes"]["t"] == 5}
    delivered = [e for e in logged if e["event"] == "delivered"]
    assert {e["publication_id"] for e in delivered} == matching
    assert len(delivered) == 2 * len(matching)
    assert all(e["kind"] == "content" and e["at"] > sent[e["publication_id"]]["sent_at"]
               for e in delivered)  # fmt: skip
    lines = (outcome.run_dir / "deliveries" / "sim.jsonl").read_bytes().splitlines()
    assert {orjson.loads(line)["event"] for line in lines} == {"delivered"}


def test_an_offline_subscriber_drains_what_was_published_while_it_was_away(
    tmp_path: Path, broker_url: str
) -> None:
    raw = {
        "duration": 1.2,
        "quiet": 0.3,
        "subscribers": [
            {"topics": ["a"], "offline": [{"at": 0.1, "seconds": 0.8}]},
            {"topics": ["a"]},
        ],
        "publishers": [{"rate": 10, "topics": ["a"]}],
    }
    outcome = simulate(raw, tmp_path, broker_url)
    logged = list(read(outcome.run_dir / "events.jsonl"))
    assert [e["event"] for e in logged if e["event"] in ("offline", "online")] == [
        "offline",
        "online",
    ]
    summary = outcome.summary
    assert summary["received_min"] == summary["received_max"] == summary["publications"] == 12
    assert summary["redelivered"] == 0


def test_subscribers_spread_over_two_processes_receive_everything(
    tmp_path: Path, broker_url: str
) -> None:
    raw = {
        "duration": 0.6,
        "quiet": 0.3,
        "delivery": "pull",
        "subscribers": [{"count": 4, "topics": ["p/#"]}],
        "publishers": [{"rate": 5, "topics": ["p/q"]}],
    }
    summary = simulate(raw, tmp_path, broker_url, processes=2).summary
    assert summary["deliveries"] == 4 * summary["publications"] == 12


def test_an_unreachable_broker_is_one_line_naming_it_and_how_it_was_tried(
    tmp_path: Path,
) -> None:
    config = tmp_path / "sim.json"
    config.write_text('{"duration": 1, "subscribers": [{"topics": ["a"]}]}')
    url = f"http://127.0.0.1:{free_port()}"
    done = subprocess.run(
        [sys.executable, "-m", "tidings.cli.main", "sim", str(config), "--url", url,
         "--runs", str(tmp_path / "runs"), "--no-progress"],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 1  # unreachable: 1, as for every client command
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1
    assert url in lines[0] and "GET" in lines[0] and "/healthz" in lines[0]


def test_subscribers_reconnect_after_a_broker_restart_and_miss_nothing_published(
    tmp_path: Path,
) -> None:
    import threading
    import time

    from tidings.server import broker_process

    port, data = free_port(), tmp_path / "broker"
    raw = {"duration": 6, "quiet": 1, "subscribers": [{"count": 2, "topics": ["t"]}],
           "publishers": [{"rate": 4, "topics": ["t"]}]}  # fmt: skip
    with broker_process(data, port) as (first, url):
        outcome: list[Any] = []
        runner = threading.Thread(target=lambda: outcome.append(simulate(raw, tmp_path, url)))
        runner.start()
        time.sleep(2.5)
        first.terminate()  # mid-run: streams close, publishes fail until it is back
        first.wait(10)
        with broker_process(data, port):
            runner.join(60)
    logged = list(read(outcome[0].run_dir / "events.jsonl"))
    published = {e["publication_id"] for e in logged if e["event"] == "published"}
    delivered = [e for e in logged if e["event"] == "delivered"]
    assert any(e["event"] == "reconnect" for e in logged)
    assert any(e["event"] == "error" for e in logged)  # publishing while it was down
    for subscriber in {e["subscriber_id"] for e in delivered}:
        got = {e["publication_id"] for e in delivered if e["subscriber_id"] == subscriber}
        assert got == published
    assert len({e["subscriber_id"] for e in delivered}) == 2
