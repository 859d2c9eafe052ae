"""URL functions: POST `{"publication", "params"}`, read `{"match": bool}`.

Per-call timeout, at most `url_concurrency` connections to each host (kept alive and
reused; `tidings.http1`), retries with backoff, and a circuit breaker per URL: after
`OPEN_AFTER` consecutive failures a URL is not called for `OPEN_FOR_S` seconds, and every
evaluation meanwhile fails at once with the last error.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import orjson

from tidings.addresses import LOOPBACK, Own, deny_list, url_problem
from tidings.config import FunctionSettings
from tidings.functions import SERVED_PATHS
from tidings.http1 import Client

OPEN_AFTER = 5
OPEN_FOR_S = 30.0
HEADERS = {"Content-Type": "application/json"}
ALLOW_SETTING = "functions.url_allow_networks"


class HTTPStatusError(Exception):
    """The endpoint answered, but not with a 2xx."""


@dataclass
class Breaker:
    failures: int = 0
    open_until: float = 0.0
    last_error: str = ""

    def check(self) -> None:
        if time.monotonic() < self.open_until:
            raise RuntimeError(f"circuit open after {self.failures} failures: {self.last_error}")

    def record(self, error: str | None) -> None:
        if error is None:
            self.failures, self.open_until = 0, 0.0
            return
        self.failures += 1
        self.last_error = error
        if self.failures >= OPEN_AFTER:
            self.open_until = time.monotonic() + OPEN_FOR_S


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
        self._http = Client(
            settings.url_concurrency, settings.url_timeout_s, deny=self.deny, own=own
        )
        self._library = Client(
            settings.url_concurrency, settings.url_timeout_s, deny=self.library_deny
        )
        self._breakers: dict[str, Breaker] = {}

    async def call(self, url: str, publication: Any, params: Any) -> tuple[bool, str | None]:
        """(matched, error); never raises."""
        breaker = self._breakers.setdefault(url, Breaker())
        try:
            breaker.check()
            body = orjson.dumps({"publication": publication, "params": params})
            matched = await self._with_retries(url, body)
        except Exception as exc:  # the endpoint's fault, reported on the subscription
            error = f"{type(exc).__name__}: {exc}"[:300]
            breaker.record(error)
            return False, error
        breaker.record(None)
        return matched, None

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
