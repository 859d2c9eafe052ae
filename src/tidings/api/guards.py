"""What a web page in a browser cannot make a broker on loopback do.

A page on another site can send a `text/plain` POST to `http://127.0.0.1:8080` without a
preflight, and with DNS rebinding (its own name pointed at 127.0.0.1) it can read the
answers. So, before any route runs (the publish lane included):
- a request that carries a body must declare it as JSON or MessagePack (415 otherwise): no
  browser sends those cross-site without a CORS preflight, which the broker never grants;
- the `Host` must be one, and an address literal, `localhost`, or a name the operator
  configured (`http.allowed_hosts`, `public_url`'s host): a rebound name is answered 421,
  two `Host` headers 400 (RFC 9112: a proxy in front may have read the other);
- a state-changing request or a WebSocket handshake that says where it comes from (`Origin`)
  must come from the broker's own origin or one configured (`http.allowed_origins`): 403.
Clients that are not browsers (the CLI, the Python client, curl) send no `Origin`.
"""

from __future__ import annotations

import functools
import ipaddress
from urllib.parse import urlsplit

from starlette.types import ASGIApp, Receive, Scope, Send

from tidings.api.answers import answer, error
from tidings.api.io import is_msgpack
from tidings.config import Settings
from tidings.errors import ErrorCode, TidingsError

STATE_CHANGING = frozenset({"POST", "PUT", "PATCH", "DELETE"})
HOSTS_KEPT = 1024  # `Host` values whose answer is kept (all forgotten past it)
WANTED = frozenset({b"host", b"origin", b"content-type", b"content-length", b"transfer-encoding"})
JSON_TYPES = frozenset({"application/json"})


class WebGuard:
    def __init__(self, app: ASGIApp, settings: Settings) -> None:
        self.app = app
        self.hosts = allowed_hosts(settings)
        self.origins = frozenset(
            o.strip().rstrip("/") for o in _split(settings.http.allowed_origins)
        )
        self._hosts_seen: dict[str, bool] = {}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] in ("http", "websocket"):
            problem = self._problem(scope)
            if problem is not None:
                await self._refuse(scope, receive, send, problem)
                return
        await self.app(scope, receive, send)

    def _problem(self, scope: Scope) -> TidingsError | None:
        said = _Said(scope["headers"])
        if said.hosts > 1:
            # RFC 9112 3.2: a server must answer 400; proxies before it may read another one
            detail = "a request carries one Host header"
            return TidingsError(ErrorCode.INVALID_HEADER, field="Host", detail=detail)
        host = said.value(b"host")
        if not self._host_allowed(host):
            return TidingsError(ErrorCode.MISDIRECTED, field="Host", host=host[:100])
        websocket = scope["type"] == "websocket"
        origin = said.value(b"origin")
        changing = websocket or scope["method"] in STATE_CHANGING
        if origin and changing and not self._origin_allowed(origin, scope, host):
            return TidingsError(ErrorCode.FORBIDDEN_ORIGIN, field="Origin", origin=origin[:100])
        if not websocket and said.has_body() and not _declared(said.value(b"content-type")):
            detail = "a body is sent with Content-Type application/json or application/msgpack"
            kind = ErrorCode.UNSUPPORTED_MEDIA_TYPE
            return TidingsError(kind, field="Content-Type", detail=detail)
        return None

    def _host_allowed(self, host: str) -> bool:
        """Answered once a `Host` (a client names the same one request after request)."""
        known = self._hosts_seen.get(host)
        if known is None:
            if len(self._hosts_seen) >= HOSTS_KEPT:
                self._hosts_seen.clear()
            known = self._hosts_seen[host] = self._host_decided(host)
        return known

    def _host_decided(self, host: str) -> bool:
        name = hostname(host)
        if not name:
            return not host  # HTTP/1.0 without a Host: nothing to rebind
        return name in self.hosts or "*" in self.hosts or _is_address(name)

    def _origin_allowed(self, origin: str, scope: Scope, host: str) -> bool:
        scheme = "https" if scope.get("scheme") in ("https", "wss") else "http"
        return origin.rstrip("/") in self.origins or origin == f"{scheme}://{host}"

    async def _refuse(self, scope: Scope, receive: Receive, send: Send, exc: TidingsError) -> None:
        if scope["type"] == "websocket":
            await send({"type": "websocket.close", "code": 1008, "reason": exc.message[:120]})
            return
        await answer(error(exc), exc.status)(scope, receive, send)


def allowed_hosts(settings: Settings) -> frozenset[str]:
    """`localhost`, the configured names, and `public_url`'s host (address literals are
    always allowed)."""
    names = {
        "localhost",
        *(hostname(h.strip()) or h.strip() for h in _split(settings.http.allowed_hosts)),
    }
    if settings.public_url:
        names.add(urlsplit(settings.public_url).hostname or "")
    return frozenset(n.lower() for n in names if n)


@functools.lru_cache(maxsize=1024)  # a client names the same host request after request
def _is_address(name: str) -> bool:
    """An IP address, which cannot be rebound (it is the address), not a name."""
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return False
    return True


def hostname(host: str) -> str:
    """`Host`'s name without its port or an IPv6 literal's brackets, lowercase."""
    host = host.strip().lower()
    if host.startswith("["):
        return host[1 : host.find("]")] if "]" in host else ""
    return host.rsplit(":", 1)[0] if host.count(":") == 1 else host


def _split(text: str) -> list[str]:
    return [part for part in text.split(",") if part.strip()]


class _Said:
    """The headers the guard reads, in one pass over a request's (the first of a repeated
    one, as `io.header` answers, and how many `Host`s): a pass a header cost five."""

    __slots__ = ("first", "hosts")

    def __init__(self, headers: list[tuple[bytes, bytes]]) -> None:
        self.first: dict[bytes, bytes] = {}
        self.hosts = 0
        for name, value in headers:
            if name in WANTED:
                self.first.setdefault(name, value)
                if name == b"host":
                    self.hosts += 1

    def value(self, name: bytes) -> str:
        return self.first.get(name, b"").decode("latin-1")

    def has_body(self) -> bool:
        length = self.value(b"content-length")
        return (length.isdigit() and int(length) > 0) or bool(self.value(b"transfer-encoding"))


def _declared(content_type: str) -> bool:
    media = content_type.split(";", 1)[0].strip().lower()
    return media in JSON_TYPES or is_msgpack(media)
