"""A lighter request cycle for the publish routes.

For every request uvicorn makes a `RequestResponseCycle` (twenty attributes and an
`asyncio.Event`), checks each header of the answer against two regular expressions, and
writes the head and the body apart. A publish of one publication per request paid that for
an answer of a few dozen bytes, and the HTTP layer was then a third or more of the broker's
CPU a publication (docs/perf.md, eighth sitting). `LightCycle` is what the connection
(`connections.GuardedHttpTools`) makes instead for `POST /v1/publications` and
`/v1/publications/batch`: the same application is called with the same scope, the body is
handed over as it arrives, and the answer's head and body leave in one write.

It keeps what the protocol and the application rely on from uvicorn's cycle: `receive` says
`http.disconnect` once the client is gone, reading resumes when the application reads and
pauses past uvicorn's high-water mark of a body held, `Expect: 100-continue` is answered when
the body is first read, an answer without a length goes chunked, `Connection: close` in an
answer or an HTTP/1.0 request closes the connection after it, a pipelined request waits for
the one before, an application that fails before answering gets a 500, and the access log
says the same line.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

from uvicorn._types import ASGI3Application, ASGIReceiveEvent, ASGISendEvent
from uvicorn.protocols.http.flow_control import FlowControl
from uvicorn.protocols.http.httptools_impl import HEADER_RE, HEADER_VALUE_RE, STATUS_LINE
from uvicorn.protocols.utils import get_client_addr, get_path_with_query_string

CONTINUE = b"HTTP/1.1 100 Continue\r\n\r\n"
LAST_CHUNK = b"0\r\n\r\n"
SERVER_ERROR = b"Internal Server Error"
SERVER_ERROR_HEADERS = [
    (b"content-type", b"text/plain; charset=utf-8"),
    (b"content-length", b"21"),
    (b"connection", b"close"),
]


class LightCycle:
    __slots__ = (
        "_chunked",
        "_head",
        "_left",
        "_waiters",
        "_woken",
        "access_log",
        "access_logger",
        "body",
        "default_headers",
        "disconnected",
        "flow",
        "keep_alive",
        "logger",
        "more_body",
        "on_response",
        "response_complete",
        "response_started",
        "scope",
        "transport",
        "waiting_for_100_continue",
    )

    def __init__(
        self,
        scope: Any,
        transport: asyncio.Transport,
        flow: FlowControl,
        default_headers: list[tuple[bytes, bytes]],
        keep_alive: bool,
        expect_100_continue: bool,
        on_response: Callable[[], None],
        loggers: tuple[logging.Logger, logging.Logger, bool],
    ) -> None:
        self.scope, self.transport, self.flow = scope, transport, flow
        self.default_headers, self.keep_alive = default_headers, keep_alive
        self.waiting_for_100_continue = expect_100_continue
        self.on_response = on_response
        self.logger, self.access_logger, self.access_log = loggers
        self.body = bytearray()
        self.more_body = True
        self.disconnected = self.response_started = self.response_complete = False
        self._woken = False  # body, its end or a disconnection came since the last receive
        self._waiters: list[asyncio.Future[None]] = []  # receives waiting (as on an Event)
        self._head = b""  # the answer's head, held until its body
        self._chunked = False
        self._left = 0  # bytes of body the answer's length still promises

    # ----------------------------------------------------------------- what the protocol uses

    @property
    def message_event(self) -> LightCycle:
        """uvicorn's protocol wakes its cycle with `cycle.message_event.set()`."""
        return self

    def set(self) -> None:
        self._woken = True
        for waiter in self._waiters:
            if not waiter.done():
                waiter.set_result(None)

    async def run_asgi(self, app: ASGI3Application) -> None:
        """The application's exchange, its failures answered as uvicorn's cycle answers
        them: a 500 (through `send`: the server's headers, the access log) if nothing was
        answered yet, else the connection closed."""
        try:
            result = await app(self.scope, self.receive, self.send)  # type: ignore[func-returns-value]
        except BaseException as exc:
            self.logger.error("Exception in ASGI application\n", exc_info=exc)
            if not self.response_started:
                await self._server_error()
            else:
                self.transport.close()
        else:
            if result is not None:
                self.logger.error("ASGI callable should return None, but returned '%s'.", result)
                self.transport.close()
            elif not self.response_started and not self.disconnected:
                self.logger.error("ASGI callable returned without starting response.")
                await self._server_error()
            elif not self.response_complete and not self.disconnected:
                self.logger.error("ASGI callable returned without completing response.")
                self.transport.close()
        finally:
            self.on_response = _nothing

    async def _server_error(self) -> None:
        start = {"type": "http.response.start", "status": 500, "headers": SERVER_ERROR_HEADERS}
        await self.send(start)  # type: ignore[arg-type]
        await self.send({"type": "http.response.body", "body": SERVER_ERROR})

    # ----------------------------------------------------------------- the ASGI channel

    async def receive(self) -> ASGIReceiveEvent:
        if self.waiting_for_100_continue and not self.transport.is_closing():
            self.transport.write(CONTINUE)
            self.waiting_for_100_continue = False
        if not self.disconnected and not self.response_complete:
            self.flow.resume_reading()
            if not self._woken:
                waiter = asyncio.get_running_loop().create_future()
                self._waiters.append(waiter)
                try:
                    await waiter
                finally:
                    self._waiters.remove(waiter)
            self._woken = False
        if self.disconnected or self.response_complete:
            return {"type": "http.disconnect"}
        body, self.body = bytes(self.body), bytearray()
        return {"type": "http.request", "body": body, "more_body": self.more_body}

    async def send(self, message: ASGISendEvent) -> None:
        if self.flow.write_paused and not self.disconnected:
            await self.flow.drain()
        if self.disconnected:
            return
        if not self.response_started:
            if message["type"] != "http.response.start":
                raise RuntimeError(f"expected http.response.start, not {message['type']}")
            self.response_started = True
            self.waiting_for_100_continue = False
            self._start(message["status"], message.get("headers", ()))
            return
        if self.response_complete or message["type"] != "http.response.body":
            raise RuntimeError(f"unexpected {message['type']} (the answer is complete)")
        body: bytes = message.get("body", b"")
        more: bool = message.get("more_body", False)
        if self._chunked:
            data = (b"%x\r\n%b\r\n" % (len(body), body) if body else b"") + (
                b"" if more else LAST_CHUNK
            )
        else:
            if len(body) > self._left:
                raise RuntimeError("Response content longer than Content-Length")
            self._left -= len(body)
            data = body
        head, self._head = self._head, b""
        if head or data:
            self.transport.write(head + data)
        if more:
            return
        if self._left:
            raise RuntimeError("Response content shorter than Content-Length")
        self.response_complete = True
        self.set()
        if not self.keep_alive:
            self.transport.close()
        self.on_response()

    def _start(self, status: int, headers: Any) -> None:
        """The answer's head, held for its first body (or the end)."""
        if self.access_log:
            scope = self.scope
            self.access_logger.info(
                '%s - "%s %s HTTP/%s" %d',
                get_client_addr(scope),
                scope["method"],
                get_path_with_query_string(scope),
                scope["http_version"],
                status,
            )
        every = (*self.default_headers, *headers)
        # uvicorn's checks of every name and value, as two searches over them joined: "-"
        # is a name's character and a tab a value's, so no joint holds a fault of its own
        names, values = b"-".join(n for n, _ in every), b"\t".join(v for _, v in every)
        if HEADER_RE.search(names) or HEADER_VALUE_RE.search(values):
            raise RuntimeError("Invalid HTTP header")
        parts = [STATUS_LINE[status]]
        length: int | None = None
        closes = False
        for name, value in every:
            name = name.lower()
            if name == b"content-length" and length is None:
                length = int(value)
            elif name == b"transfer-encoding" and value.lower() == b"chunked":
                self._chunked = True
            elif name == b"connection" and _says_close(value):
                self.keep_alive, closes = False, True
            parts += (name, b": ", value, b"\r\n")
        if not self.keep_alive and not closes:
            parts.append(b"connection: close\r\n")
        if length is None and not self._chunked and status not in (204, 304):
            self._chunked = True
            parts.append(b"transfer-encoding: chunked\r\n")
        self._left = 0 if self._chunked else length or 0
        parts.append(b"\r\n")
        self._head = b"".join(parts)


def _says_close(value: bytes) -> bool:
    return b"close" in (token.strip() for token in value.lower().split(b","))


def _nothing() -> None:
    pass
