"""HTTP connections with bounds a client cannot lift: the size and count of a request's
headers, a deadline for its headers and one for its body.

uvicorn's httptools protocol reads a header line of any length (a 200 MiB line was read in
full) and waits forever for headers or a body that trickle in (1,000 slowloris connections
stayed open). This subclass counts the bytes a request's head takes before its headers are
complete and answers 431 past `max_header_bytes` (buffering at most that plus one read),
refuses more than `max_headers` headers, and closes a connection whose headers are not
complete `header_timeout_s` after it opened or its request began, or whose body is not
complete `body_timeout_s` after its headers (the application then sees the client leave).
"""

from __future__ import annotations

import asyncio
from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from tidings.config import HTTPSettings

TOO_LARGE = b"HTTP/1.1 431 Request Header Fields Too Large\r\n"


class GuardedHttpTools(HttpToolsProtocol):
    """httptools' protocol with the limits of `HTTPSettings` (set by `guarded`)."""

    limits = HTTPSettings()

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._head_bytes = 0
        self._headers = 0
        self._in_head = True
        self._deadline: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm(self.limits.header_timeout_s)

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if self._in_head:
            self._head_bytes += len(data)
        super().data_received(data)
        if self.transport.is_closing():
            return
        if self._in_head and self._head_bytes > self.limits.max_header_bytes:
            self._refuse(f"a request's headers are at most {self.limits.max_header_bytes} bytes")

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._in_head, self._headers = True, 0
        if self._deadline is None:  # a kept-alive connection's next request
            self._arm(self.limits.header_timeout_s)

    def on_header(self, name: bytes, value: bytes) -> None:
        self._headers += 1
        super().on_header(name, value)

    def on_headers_complete(self) -> None:
        self._in_head, self._head_bytes = False, 0
        if self._headers > self.limits.max_headers:
            self._refuse(f"a request has at most {self.limits.max_headers} headers")
            return
        self._disarm()
        super().on_headers_complete()
        if not (self.parser.should_upgrade() and self._should_upgrade()):
            self._arm(self.limits.body_timeout_s)

    def on_message_complete(self) -> None:
        self._disarm()
        super().on_message_complete()

    def _refuse(self, why: str) -> None:
        self._disarm()
        body = why.encode("ascii")
        head = b"content-type: text/plain; charset=utf-8\r\nconnection: close\r\n"
        length = b"content-length: " + str(len(body)).encode() + b"\r\n\r\n"
        self.transport.write(TOO_LARGE + head + length + body)
        self.transport.close()

    def _arm(self, seconds: float) -> None:
        self._disarm()
        self._deadline = self.loop.call_later(seconds, self._expired)

    def _disarm(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def _expired(self) -> None:
        """Headers or a body that did not arrive in time: the connection goes (a request
        already running sees its client leave)."""
        self._deadline = None
        if not self.transport.is_closing():
            self.transport.close()


def guarded(limits: HTTPSettings) -> type[GuardedHttpTools]:
    """The protocol class for uvicorn's `http=`, with these limits."""
    return type("Guarded", (GuardedHttpTools,), {"limits": limits})
