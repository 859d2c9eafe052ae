"""URL functions: POST `{"publication", "params"}`, read `{"match": bool}`.

Each subscriber's calls take fair shares of the calls in flight (`sandbox/urlfair.py`): at
most `url_concurrency` at once, `url_concurrency_per_subscriber` of them one subscriber's,
and past `url_queue_per_subscriber` waiting its further calls are shed at once. A call has
`url_timeout_s` from its first connection to the last byte of its answer, retries included,
and its answer is read up to `MAX_ANSWER` bytes. Connections are kept alive per origin
(`tidings.http1`). A circuit breaker per subscriber and origin (scheme, host, port): after
`OPEN_AFTER` consecutive failures that subscriber's calls to that origin fail at once with
the last error for `OPEN_FOR_S` seconds, whatever their paths; another subscriber's calls to
the same origin neither trip it nor see its errors.
"""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import orjson

from tidings.addresses import LOOPBACK, Own, deny_list, url_problem
from tidings.config import FunctionSettings
from tidings.functions import SERVED_PATHS
from tidings.http1 import Client
from tidings.sandbox.urlfair import Shed, URLShare

OPEN_AFTER = 5
OPEN_FOR_S = 30.0
BREAKERS = 4096  # (subscriber, origin) pairs remembered with failures, the least recent forgotten
MAX_ANSWER = 64 * 1024  # `{"match": true}` is 15 bytes
HEADERS = {"Content-Type": "application/json"}
ALLOW_SETTING = "functions.url_allow_networks"
Answer = tuple[bool, str | None]  # matched, error


class HTTPStatusError(Exception):
    """The endpoint answered, but not with a 2xx."""


class CircuitOpen(RuntimeError):
    """The subscriber's calls to this origin failed too often of late: not called now."""


@dataclass
class Breaker:
    failures: int = 0
    open_until: float = 0.0
    last_error: str = ""

    def check(self) -> None:
        if time.monotonic() < self.open_until:
            raise CircuitOpen(f"circuit open after {self.failures} failures: {self.last_error}")

    def record(self, error: str) -> None:
        self.failures += 1
        self.last_error = error
        if self.failures >= OPEN_AFTER:
            self.open_until = time.monotonic() + OPEN_FOR_S


class Breakers:
    """The breakers of the (subscriber, origin) pairs whose last call failed, at most `size`
    (origins are the subscribers' choice): a success forgets its pair."""

    def __init__(self, size: int = BREAKERS) -> None:
        self.size = size
        self._open: OrderedDict[tuple[str, str], Breaker] = OrderedDict()

    def __len__(self) -> int:
        return len(self._open)

    def check(self, key: tuple[str, str]) -> None:
        if (breaker := self._open.get(key)) is not None:
            breaker.check()

    def record(self, key: tuple[str, str], error: str | None) -> None:
        if error is None:
            self._open.pop(key, None)
            return
        breaker = self._open.pop(key, None) or Breaker()
        breaker.record(error)
        self._open[key] = breaker  # the most recent last
        if len(self._open) > self.size:
            self._open.popitem(last=False)


def origin(url: str) -> str:
    """`scheme://host:port` of `url` (the URL itself when it has no valid port)."""
    parts = urlsplit(url)
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        return url
    return f"{parts.scheme}://{parts.hostname}:{port}"


def never() -> bool:
    return False


class URLCaller:
    def __init__(self, settings: FunctionSettings, own: Own | None = None) -> None:
        self.settings = settings
        allow, deny_extra = settings.url_allow_networks, settings.url_deny_networks
        self.deny = deny_list(deny_extra, settings.url_deny_default_networks, allow)
        # the library the broker serves is reached on its own endpoint, a loopback one too
        self.library_deny = deny_list(
            deny_extra, settings.url_deny_default_networks, f"{allow},{LOOPBACK}"
        )
        self.own = own  # the broker's own endpoint: called for the library alone
        # the share bounds the calls in flight, so the clients' own bounds never bind
        slots, timeout_s = settings.url_concurrency, settings.url_timeout_s
        self._http = Client(slots, timeout_s, MAX_ANSWER, deny=self.deny, own=own)
        self._library = Client(slots, timeout_s, MAX_ANSWER, deny=self.library_deny)
        self.share = URLShare(
            slots, settings.url_concurrency_per_subscriber, settings.url_queue_per_subscriber
        )
        self.breakers = Breakers()

    async def call(
        self,
        url: str,
        publication: Any,
        params: Any,
        owner: str = "",
        dropped: Callable[[], bool] = never,
    ) -> Answer | None:
        """(matched, error) of `owner`'s call, or None when `dropped()` says, as the call
        gets its slot, that it is no longer wanted; never raises."""
        key = (owner, origin(url))
        try:
            self.breakers.check(key)
            body = orjson.dumps({"publication": publication, "params": params})
            async with self.share.slot(owner):
                if dropped():
                    return None
                self.breakers.check(key)  # it may have opened while this call waited
                matched = await self._whole(url, body)
        except Shed as exc:  # the subscriber's own load, not the endpoint's fault
            return False, str(exc)
        except CircuitOpen as exc:  # failed at once, and not counted again
            return False, f"{type(exc).__name__}: {exc}"[:300]
        except Exception as exc:  # the endpoint's fault, reported on the subscription
            error = f"{type(exc).__name__}: {exc}"[:300]
            self.breakers.record(key, error)
            return False, error
        self.breakers.record(key, None)
        return matched, None

    async def _whole(self, url: str, body: bytes) -> bool:
        """The call, retries included, from its first connection to its answer's last
        byte within `url_timeout_s`: an endpoint trickling its answer is cut there."""
        limit = self.settings.url_timeout_s
        try:
            async with asyncio.timeout(limit):
                return await self._with_retries(url, body)
        except TimeoutError:
            raise TimeoutError(f"no whole answer within {limit:g} s") from None

    async def _with_retries(self, url: str, body: bytes) -> bool:
        for attempt in range(self.settings.url_retries + 1):
            try:
                return await self._once(url, body)
            except (OSError, TimeoutError, HTTPStatusError):
                if attempt == self.settings.url_retries:
                    raise
                await asyncio.sleep(0.05 * 2**attempt)
        raise AssertionError("unreachable")

    async def _once(self, url: str, body: bytes) -> bool:
        http = self._library if self.library(url) else self._http
        response = await http.post(url, body, HEADERS)
        if not 200 <= response.status < 300:
            raise HTTPStatusError(f"HTTP {response.status}: {response.body[:100]!r}")
        answer = orjson.loads(response.body)
        if not isinstance(answer, dict) or not isinstance(answer.get("match"), bool):
            raise ValueError('the answer is not {"match": true|false}')
        return bool(answer["match"])

    def library(self, url: str) -> bool:
        """Whether `url` is the library the broker serves (`/api/Detect*`), on its own
        endpoint: the one call a URL function may make to the broker itself."""
        if self.own is None:
            return False
        parts = urlsplit(url)
        try:
            port = parts.port or (443 if parts.scheme == "https" else 80)
        except ValueError:
            return False
        host = parts.hostname or ""
        return parts.path in SERVED_PATHS and not parts.query and self.own.is_self(host, port)

    def problem(self, url: str) -> str | None:
        """What makes `url` no URL function (tidings.addresses.url_problem): the broker's
        own endpoint is refused, but for the library it serves there."""
        if self.library(url):
            return url_problem(url, self.library_deny, None, ALLOW_SETTING)
        return url_problem(url, self.deny, self.own, ALLOW_SETTING)

    async def aclose(self) -> None:
        self._http.close()
        self._library.close()
