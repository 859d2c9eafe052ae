"""A deployment that listens beyond loopback: the broker makes the cluster key at its first
start and its operators deliver over CURVE; an operator without the key may not listen there."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

import httpx

from tidings.config import ElasticSettings
from tidings.elastic.hosting.seam import key_path
from tidings.ports import free_port
from tidings.server import broker_processes

CLI = [sys.executable, "-m", "tidings.cli.main"]


def test_a_broker_given_a_key_makes_it_and_its_operators_deliver_over_curve(
    zookeeper: str, tmp_path: Path
) -> None:
    data, key = tmp_path / "broker", tmp_path / "cluster.key"
    cluster = f"c{uuid.uuid4().hex[:8]}"  # on loopback: the tests bind nothing beyond it
    env = {"TIDINGS_ELASTIC__KEY_FILE": str(key), "TIDINGS_ELASTIC__CLUSTER": cluster}
    args = ("--matching", "elastic", "--zookeeper", zookeeper)
    with broker_processes([data], [free_port()], *args, env=env) as [(_, url)]:
        raw = httpx.post(f"{url}/v1/subscribers").json()
        auth = {"Authorization": f"Bearer {raw['token']}"}
        mine = f"{url}/v1/subscribers/{raw['id']}"
        httpx.post(f"{mine}/subscriptions", json={"topics": ["t"]}, headers=auth)
        published = httpx.post(f"{url}/v1/publications", json={"topics": ["t"]}, timeout=30)
        pulled = httpx.get(f"{mine}/messages", params={"wait": 5}, headers=auth, timeout=30)
    assert key.exists() and os.stat(key).st_mode & 0o777 == 0o600
    assert published.json()["deliveries"] == 1
    assert len(pulled.json()["messages"]) == 1


def test_an_operator_may_not_listen_beyond_loopback_without_the_key(
    zookeeper: str, tmp_path: Path
) -> None:
    common = ["--zookeeper", zookeeper, "--cluster", f"c{uuid.uuid4().hex[:8]}"]
    started = time.monotonic()
    done = subprocess.run(
        [*CLI, "matcher", *common, "--bind", "tcp://0.0.0.0:*"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2, done.stderr[-2000:]
    assert "--key-file" in done.stderr and "Traceback" not in done.stderr
    assert time.monotonic() - started < 60


def test_the_key_is_made_in_the_data_directory_only_for_operators_beyond_loopback() -> None:
    made = Path("/data/elastic-cluster.key")
    given = ElasticSettings(key_file="/etc/tidings/cluster.key")
    assert key_path(ElasticSettings(host="0.0.0.0"), "tcp", made) == made
    assert key_path(ElasticSettings(host="10.0.0.5"), "tcp", made) == made
    assert key_path(ElasticSettings(host="127.0.0.1"), "tcp", made) is None
    assert key_path(ElasticSettings(host="0.0.0.0"), "ipc", made) is None
    assert key_path(given, "ipc", made) == Path("/etc/tidings/cluster.key")
