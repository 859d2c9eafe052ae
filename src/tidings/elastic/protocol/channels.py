"""FIFO channels between operators over ZeroMQ.

Each operator has one inbox, a PULL socket bound to an address (`ipc://` on one machine,
`tcp://` between machines); a sender keeps one PUSH socket per receiver. A PUSH socket with
one peer is a FIFO channel, and a PULL socket queues each sender's frames fairly without
reordering them, so between any two operators messages arrive in the order they were sent:
the property the scaling protocols rely on (docs/elastic.md). Queues are unbounded (high-water
marks off): a sender never blocks and a frame is never dropped while both ends live.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Awaitable, Callable
from typing import Any

import zmq
import zmq.asyncio

from tidings.elastic.protocol import wire
from tidings.elastic.protocol.curve import ClusterKey, as_client, as_server, guard
from tidings.errors import ErrorCode, TidingsError

MAX_BATCH = 512  # frames read per wake-up
MAX_BATCH_BYTES = 1 << 20  # ... and bytes: a batch is decoded and handled in one loop step


def local_host() -> str:
    """This machine's address as others would reach it (127.0.0.1 when it has no other)."""
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.connect(("192.0.2.1", 9))  # no packet is sent: this only picks a route
            return str(s.getsockname()[0])
    except OSError:
        return "127.0.0.1"


class Security:
    """The process's channels: CURVE with the cluster's key once `secure` was called
    (tidings.elastic.protocol.curve), else plain and only on loopback or `ipc://`."""

    key: ClusterKey | None = None
    _guard: Any = None

    @classmethod
    def secure(cls, key: ClusterKey) -> None:
        """From now on every channel of this process is CURVE with `key`; the process's ZAP
        handler starts on the shared context (call from its event loop, before any inbox)."""
        if cls.key == key:
            return
        if cls._guard is not None:
            cls._guard.stop()
        cls.key, cls._guard = key, guard(shared_context(), key)

    @classmethod
    def client(cls, sock: zmq.Socket[Any]) -> None:
        if cls.key is not None:
            as_client(sock, cls.key)


def beyond_loopback(bind: str) -> bool:
    """Whether `bind` (a ZeroMQ endpoint) can be reached from other machines."""
    if not bind.startswith("tcp://"):
        return False  # ipc:// and inproc:// are this machine's only
    host = bind.removeprefix("tcp://").rsplit(":", 1)[0].strip("[]")
    if host == "localhost":
        return False
    try:
        return not ipaddress.ip_address(host).is_loopback
    except ValueError:  # "*", an interface or host name: reachable beyond this machine
        return True


class Inbox:
    """An operator's bound PULL socket; `address` is what peers connect to."""

    def __init__(self, context: zmq.asyncio.Context, bind: str) -> None:
        if Security.key is None and beyond_loopback(bind):
            detail = (
                f"{bind} is reachable from other machines: give the deployment a cluster key "
                "(elastic.key_file, or --key-file) so its channels are CURVE, or bind loopback"
            )
            raise TidingsError(ErrorCode.CONFIG_INVALID, field="elastic__host", detail=detail)
        self._socket = context.socket(zmq.PULL)
        self._socket.setsockopt(zmq.RCVHWM, 0)
        self._socket.setsockopt(zmq.LINGER, 0)
        if Security.key is not None:
            as_server(self._socket, Security.key)
        self._socket.bind(bind)
        endpoint = self._socket.getsockopt(zmq.LAST_ENDPOINT)
        self.address = endpoint.decode() if isinstance(endpoint, bytes) else str(endpoint)
        if self.address.startswith("tcp://0.0.0.0:"):
            self.address = self.address.replace("0.0.0.0", local_host(), 1)

    async def receive(self) -> list[wire.Message]:
        """The next frames in arrival order: at least one, then more while there are and
        the batch holds fewer than `MAX_BATCH` frames and `MAX_BATCH_BYTES`."""
        sock = self._socket
        frames = [await sock.recv()]
        size = len(frames[0])
        while (
            len(frames) < MAX_BATCH
            and size < MAX_BATCH_BYTES
            and int(sock.getsockopt(zmq.EVENTS)) & zmq.POLLIN
        ):
            frames.append(await sock.recv())
            size += len(frames[-1])
        return [wire.decode(f) for f in frames]

    def close(self) -> None:
        self._socket.close(linger=0)


def shared_context() -> zmq.asyncio.Context:
    """The process's one ZeroMQ context, as ZeroMQ advises, never collected. A context of its
    own per operator hung the process whenever an operator that was never stopped was
    collected: the context's finalizer `term`s, which waits for every socket to close, and
    in one collection of a cycle it may run before its sockets' finalizers."""
    return zmq.asyncio.Context.instance()


class Outboxes:
    """One PUSH socket per peer, opened on first use; the peer's address is looked up by id.

    Each socket belongs to the asyncio context (whose `destroy` at a process's end closes
    it), and frames go out through a plain shadow of it (no future per send)."""

    def __init__(self, context: zmq.asyncio.Context) -> None:
        self._context = context
        self._owners: dict[str, zmq.asyncio.Socket] = {}
        self._sockets: dict[str, zmq.Socket[bytes]] = {}
        self._addresses: dict[str, str] = {}
        self._closed = False

    def know(self, peer: str, address: str) -> None:
        self._addresses[peer] = address

    def knows(self, peer: str) -> bool:
        return peer in self._addresses

    def send(self, peer: str, message: wire.Message) -> None:
        self.send_frame(peer, wire.encode(message))

    def send_frame(self, peer: str, frame: bytes) -> None:
        sock = self._sockets.get(peer)
        if sock is None:
            if self._closed:  # a step still running as the operator stops: as if dead
                return
            owner = self._context.socket(zmq.PUSH)
            owner.setsockopt(zmq.SNDHWM, 0)
            owner.setsockopt(zmq.LINGER, 2000)  # at close, what is queued still goes out
            Security.client(owner)
            owner.connect(self._addresses[peer])
            self._owners[peer] = owner
            sock = self._sockets[peer] = zmq.Socket.shadow(owner.underlying)
        sock.send(frame)

    def drop(self, peer: str) -> None:
        """Close the channel to a peer that left the deployment."""
        self._sockets.pop(peer, None)
        owner = self._owners.pop(peer, None)
        if owner is not None:
            owner.close(linger=0)

    def close(self, linger: int | None = None) -> None:
        """`linger=0`: drop what is still queued (as a process that dies would)."""
        self._closed = True
        for owner in self._owners.values():
            owner.close(linger)
        self._owners.clear()
        self._sockets.clear()


AddressOf = Callable[[str], Awaitable[str]]
