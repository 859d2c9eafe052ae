"""Subscribers that are gone are deleted: ephemeral ones once no stream or call keeps them,
and (when configured) any subscriber idle too long; streams keep theirs alive."""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tidings.client import AsyncClient
from tidings.config import SubscriberSettings, load_settings
from tidings.delivery.presence import Presence
from tidings.server import EmbeddedServer


def test_a_report_has_everyone_seen_and_every_open_stream_then_starts_afresh() -> None:
    presence = Presence(SubscriberSettings())
    presence.saw("a", 10.0)
    assert presence.report({"s"}, 12.0) == {"a": 10.0, "s": 12.0}
    assert presence.report(set(), 13.0) == {}


def test_the_bounds_follow_the_settings_and_idle_expiry_is_off_by_default() -> None:
    assert Presence(SubscriberSettings()).bounds(100.0) == (0.0, 70.0)
    assert Presence(SubscriberSettings(idle_expiry_s=50)).bounds(100.0) == (50.0, 70.0)


def test_a_subscriber_streaming_here_is_never_expired_by_this_broker() -> None:
    assert Presence.expired(["a", "b"], {"b"}) == ["a"]


def server(tmp_path: Path, **subscribers: float) -> EmbeddedServer:
    settings = load_settings({"data_dir": tmp_path}, env={})
    settings = dataclasses.replace(settings, subscribers=SubscriberSettings(**subscribers))
    return EmbeddedServer(settings)


@pytest.fixture
def quick(tmp_path: Path) -> Iterator[str]:
    with server(tmp_path, ephemeral_grace_s=1.5, idle_expiry_s=3.0) as s:
        yield s.url


def exists(url: str, sid: str, token: str) -> bool:
    answer = httpx.get(f"{url}/v1/subscribers/{sid}", headers={"Authorization": f"Bearer {token}"})
    return answer.status_code == 200


def gone_within(url: str, sid: str, token: str, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if not exists(url, sid, token):
            return True
        time.sleep(0.1)
    return False


async def test_an_ephemeral_subscriber_lives_while_it_streams_and_goes_after(quick: str) -> None:
    async with AsyncClient(quick) as client:
        me = await client.register(ephemeral=True)
        async with me.stream(reconnect=False):
            await asyncio.sleep(3)  # well past the grace: the stream keeps it
            assert await asyncio.to_thread(exists, quick, me.id, me.token)
        # asked through the metrics, not with its token: a call would count as presence
        deadline = time.monotonic() + 10
        while await asyncio.to_thread(subscribers, quick) and time.monotonic() < deadline:
            await asyncio.sleep(0.2)
        assert await asyncio.to_thread(subscribers, quick) == 0


def subscribers(url: str) -> float:
    for line in httpx.get(f"{url}/metrics").text.splitlines():
        if line.startswith("tidings_subscribers "):
            return float(line.split()[1])
    raise AssertionError("no tidings_subscribers gauge")


def test_a_durable_subscriber_is_kept_while_it_calls_and_expired_when_idle(quick: str) -> None:
    busy = httpx.post(f"{quick}/v1/subscribers").json()
    idle = httpx.post(f"{quick}/v1/subscribers").json()
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:  # busy calls every 0.2 s; idle says nothing
        assert exists(quick, busy["id"], busy["token"])
        time.sleep(0.2)
    assert gone_within(quick, idle["id"], idle["token"], 0.1)
    assert exists(quick, busy["id"], busy["token"])


def test_without_idle_expiry_a_durable_subscriber_stays(tmp_path: Path) -> None:
    with server(tmp_path, ephemeral_grace_s=0.3) as s:
        me = httpx.post(f"{s.url}/v1/subscribers").json()
        time.sleep(1.5)
        assert exists(s.url, me["id"], me["token"])
