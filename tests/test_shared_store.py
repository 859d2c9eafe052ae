"""Several brokers on one PostgreSQL store share subscriptions and queues."""

from __future__ import annotations

import dataclasses
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import psycopg
import pytest
from tests.conftest import require_service

from tidings.config import load_settings
from tidings.server import EmbeddedServer

PG = "postgresql://postgres@127.0.0.1:5432/test"


@pytest.fixture
def two_brokers(tmp_path: Path) -> Iterator[tuple[str, str]]:
    require_service("postgres")
    schema = f"t_{uuid.uuid4().hex[:12]}"
    settings = load_settings({"store_url": f"{PG}?schema={schema}"}, env={})
    a = EmbeddedServer(dataclasses.replace(settings, data_dir=tmp_path / "a"))
    b = EmbeddedServer(dataclasses.replace(settings, data_dir=tmp_path / "b"))
    with a, b:
        yield a.url, b.url
    with psycopg.connect(PG, autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA "{schema}" CASCADE')


def test_a_subscription_made_on_one_broker_is_matched_by_the_other(
    two_brokers: tuple[str, str],
) -> None:
    a, b = two_brokers
    me = httpx.post(f"{a}/v1/subscribers").json()
    auth = {"Authorization": f"Bearer {me['token']}"}
    httpx.post(
        f"{a}/v1/subscribers/{me['id']}/subscriptions", json={"topics": ["shared"]}, headers=auth
    )
    deadline = time.monotonic() + 10
    while httpx.post(f"{b}/v1/publications", json={"topics": ["shared"]}).json()["deliveries"] == 0:
        assert time.monotonic() < deadline, "broker b never saw the subscription"
        time.sleep(0.2)
    got = httpx.get(f"{a}/v1/subscribers/{me['id']}/messages", params={"max": 100}, headers=auth)
    assert len(got.json()["messages"]) == 1


def test_two_brokers_never_hand_out_the_same_message(two_brokers: tuple[str, str]) -> None:
    a, b = two_brokers
    me = httpx.post(f"{a}/v1/subscribers").json()
    auth = {"Authorization": f"Bearer {me['token']}"}
    httpx.post(f"{a}/v1/subscribers/{me['id']}/subscriptions", json={"topics": ["q"]}, headers=auth)
    httpx.post(f"{a}/v1/publications/batch", json={"publications": [{"topics": ["q"]}] * 200})
    seen: list[str] = []
    with httpx.Client(headers=auth) as http:
        for _ in range(20):
            for url in (a, b):
                batch = http.get(
                    f"{url}/v1/subscribers/{me['id']}/messages", params={"max": 7}
                ).json()
                seen += [m["publication_id"] for m in batch["messages"]]
    assert len(seen) == len(set(seen)) == 200
