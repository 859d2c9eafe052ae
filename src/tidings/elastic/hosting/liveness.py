"""Peers watched through their connections: the first sign that an operator's process died.

ZooKeeper notices a killed process only when its session expires (10 s by default), and all
that time the access points hold its publications. The operating system closes a dead
process's sockets at once, and ZeroMQ reports it: each watched peer gets a connection of its
own to its inbox (a PUSH socket that never sends) with a socket monitor. ZeroMQ's heartbeats
(ZMTP PING, answered by the peer's ZeroMQ I/O thread, so a peer busy in Python still
answers) close the connection of a peer that stopped answering without closing it: a
stopped process, a machine gone.

A peer seen alive (a handshake) whose connection is lost and not back, handshake and all,
within `grace_s` is reported once (`on_lost`); ZeroMQ keeps trying to reconnect meanwhile, so
a restarted listener or a short network fault is forgiven. A peer never reached is never
reported: its session's expiry still is the last word.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

import zmq
import zmq.asyncio
from zmq.utils.monitor import parse_monitor_message

from tidings.elastic.protocol.channels import Security

log = logging.getLogger("tidings.elastic")

_UP = zmq.EVENT_HANDSHAKE_SUCCEEDED
_DOWN = (
    zmq.EVENT_DISCONNECTED
    | zmq.EVENT_HANDSHAKE_FAILED_NO_DETAIL
    | zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL
    | zmq.EVENT_HANDSHAKE_FAILED_AUTH
)


@dataclass
class _Peer:
    address: str
    socket: zmq.asyncio.Socket
    monitor: zmq.asyncio.Socket
    task: asyncio.Task[None] | None = None
    seen: bool = False  # a handshake succeeded once
    suspect: asyncio.TimerHandle | None = None
    lost: bool = False
    events: deque[str] = field(default_factory=lambda: deque(maxlen=8))  # the last, for the logs


class PeerWatch:
    """`watch(peer, address)`; `on_lost(peer)` once the peer has been unreachable for
    `grace_s`. Heartbeats every `heartbeat_s`, a silent connection closed after three."""

    def __init__(
        self,
        context: zmq.asyncio.Context,
        on_lost: Callable[[str], None],
        grace_s: float = 1.0,
        heartbeat_s: float = 0.5,
    ) -> None:
        self._context = context
        self._on_lost = on_lost
        self.grace_s = grace_s
        self._heartbeat_ms = max(1, int(heartbeat_s * 1000))
        self._peers: dict[str, _Peer] = {}

    @property
    def watched(self) -> set[str]:
        return set(self._peers)

    def watch(self, peer: str, address: str) -> None:
        """Watch a peer at its inbox's address (afresh if it moved, or was reported lost: a
        namesake started since)."""
        known = self._peers.get(peer)
        if known is not None:
            if known.address == address and not known.lost:
                return
            self.unwatch(peer)
        sock = self._context.socket(zmq.PUSH)
        sock.setsockopt(zmq.LINGER, 0)
        sock.setsockopt(zmq.HEARTBEAT_IVL, self._heartbeat_ms)
        sock.setsockopt(zmq.HEARTBEAT_TIMEOUT, 3 * self._heartbeat_ms)
        Security.client(sock)  # a CURVE inbox hangs up on a connection that is not
        monitor = sock.get_monitor_socket(_UP | _DOWN)
        state = self._peers[peer] = _Peer(address, sock, monitor)
        state.task = asyncio.get_running_loop().create_task(
            self._follow(peer, state), name=f"watch-{peer}"
        )
        sock.connect(address)

    def unwatch(self, peer: str) -> None:
        state = self._peers.pop(peer, None)
        if state is None:
            return
        if state.suspect is not None:
            state.suspect.cancel()
        if state.task is not None:
            state.task.cancel()
        with contextlib.suppress(zmq.ZMQError):
            state.socket.disable_monitor()
        state.monitor.close(linger=0)
        state.socket.close(linger=0)

    def close(self) -> None:
        for peer in list(self._peers):
            self.unwatch(peer)

    def events(self, peer: str) -> list[str]:
        state = self._peers.get(peer)
        return list(state.events) if state is not None else []

    async def _follow(self, peer: str, state: _Peer) -> None:
        loop = asyncio.get_running_loop()
        while True:
            event = parse_monitor_message(await state.monitor.recv_multipart())["event"]
            state.events.append(zmq.Event(event).name or str(event))
            if event == _UP:
                state.seen = True
                if state.suspect is not None:
                    state.suspect.cancel()
                    state.suspect = None
            elif state.seen and state.suspect is None and not state.lost:
                state.suspect = loop.call_later(self.grace_s, self._unreachable, peer, state)

    def _unreachable(self, peer: str, state: _Peer) -> None:
        state.suspect = None
        if self._peers.get(peer) is not state or state.lost:
            return
        state.lost = True
        log.warning(
            "elastic: %s at %s unreachable for %.1f s (%s)",
            peer,
            state.address,
            self.grace_s,
            ", ".join(state.events),
        )
        self._on_lost(peer)
