"""The promise: a `kill -9` at any moment loses no accepted publication and no
unacknowledged delivery, and an acknowledged delivery does not come back."""

from __future__ import annotations

import os
import random
import signal
import threading
import time
from pathlib import Path

import httpx
import pytest

from tidings.server import broker_process, free_port


class Load:
    """Publishes and consumes until the broker dies, recording what the broker confirmed."""

    def __init__(self, url: str, reader: dict[str, str]) -> None:
        self.url, self.reader = url, reader
        self.accepted: list[str] = []
        self.acked: set[str] = set()  # acknowledgements the broker confirmed
        self.tried: set[str] = set()  # acknowledgements sent, confirmed or not
        self.threads = [
            threading.Thread(target=self.publish),
            threading.Thread(target=self.consume),
        ]

    def publish(self) -> None:
        with httpx.Client(base_url=self.url, timeout=5) as http:
            for i in range(100_000):
                try:
                    r = http.post(
                        "/v1/publications", json={"topics": ["k"], "attributes": {"n": i}}
                    )
                except httpx.TransportError:
                    return
                if r.status_code == 201:
                    self.accepted.append(r.json()["id"])

    def consume(self) -> None:
        auth = {"Authorization": f"Bearer {self.reader['token']}"}
        base = f"/v1/subscribers/{self.reader['id']}/messages"
        with httpx.Client(base_url=self.url, timeout=5, headers=auth) as http:
            while True:
                try:
                    params = {"max": 20, "wait": 1, "visibility": 1}
                    messages = http.get(base, params=params).json()["messages"]
                    by_receipt = {m["receipt"]: m["publication_id"] for m in messages}
                    if not messages:
                        continue
                    self.tried.update(by_receipt.values())
                    done = http.post(f"{base}/ack", json={"receipts": list(by_receipt)}).json()
                except (httpx.TransportError, ValueError):
                    return
                self.acked.update(by_receipt[r] for r in done["acked"])


def queued(url: str, who: dict[str, str]) -> list[str]:
    auth = {"Authorization": f"Bearer {who['token']}"}
    out: list[str] = []
    with httpx.Client(base_url=url, headers=auth, timeout=10) as http:
        while batch := http.get(
            f"/v1/subscribers/{who['id']}/messages", params={"max": 100, "visibility": 600}
        ).json()["messages"]:
            out += [m["publication_id"] for m in batch]
    return out


@pytest.mark.slow
@pytest.mark.parametrize("seed", [1, 2])
def test_kill_9_under_load_loses_no_accepted_publication(tmp_path: Path, seed: int) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    with broker_process(tmp_path, port) as (proc, _), httpx.Client(base_url=url) as http:
        subs = [http.post("/v1/subscribers").json() for _ in range(3)]
        for s in subs:
            http.post(
                f"/v1/subscribers/{s['id']}/subscriptions",
                json={"topics": ["k"]},
                headers={"Authorization": f"Bearer {s['token']}"},
            )
        load = Load(url, subs[0])
        for t in load.threads:
            t.start()
        deadline = time.monotonic() + 60
        while len(load.accepted) < 100 and time.monotonic() < deadline:
            time.sleep(0.05)  # kill under load, however slow the machine is today
        time.sleep(random.Random(seed).uniform(0.0, 0.5))
        os.kill(proc.pid, signal.SIGKILL)
        for t in load.threads:
            t.join(30)
    assert len(load.accepted) > 50, "the load did not get going before the kill"
    time.sleep(1.1)  # the reader's last leases (visibility 1 s) run out
    with broker_process(tmp_path, port):
        reader_left = queued(url, subs[0])
        for other in subs[1:]:
            assert set(load.accepted) <= set(queued(url, other))
    # only the one acknowledgement in flight at the kill may or may not have been committed
    assert len(load.tried - load.acked) <= 20
    assert set(load.accepted) <= load.tried | set(reader_left)
    assert not load.acked & set(reader_left), "an acknowledged delivery came back"
