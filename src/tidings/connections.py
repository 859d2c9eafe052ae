"""HTTP connections with bounds a client cannot lift: the size and count of a request's
headers, a deadline for its headers and one for its body.

uvicorn's httptools protocol reads a header line of any length (a 200 MiB line was read in
full) and waits forever for headers or a body that trickle in (1,000 slowloris connections
stayed open). This subclass counts the bytes a request's head takes before its headers are
complete and answers 431 past `max_header_bytes` (buffering at most that plus one read),
refuses more than `max_headers` headers, and closes a connection whose headers are not
complete `header_timeout_s` after it opened or its request began, or whose body is not
complete `body_timeout_s` after its headers (the application then sees the client leave).
After the headers only the body is free: what a request sends beside its body (its head,
chunk framing and extensions, trailers) is bounded by twice `max_header_bytes` and
`CHUNK_ALLOWANCE` a chunk, else 431 (with an answer under way, the connection just closes):
an endless trailer was read until the body's deadline (154 MiB, +170 MB resident, for one
connection).
A body must also keep a least rate, as Apache's mod_reqtimeout MinRate: after
`body_rate_grace_s` each second has to be paid for by `body_min_rate` bytes, else the request
is answered 408 `request_timeout` (while nothing is answered yet) and the connection closes,
so a body trickled in holds a read for seconds, not for the whole body deadline. The check
wakes at the earliest moment the body could fall behind, not at each read, and the time the
server itself stopped reading (a body waiting for the application, or behind a pipelined
request) is not the client's.

uvicorn's `limit_concurrency` is one bound for every client: one address holding 2,050 idle
connections made every other one get 503. So each server keeps `Seats`: a client address
holds at most `max_connections_per_address` open connections (its WebSockets included; an
IPv6 client counted by its /64, and by its /48 and /32 at 4 and 16 times the bound) and the
next one is answered 503 at once, as nginx's limit_conn, and closed; and a kept-alive
connection idle between requests yields its place when the server is full (the longest idle
is closed first, as nginx reuses its idle keep-alive connections), so idle ones cost little.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable
from typing import Any

import orjson
from uvicorn._types import ASGIReceiveEvent
from uvicorn.protocols.http.flow_control import FlowControl
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
from uvicorn.protocols.websockets.websockets_sansio_impl import WebSocketsSansIOProtocol

from tidings.config import HTTPSettings
from tidings.errors import ErrorCode, TidingsError
from tidings.lightcycle import LightCycle
from tidings.metrics import Metrics
from tidings.networks import address_key, wider_keys
from tidings.onesend import OneSend

TOO_LARGE = b"HTTP/1.1 431 Request Header Fields Too Large\r\n"
TOO_SLOW = b"HTTP/1.1 408 Request Timeout\r\n"
RETRY_AFTER_S = 1
LINGER_S = 1.0  # a refused connection's client has this long to read the answer and leave
LINGER_BYTES = 1024 * 1024  # what it sends meanwhile is dropped up to this, then not read
WS_WRITE_HOLD = 1024 * 1024  # a WebSocket's unsent bytes past which its reading pauses
CHUNK_ALLOWANCE = 64  # framing bytes a chunk may take: its size line, short extensions, CRLFs


def refusal(limits: HTTPSettings) -> bytes:
    """The whole answer to a connection past its address's bound: 503 with the house's error
    body and Retry-After, then the connection closes."""
    detail = f"at most {limits.max_connections_per_address} connections from one address"
    body = orjson.dumps(TidingsError(ErrorCode.UNAVAILABLE, detail=detail).to_dict())
    head = (
        "HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\n"
        f"content-length: {len(body)}\r\nretry-after: {RETRY_AFTER_S}\r\n"
        "connection: close\r\n\r\n"
    )
    return head.encode("ascii") + body


class Seats:
    """One server's connections: how many each client address holds, and the kept-alive ones
    idle between requests, longest idle first."""

    def __init__(self, limits: HTTPSettings, metrics: Metrics | None = None) -> None:
        self.limits, self.metrics = limits, metrics
        self.held: dict[str, int] = {}
        self.idle: dict[GuardedHttpTools, None] = {}  # insertion order: longest idle first
        self.refusal = refusal(limits)

    def take(self, host: str) -> tuple[str, ...] | None:
        """The keys a new connection from `host` holds a seat under (its address or /64, and
        an IPv6 client's /48 and /32 with `WIDER_PREFIXES`' multiples of the bound); None
        when it is not counted. Raises `Full` past any of their bounds."""
        key, local = address_key(host)
        bound = self.limits.max_connections_per_address
        if not bound or (local and not self.limits.limit_loopback):
            return None
        keys = [(key, bound), *((k, bound * factor) for k, factor in wider_keys(host))]
        if any(self.held.get(k, 0) >= most for k, most in keys):
            self.count("connections_refused")
            raise Full
        for k, _ in keys:
            self.held[k] = self.held.get(k, 0) + 1
        return tuple(k for k, _ in keys)

    def give(self, seat: tuple[str, ...]) -> None:
        for key in seat:
            left = self.held[key] - 1
            if left:
                self.held[key] = left
            else:
                del self.held[key]

    def make_room(self, open_now: int) -> None:
        """At the server's bound, close the connection idle longest (its client reconnects
        when it next has a request) rather than answer a request 503."""
        if open_now >= self.limits.max_connections and self.idle:
            longest = next(iter(self.idle))
            longest.reclaim()
            self.count("connections_reclaimed")

    def count(self, name: str) -> None:
        if self.metrics is not None:
            self.metrics.inc(name)


class Full(Exception):
    """A client address holds all the connections it may."""


class Refused(Exception):
    """A request refused while the parser reads it: it reads no further."""


class HeldFlow(FlowControl):
    """uvicorn's flow control, counting how long the server held reading paused."""

    def __init__(self, transport: asyncio.Transport, clock: Callable[[], float]) -> None:
        super().__init__(transport)
        self.clock, self._held_s, self._since = clock, 0.0, 0.0

    def held_s(self) -> float:
        """Seconds reading was paused in all, until now."""
        return self._held_s + (self.clock() - self._since if self.read_paused else 0.0)

    def pause_reading(self) -> None:
        if not self.read_paused:
            self._since = self.clock()
        super().pause_reading()

    def resume_reading(self) -> None:
        if self.read_paused:
            self._held_s += self.clock() - self._since
        super().resume_reading()


class GuardedHttpTools(HttpToolsProtocol):
    """httptools' protocol with the limits of `HTTPSettings` (set by `guarded`)."""

    limits = HTTPSettings()
    seats = Seats(limits)
    light: frozenset[bytes] = frozenset()  # paths of POSTs started on a `LightCycle`

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._loose = 0  # bytes of this request read that are not its body (a read at a time)
        self._headers = 0
        self._in_head = True
        self._deadline: asyncio.TimerHandle | None = None
        self._seat: tuple[str, ...] | None = None  # the keys this connection counts against
        self._turned_away = False
        self._dropped = 0  # bytes read and dropped since it was turned away
        self._body_began = 0.0  # loop time of the request's headers' end
        self._head_began = 0.0  # loop time of a kept-alive connection's next request's start
        self._awaited = ""  # "head", "body": a deadline to arm when the read ends, if unarmed
        self._idle_since = 0.0  # loop time of the last answer that left the connection idle
        self._body_bytes = 0  # of its body so far
        self._body_held = 0.0  # the flow's held_s then
        self._chunks = 0  # of its body so far: each earns CHUNK_ALLOWANCE bytes of framing

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self.flow = HeldFlow(transport, self.loop.time)
        try:
            self._seat = self.seats.take(self.client[0]) if self.client else None
        except Full:
            self._turn_away()
            return
        self._arm(self.limits.header_timeout_s)

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        self.seats.idle.pop(self, None)
        self._give_seat()
        super().connection_lost(exc)

    def _give_seat(self) -> None:
        if self._seat is not None:
            self.seats.give(self._seat)
            self._seat = None

    def _turn_away(self) -> None:
        """Answer 503 before reading anything (the answer costs a write), half-close, and
        close once the client leaves or `LINGER_S` later; meanwhile what it sends is
        dropped unread. Not among uvicorn's connections: it takes no place in theirs."""
        self.connections.discard(self)
        self._linger(self.seats.refusal)

    def _linger(self, answer: bytes) -> None:
        """Say `answer`, half-close, and close once the client leaves or `LINGER_S` later,
        dropping what it sends meanwhile, up to `LINGER_BYTES` (closing at once with its bytes
        unread would reset the connection, and the client could lose the answer)."""
        self._disarm()
        self._turned_away = True
        self.transport.write(answer)
        if self.transport.can_write_eof():
            self.transport.write_eof()
        self._deadline = self.loop.call_later(LINGER_S, self._expired)

    def reclaim(self) -> None:
        """Close this idle kept-alive connection to make room for a new one."""
        self.seats.idle.pop(self, None)
        self.connections.discard(self)  # its place is free now, not once the loop says so
        self.transport.close()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if self.timeout_keep_alive_task is not None:  # kept alive, awaiting the next request
            self.seats.idle[self] = None
            self._idle_since = self.loop.time()

    def handle_websocket_upgrade(self) -> None:
        """The WebSocket protocol takes this connection over, and its seat with it."""
        super().handle_websocket_upgrade()
        taker = self.transport.get_protocol()
        if isinstance(taker, SeatedWebSockets) and self._seat is not None:
            seat, self._seat = self._seat, None
            taker.release = functools.partial(self.seats.give, seat)

    def data_received(self, data: bytes) -> None:
        if self._turned_away:  # dropped: the answer is already said
            self._dropped += len(data)
            if self._dropped > LINGER_BYTES:
                self.flow.pause_reading()  # a flood: no more reads until the close
            return
        self.seats.idle.pop(self, None)
        self._loose += len(data)  # on_body takes the body's bytes back off
        super().data_received(data)
        if self._turned_away or self.transport.is_closing():
            return  # refused, or closed
        if self.transport.get_protocol() is not self:
            return  # a WebSocket's now
        if self._in_head and self._loose > self.limits.max_header_bytes:
            self._refuse(f"a request's headers are at most {self.limits.max_header_bytes} bytes")
        elif not self._in_head and self._loose > self._loose_bound():
            self._refuse_framing()
        elif self._awaited and self._deadline is None:
            self._arm_awaited()
        elif self._deadline is None and self.timeout_keep_alive_task is None and self._idle():
            self._keep_alive_again()

    def _idle(self) -> bool:
        """Between requests: the last one read whole and answered, no next one begun."""
        cycle = self.cycle
        return (
            not self._in_head and not self.pipeline and (cycle is None or cycle.response_complete)
        )

    def _keep_alive_again(self) -> None:
        """uvicorn stops the keep-alive timer at every read and starts it again only when an
        answer completes, so a read between requests that begins none (blank lines, or the
        rest of a body answered before it came, 413) left the connection open for good. Its
        timer starts again here, counted from the last answer: blank lines do not extend it."""
        due = self._idle_since + self.timeout_keep_alive
        self.timeout_keep_alive_task = self.loop.call_at(due, self.timeout_keep_alive_handler)
        self.seats.idle[self] = None

    def _arm_awaited(self) -> None:
        """The deadline of the part of a request this read left incomplete. Armed only
        here, at the end of a read: a request read whole in one (most are) needs none, and
        arming and cancelling two timers a request was a cost of its own."""
        if self._awaited == "head":
            due = self._head_began + self.limits.header_timeout_s
            self._deadline = self.loop.call_at(due, self._expired)
        else:
            self._deadline = self.loop.call_at(self._body_due(), self._body_check)
        self._awaited = ""

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._in_head, self._headers = True, 0
        if self._deadline is None:  # a kept-alive connection's next request: its deadline
            self._head_began, self._awaited = self.loop.time(), "head"  # if the read ends it

    def on_header(self, name: bytes, value: bytes) -> None:
        if not self._in_head:
            # a trailer: uvicorn would add it to the headers the application already holds,
            # where a check made before the body (a proxy's, or ours) never saw it
            return
        self._headers += 1
        super().on_header(name, value)

    def on_headers_complete(self) -> None:
        self._in_head, self._chunks = False, 0
        if self._headers > self.limits.max_headers:
            self._refuse(f"a request has at most {self.limits.max_headers} headers")
            raise Refused  # the parser stops here: the rest of this read is not a request's
        self._disarm()
        self._awaited = ""
        self.seats.make_room(len(self.connections))  # before uvicorn's check of its bound
        if not self._lightly():
            super().on_headers_complete()
            cycle = self.cycle
            if cycle is not None and cycle.transport is self.transport:  # this request's
                # the cycle only writes, closes and asks `is_closing`: what `OneSend` answers
                one = OneSend(self.transport)
                cycle.transport = one  # type: ignore[assignment]
                cycle.on_response = functools.partial(_flushed, one, cycle.on_response)
        if not (self.parser.should_upgrade() and self._should_upgrade()):
            self._body_began, self._body_bytes = self.loop.time(), 0
            self._body_held = self._held_s()
            self._awaited = "body"  # its deadline armed if the read ends before the body

    def _lightly(self) -> bool:
        """Start this request on a `LightCycle` if it is a POST to one of the `light` paths
        (as uvicorn's `on_headers_complete` would start it on its own cycle); whether it did."""
        parser = self.parser
        if parser.get_method() != b"POST" or parser.should_upgrade():
            return False
        raw_path, _, query = self.url.partition(b"?")
        if raw_path not in self.light or b"#" in query or self._over_limit():
            return False  # (a fragment, which uvicorn's parse drops: its cycle then)
        scope = self.scope
        scope["method"] = "POST"
        version = parser.get_http_version()
        if version != "1.1":
            scope["http_version"] = version
        scope["path"] = self.root_path + raw_path.decode("ascii")
        scope["raw_path"] = self.root_path.encode("ascii") + raw_path
        scope["query_string"] = query
        before = self.cycle
        cycle = LightCycle(
            scope,
            self.transport,
            self.flow,
            self.server_state.default_headers,
            version != "1.0" and parser.should_keep_alive(),
            self.expect_100_continue,
            self.on_response_complete,
            (self.logger, self.access_logger, self.access_log),
        )
        self.cycle = cycle  # type: ignore[assignment]
        if before is None or before.response_complete:
            self._start_asgi_task(cycle, self.app)  # type: ignore[arg-type]
        else:  # pipelined: after the one before, as uvicorn queues it
            self.flow.pause_reading()
            self.pipeline.appendleft((cycle, self.app))  # type: ignore[arg-type]
        return True

    def _over_limit(self) -> bool:
        """uvicorn's bound on connections and requests at once (it answers 503 past it)."""
        most = self.limit_concurrency
        return most is not None and (len(self.connections) >= most or len(self.tasks) >= most)

    def on_body(self, body: bytes) -> None:
        self._body_bytes += len(body)
        self._loose = max(0, self._loose - len(body))  # the read it came in was counted
        super().on_body(body)

    def on_chunk_header(self) -> None:
        self._chunks += 1

    def _loose_bound(self) -> int:
        """A request's head, chunk framing and trailers: the head's bound and as much again
        (a read that ends the head may also hold framing), and the allowance of its chunks."""
        return 2 * self.limits.max_header_bytes + CHUNK_ALLOWANCE * self._chunks

    def _refuse_framing(self) -> None:
        """431 unless an answer is under way, then the connection closes: a request's chunk
        framing or trailers took more than their bound."""
        self._disarm()
        self.seats.count("framing_refused")
        if self._may_answer():
            if self.cycle is not None:  # the application reading the body sees its client go
                self.cycle.disconnected = True
                self.cycle.message_event.set()
            bound = self.limits.max_header_bytes
            self._refuse(
                f"a request's head, chunk framing and trailers are at most {2 * bound} bytes"
                f" and {CHUNK_ALLOWANCE} a chunk"
            )
        else:
            self.transport.close()

    def _may_answer(self) -> bool:
        """Whether nothing is answered yet on this connection for this request or one before
        it in the pipeline."""
        cycle = self.cycle
        return not self.pipeline and (cycle is None or not cycle.response_started)

    def _body_due(self) -> float:
        """When the body's time is up: its deadline, or sooner where it lags the least rate
        (the grace, then a second per `body_min_rate` bytes received)."""
        limits = self.limits
        last = self._body_began + limits.body_timeout_s
        if limits.body_min_rate <= 0:
            return last
        paid = limits.body_rate_grace_s + self._body_bytes / limits.body_min_rate
        held = self._held_s() - self._body_held  # the server's pauses: not the client's
        return min(last, self._body_began + paid + held)

    def _held_s(self) -> float:
        return self.flow.held_s() if isinstance(self.flow, HeldFlow) else 0.0

    def _body_check(self) -> None:
        self._deadline = None
        if self.transport.is_closing():
            return
        due = self._body_due()
        if due > self.loop.time():  # it kept up: look again when it next could lag
            self._deadline = self.loop.call_at(due, self._body_check)
        elif due < self._body_began + self.limits.body_timeout_s:
            self._too_slow()
        else:
            self._expired()

    def _too_slow(self) -> None:
        """408 with the house's error body, unless an answer is under way (this request's, or
        one before it in the pipeline); then the connection closes (the application sees its
        client leave)."""
        if self._may_answer():
            rate = self.limits.body_min_rate
            detail = f"the body came slower than {rate} bytes/s (http.body_min_rate)"
            body = orjson.dumps(TidingsError(ErrorCode.REQUEST_TIMEOUT, detail=detail).to_dict())
            head = (
                "content-type: application/json\r\nconnection: close\r\n"
                f"content-length: {len(body)}\r\n\r\n"
            )
            self.transport.write(TOO_SLOW + head.encode("ascii") + body)
        self.seats.count("bodies_too_slow")
        self.transport.close()

    def on_message_complete(self) -> None:
        self._disarm()
        self._awaited = ""
        self._loose = 0  # the next request counts from the next read (this one is paid for)
        super().on_message_complete()

    def send_400_response(self, msg: str) -> None:
        if not self._turned_away:  # else the answer is said: the connection only lingers
            super().send_400_response(msg)

    def _refuse(self, why: str) -> None:
        body = why.encode("ascii")
        head = b"content-type: text/plain; charset=utf-8\r\nconnection: close\r\n"
        length = b"content-length: " + str(len(body)).encode() + b"\r\n\r\n"
        self._linger(TOO_LARGE + head + length + body)

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


def _flushed(one: OneSend, then: Callable[[], None]) -> None:
    """An answer complete: what its cycle holds (a head without a body) sent before the
    next pipelined answer begins."""
    one.flush()
    then()


class SeatedWebSockets(WebSocketsSansIOProtocol):
    """uvicorn's WebSocket protocol (`ws=`), which gives back the seat of the HTTP connection
    it took over when it ends, and stops reading from a client that does not read.

    uvicorn answers every ping at once, whatever its write buffer holds: one client sending
    pings and never reading grew the broker by 234 MB of pongs. Once the buffer is past
    `WS_WRITE_HOLD` after a read, reading pauses until the transport says it has drained
    (below its low-water mark): whatever a client's frames make the broker say, pongs and
    error frames alike, is then bounded by that and one read."""

    limits = HTTPSettings()
    release: Callable[[], None] | None = None
    held_for_writes = False  # reading paused until the write buffer drains
    pings = 0  # in the second since `pings_since`
    pings_since = 0.0

    def connection_lost(self, exc: Exception | None) -> None:
        if self.release is not None:
            self.release()
            self.release = None
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        transport = self.transport
        if transport.is_closing() or self.held_for_writes:
            return
        if transport.get_write_buffer_size() > WS_WRITE_HOLD:
            self.held_for_writes = True
            transport.pause_reading()

    def resume_writing(self) -> None:
        super().resume_writing()
        if self.held_for_writes:
            self.held_for_writes = False
            if not self.read_paused and not self.transport.is_closing():
                self.transport.resume_reading()  # unless uvicorn holds it for its own queue

    def handle_ping(self) -> None:
        """Answer a ping, unless it is past `ws_max_pings_per_s` in this second: then the
        stream is closed 1008 (a client that reads its pongs costs the loop all the same).
        The pongs of the read that crossed the bound are already made and go out first."""
        if self.close_sent or self.transport.is_closing():
            return
        most, now = self.limits.ws_max_pings_per_s, self.loop.time()
        if now - self.pings_since >= 1.0:
            self.pings, self.pings_since = 0, now
        self.pings += 1
        if most and self.pings > most:
            self.conn.fail(1008, f"at most {most} pings a second (http.ws_max_pings_per_s)")
            self.transport.write(b"".join(self.conn.data_to_send()))
            self.close_sent = True
            self.transport.close()
            return
        super().handle_ping()

    async def receive(self) -> ASGIReceiveEvent:
        message = await super().receive()
        if self.held_for_writes and not self.transport.is_closing():
            self.transport.pause_reading()  # uvicorn resumed it as its queue emptied
        return message


def seated(limits: HTTPSettings) -> type[SeatedWebSockets]:
    """The protocol class for uvicorn's `ws=`, with these limits."""
    return type("Seated", (SeatedWebSockets,), {"limits": limits})


def guarded(
    limits: HTTPSettings, metrics: Metrics | None = None, light: frozenset[bytes] = frozenset()
) -> type[GuardedHttpTools]:
    """The protocol class for uvicorn's `http=`, with these limits and seats of its own, its
    POSTs to `light` paths started on a `LightCycle`."""
    attributes = {"limits": limits, "seats": Seats(limits, metrics), "light": light}
    return type("Guarded", (GuardedHttpTools,), attributes)
