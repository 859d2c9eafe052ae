"""A real HTTP receiver for webhook tests: a threaded `http.server` on loopback that records
every request, checks its signature with the verifier printed in docs/api.md, and answers
`status` (200 unless a test says otherwise)."""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import orjson

DOCS = Path(__file__).parents[2] / "docs" / "api.md"
Verifier = Callable[[str, bytes, str], bool]


def documented_verifier() -> Verifier:
    """The `verify` function of docs/api.md's Python block, run as printed."""
    blocks = re.findall(r"```python\n(.*?)```", DOCS.read_text(), re.DOTALL)
    [code] = [b for b in blocks if "def verify(" in b]
    namespace: dict[str, Any] = {}
    exec(compile(code, str(DOCS), "exec"), namespace)
    return namespace["verify"]  # type: ignore[no-any-return]


@dataclass(frozen=True)
class Received:
    path: str
    headers: dict[str, str]  # lower-case names
    body: bytes
    status: int  # what the receiver answered
    verified: bool
    at: float

    def messages(self) -> list[dict[str, Any]]:
        return orjson.loads(self.body)["messages"]  # type: ignore[no-any-return]


@dataclass
class Receiver:
    secret: str = ""  # set once the broker has made it; requests before are unverified
    status: int = 200
    requests: list[Received] = field(default_factory=list)
    # each request waits here for the others of its party (500 if they do not come)
    hold: threading.Barrier | None = None
    port: int = 0  # any free one, unless a test brings a receiver back where it was
    closed: bool = False  # after `close`, a kept-alive connection is cut without an answer

    def __post_init__(self) -> None:
        self.verify = documented_verifier()
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", self.port), self._handler())
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    def url(self, path: str = "/hook") -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}{path}"

    def taken(self, path: str | None = None) -> list[Received]:
        """The requests answered with a 2xx (to `path`, or to any)."""
        with self._lock:
            return [r for r in self.requests if r.status < 300 and (path is None or r.path == path)]

    def delivered(self, path: str | None = None) -> list[dict[str, Any]]:
        return [m for r in self.taken(path) for m in r.messages()]

    def all(self) -> list[Received]:
        with self._lock:
            return list(self.requests)

    def close(self) -> None:
        self.closed = True
        self._server.shutdown()
        self._server.server_close()

    def _record(self, path: str, headers: dict[str, str], body: bytes) -> int:
        header = headers.get("tidings-signature", "")
        verified = bool(self.secret) and self.verify(self.secret, body, header)
        together = self._wait_for_the_party()
        with self._lock:
            status = self.status if together else 500
            self.requests.append(Received(path, headers, body, status, verified, time.time()))
        return status

    def _wait_for_the_party(self) -> bool:
        if self.hold is None:
            return True
        try:
            self.hold.wait()
        except threading.BrokenBarrierError:
            return False
        return True

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # kept alive, as the broker's client expects

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                if receiver.closed:  # down: no answer, the connection cut
                    self.close_connection = True
                    return
                headers = {k.lower(): v for k, v in self.headers.items()}
                status = receiver._record(self.path, headers, body)
                self.send_response(status)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, format: str, *args: Any) -> None:
                pass

        return Handler


def wait_for(check: Callable[[], Any], what: str, timeout_s: float = 30.0) -> Any:
    """Poll `check` until it returns something true (returned), failing after `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    while True:
        found = check()
        if found:
            return found
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)
