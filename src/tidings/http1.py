"""A lean HTTP/1.1 client: kept-alive connections per origin, a bound on them, httptools'
parser (the one uvicorn uses) for the answers.

httpx costs about 1 ms of CPU per request on this machine class, and more per request with
many in flight, so the broker's URL functions (`sandbox.urlcall`) and the load tool's
publisher would spend their time in the client. This one does what they need: POST a body to
an http:// or https:// URL and read the whole answer, on at most `per_origin` connections to
each origin, reusing them while the server keeps them alive.
"""

from __future__ import annotations

import asyncio
import socket
import ssl
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from urllib.parse import urlsplit

import httptools

from tidings.addresses import Network, Own, denied

READ_CHUNK = 64 * 1024
MAX_ANSWER = 1024 * 1024  # bytes of an answer's body read at most (a webhook's, a URL function's)
MAX_HEAD = 64 * 1024  # bytes of an answer's status line and headers read at most


class AnswerTooLarge(ValueError):
    """The server's answer is longer than the client reads (its connection is closed)."""


class Denied(ValueError):
    """The URL's host is, or resolves only to, an address in a denied network."""


@dataclass(frozen=True, slots=True)
class Response:
    status: int
    body: bytes


class _Answer:
    """httptools' callbacks: the status, whether the connection stays open (known only
    while the headers are current), the body's pieces, and whether the message is complete."""

    def __init__(self) -> None:
        self.parser = httptools.HttpResponseParser(self)
        self.status = 0
        self.keep_alive = False
        self.pieces: list[bytes] = []
        self.size = 0
        self.complete = False
        self.headed = False
        self.sized = False  # Content-Length or chunked: else the body ends with the connection

    def on_header(self, name: bytes, value: bytes) -> None:
        self.sized = self.sized or name.lower() in (b"content-length", b"transfer-encoding")

    def on_headers_complete(self) -> None:
        self.headed = True
        self.status = self.parser.get_status_code()
        self.keep_alive = self.parser.should_keep_alive()

    def on_body(self, body: bytes) -> None:
        self.pieces.append(body)
        self.size += len(body)

    def on_message_complete(self) -> None:
        self.complete = True


class Connection:
    """One kept-alive connection: one exchange at a time."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer
        self.used = False  # an exchange completed on it: the server may since have closed it

    async def exchange(self, request: bytes, max_answer: int) -> tuple[Response, bool]:
        """The answer, and whether the connection can carry another exchange; an answer
        whose body passes `max_answer` bytes raises AnswerTooLarge."""
        answer = _Answer()
        self.writer.write(request)
        read = 0  # bytes on the wire: headers, chunk framing and trailers are not the body
        while not answer.complete:
            data = await self.reader.read(READ_CHUNK)
            if not data:
                if answer.headed and not answer.sized:  # HTTP/1.0 style: the close ends it
                    return Response(answer.status, b"".join(answer.pieces)), False
                raise ConnectionResetError("the server closed the connection mid-answer")
            read += len(data)
            answer.parser.feed_data(data)
            if answer.size > max_answer:
                raise AnswerTooLarge(f"the answer is longer than {max_answer} bytes")
            # the parser keeps a header or trailer whole: an endless one held the broker's memory
            if not answer.headed and read > MAX_HEAD:
                raise AnswerTooLarge(f"the answer's headers are longer than {MAX_HEAD} bytes")
            if read > 2 * max_answer + MAX_HEAD:
                raise AnswerTooLarge(f"the answer is longer than {max_answer} bytes, framed")
        self.used = True
        return Response(answer.status, b"".join(answer.pieces)), answer.keep_alive

    def close(self) -> None:
        self.writer.close()


@dataclass
class Origin:
    scheme: str
    host: str
    port: int
    gate: asyncio.Semaphore
    deny: Sequence[Network] = ()
    own: Own | None = None  # the broker's own endpoint: never connected to
    idle: list[Connection] = field(default_factory=list)

    async def connect(self) -> Connection:
        context = _tls() if self.scheme == "https" else None
        host = await self._address() if self.deny or self.own else self.host
        reader, writer = await asyncio.open_connection(
            host,
            self.port,
            ssl=context,
            server_hostname=self.host if context else None,
            limit=READ_CHUNK,
        )
        return Connection(reader, writer)

    async def _address(self) -> str:
        """The first address of the host outside the denied networks. Resolved here, at each
        connection, and connected to as resolved: a name cannot point elsewhere meanwhile."""
        found = await asyncio.get_running_loop().getaddrinfo(
            self.host, self.port, type=socket.SOCK_STREAM
        )
        addresses = [str(info[4][0]) for info in found]
        if self.own is not None and any(self.own.is_self(a, self.port) for a in addresses):
            raise Denied(f"{self.host}:{self.port} is this broker's own endpoint")
        allowed = [a for a in addresses if not denied(a, self.deny)]
        if not allowed:
            raise Denied(f"{self.host} is in a denied network ({addresses[0]})")
        return allowed[0]


@cache
def _tls() -> ssl.SSLContext:
    return ssl.create_default_context()


class Client:
    """`await client.post(url, body)` (or `request(method, ...)`): at most `per_origin`
    connections to each origin, and a request waits for one beyond that. The timeout bounds
    a request from its connection (name resolution included) to the last byte of its answer,
    a stale kept-alive connection's resend included, so an answer trickled without end is cut
    there; the wait for a connection beyond `per_origin` is not in it. Raises OSError
    (connection), TimeoutError, or ValueError (not an http(s) URL, AnswerTooLarge, or Denied:
    the host is in one of the `deny` networks); any status is returned, not raised."""

    def __init__(
        self,
        per_origin: int,
        timeout_s: float,
        max_answer: int = MAX_ANSWER,
        deny: Sequence[Network] = (),
        own: Own | None = None,
    ) -> None:
        self.per_origin = per_origin
        self.timeout_s = timeout_s
        self.max_answer = max_answer
        self.deny = tuple(deny)
        self.own = own
        self._origins: dict[tuple[str, str, int], Origin] = {}

    def _origin(self, url: str) -> tuple[Origin, str]:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"not an http:// or https:// URL: {url!r}")
        port = parts.port or (443 if parts.scheme == "https" else 80)
        key = (parts.scheme, parts.hostname, port)
        origin = self._origins.get(key)
        if origin is None:
            gate = asyncio.Semaphore(self.per_origin)
            origin = Origin(parts.scheme, parts.hostname, port, gate, self.deny, self.own)
            self._origins[key] = origin
        target = parts.path or "/"
        return origin, f"{target}?{parts.query}" if parts.query else target

    async def post(
        self, url: str, body: bytes, headers: Mapping[str, str] | None = None
    ) -> Response:
        return await self.request("POST", url, body, headers)

    async def request(
        self,
        method: str,
        url: str,
        body: bytes = b"",
        headers: Mapping[str, str] | None = None,
        timeout_s: float | None = None,
        max_answer: int | None = None,
    ) -> Response:
        """Any method but HEAD (its answer has no body to read); `max_answer` overrides the
        client's bound on this answer's body."""
        origin, target = self._origin(url)
        host = f"[{origin.host}]" if ":" in origin.host else origin.host  # IPv6, bracketed
        head = [f"{method} {target} HTTP/1.1", f"Host: {host}:{origin.port}"]
        head += [f"{k}: {v}" for k, v in (headers or {}).items()]
        head.append(f"Content-Length: {len(body)}")
        request = ("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + body
        wait = self.timeout_s if timeout_s is None else timeout_s
        most = self.max_answer if max_answer is None else max_answer
        async with origin.gate, asyncio.timeout(wait):
            return await self._send(origin, request, most)

    async def _send(self, origin: Origin, request: bytes, most: int) -> Response:
        connection = origin.idle.pop() if origin.idle else await origin.connect()
        try:
            response, reusable = await connection.exchange(request, most)
        except ConnectionError:
            connection.close()
            if not connection.used:
                raise
            # a kept-alive connection the server had closed meanwhile: once more, afresh
            connection = await origin.connect()
            response, reusable = await self._fresh(connection, request, most)
        except BaseException:  # timed out or cancelled mid-exchange: its state is unknown
            connection.close()
            raise
        if reusable:
            origin.idle.append(connection)
        else:
            connection.close()
        return response

    async def _fresh(
        self, connection: Connection, request: bytes, most: int
    ) -> tuple[Response, bool]:
        try:
            return await connection.exchange(request, most)
        except BaseException:
            connection.close()
            raise

    def close(self) -> None:
        for origin in self._origins.values():
            for connection in origin.idle:
                connection.close()
            origin.idle.clear()
