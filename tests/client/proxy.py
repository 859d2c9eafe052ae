"""A TCP proxy on loopback that loses answers: the broker's answer on each of the first
`drop` connections is read (so the broker has done the work) and never passed on, after
`delay_s`; the client's connection is then closed. Later connections pass through."""

from __future__ import annotations

import contextlib
import socket
import threading


class LosingProxy:
    def __init__(self, target_port: int, drop: int = 1, delay_s: float = 0.0) -> None:
        self.target_port, self.drop, self.delay_s = target_port, drop, delay_s
        self.connections = 0
        self.lost = 0
        self._lock = threading.Lock()
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = int(self._listener.getsockname()[1])
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def close(self) -> None:
        self._listener.close()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            with self._lock:
                self.connections += 1
                losing = self.connections <= self.drop
            upstream = socket.create_connection(("127.0.0.1", self.target_port))
            threading.Thread(target=_pump, args=(client, upstream), daemon=True).start()
            answer = self._lose if losing else _pump
            threading.Thread(target=answer, args=(upstream, client), daemon=True).start()

    def _lose(self, upstream: socket.socket, client: socket.socket) -> None:
        upstream.recv(65536)  # the answer has begun: the broker committed
        with self._lock:
            self.lost += 1
        threading.Event().wait(self.delay_s)
        _closed(client, upstream)


def _pump(source: socket.socket, sink: socket.socket) -> None:
    try:
        while data := source.recv(65536):
            sink.sendall(data)
    except OSError:
        pass  # either side gone: the pair is closed below
    finally:
        _closed(source, sink)


def _closed(*sockets: socket.socket) -> None:
    """Shut down first: a close alone neither wakes another thread's `recv` on the socket
    nor tells the peer while that call holds it."""
    for s in sockets:
        with contextlib.suppress(OSError):
            s.shutdown(socket.SHUT_RDWR)
        s.close()
