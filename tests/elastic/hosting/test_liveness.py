"""Peers watched through their connections: a process that dies, or stops answering, is
reported once its connection has been lost for the grace; one whose listener comes back in
time, or that was never reached, is not."""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tidings.elastic.hosting.liveness import PeerWatch
from tidings.elastic.protocol.channels import Inbox, shared_context

LISTENER = """
import sys, time, zmq
inbox = zmq.Context.instance().socket(zmq.PULL)
inbox.bind(sys.argv[1])
print(inbox.getsockopt(zmq.LAST_ENDPOINT).decode(), flush=True)
time.sleep(600)
"""


@contextmanager
def listener(bind: str = "tcp://127.0.0.1:*") -> Iterator[tuple[subprocess.Popen[str], str]]:
    """A process with a bound inbox, and the inbox's address."""
    proc = subprocess.Popen(
        [sys.executable, "-c", LISTENER, bind], stdout=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout is not None
        yield proc, proc.stdout.readline().strip()
    finally:
        proc.send_signal(signal.SIGCONT)
        proc.kill()
        proc.wait(10)


class Lost:
    def __init__(self) -> None:
        self.peers: list[str] = []
        self.event = asyncio.Event()

    def __call__(self, peer: str) -> None:
        self.peers.append(peer)
        self.event.set()


async def watched(watch: PeerWatch, peer: str, address: str) -> None:
    """Watch a peer, and wait until it was seen alive (a handshake)."""
    watch.watch(peer, address)
    async with asyncio.timeout(10):
        while "HANDSHAKE_SUCCEEDED" not in watch.events(peer):
            await asyncio.sleep(0.01)


async def test_a_peer_whose_process_is_killed_is_reported_once() -> None:
    lost = Lost()
    watch = PeerWatch(shared_context(), lost, grace_s=0.2)
    with listener() as (proc, address):
        await watched(watch, "m1", address)
        proc.kill()
        await asyncio.wait_for(lost.event.wait(), 10)
        await asyncio.sleep(0.5)  # ZeroMQ keeps trying to reconnect: no second report
    watch.close()
    assert lost.peers == ["m1"]


async def test_a_stopped_process_is_reported_through_the_heartbeats() -> None:
    """SIGSTOP: its sockets stay open, and only the missing answers to heartbeats tell."""
    lost = Lost()
    watch = PeerWatch(shared_context(), lost, grace_s=0.2, heartbeat_s=0.1)
    with listener() as (proc, address):
        await watched(watch, "m1", address)
        proc.send_signal(signal.SIGSTOP)
        await asyncio.wait_for(lost.event.wait(), 10)
    watch.close()
    assert lost.peers == ["m1"]


async def test_a_listener_back_within_the_grace_is_not_reported(tmp_path: Path) -> None:
    lost = Lost()
    watch = PeerWatch(shared_context(), lost, grace_s=1.0)
    address = f"ipc://{tmp_path / 'inbox'}"
    inbox = Inbox(shared_context(), address)
    await watched(watch, "m1", address)
    inbox.close()
    while "DISCONNECTED" not in watch.events("m1"):
        await asyncio.sleep(0.01)
    inbox = Inbox(shared_context(), address)  # back at the same address
    while watch.events("m1").count("HANDSHAKE_SUCCEEDED") < 2:
        await asyncio.sleep(0.01)
    await asyncio.sleep(1.3)  # past the grace
    assert lost.peers == []
    watch.close()
    inbox.close()


async def test_a_peer_never_reached_is_not_reported(tmp_path: Path) -> None:
    """No handshake ever: its session's expiry is the last word, not a connection."""
    lost = Lost()
    watch = PeerWatch(shared_context(), lost, grace_s=0.1)
    watch.watch("m1", f"ipc://{tmp_path / 'nobody'}")
    await asyncio.sleep(0.5)
    assert lost.peers == []
    watch.close()


async def test_a_peer_no_longer_watched_is_not_reported() -> None:
    lost = Lost()
    watch = PeerWatch(shared_context(), lost, grace_s=0.2)
    with listener() as (proc, address):
        await watched(watch, "m1", address)
        watch.unwatch("m1")
        proc.kill()
        await asyncio.sleep(0.6)
    assert lost.peers == [] and watch.watched == set()
    watch.close()


async def test_a_peer_reported_lost_and_watched_again_is_reported_again(tmp_path: Path) -> None:
    """A namesake at the same address (a matcher restarted with `--name` and a fixed port)."""
    lost = Lost()
    watch = PeerWatch(shared_context(), lost, grace_s=0.2)
    with listener(f"ipc://{tmp_path / 'm1'}") as (proc, address):
        await watched(watch, "m1", address)
        proc.kill()
        await asyncio.wait_for(lost.event.wait(), 10)
    lost.event.clear()
    with listener(address) as (proc, again):
        assert again == address
        await watched(watch, "m1", again)
        proc.kill()
        await asyncio.wait_for(lost.event.wait(), 10)
    watch.close()
    assert lost.peers == ["m1", "m1"]
