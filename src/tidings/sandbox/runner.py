"""The function runner the broker uses: subscriber code and builtins in the sandbox pool,
URL functions over HTTP."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from tidings.config import FunctionSettings
from tidings.errors import ErrorCode, TidingsError
from tidings.functions import check_builtin
from tidings.model import FunctionSpec, Publication, Subscription
from tidings.sandbox import FunctionOutcome
from tidings.sandbox.compile import check, code_hash
from tidings.sandbox.pool import Call, WorkerPool
from tidings.sandbox.urlcall import URLCaller


class SandboxRunner:
    def __init__(self, settings: FunctionSettings) -> None:
        self.settings = settings
        self.pool = WorkerPool(settings)
        self.urls = URLCaller(settings)

    def validate(self, spec: FunctionSpec) -> None:
        if spec.kind == "code":
            check(spec.source)
        elif spec.kind == "builtin":
            check_builtin(spec.source, spec.params)
        elif not spec.source.startswith(("http://", "https://")):
            raise TidingsError(
                ErrorCode.FUNCTION_INVALID,
                field="function.url",
                detail="expected an http:// or https:// URL",
            )

    async def evaluate(
        self, publication: Publication, subscriptions: Sequence[Subscription]
    ) -> list[FunctionOutcome]:
        pub = publication.to_json()
        sandboxed = [_call(s) for s in subscriptions if s.function and s.function.kind != "url"]
        hosted = [s for s in subscriptions if s.function and s.function.kind == "url"]
        pooled, called = await asyncio.gather(
            self.pool.run_many(pub, sandboxed) if sandboxed else _nothing(),
            asyncio.gather(
                *(
                    self.urls.call(s.function.source, pub, dict(s.function.params))  # type: ignore[union-attr]
                    for s in hosted
                )
            ),
        )
        by_id = {s.id: s for s in subscriptions}
        outcomes = [_outcome(by_id[sid], m, e) for sid, (m, e) in pooled.items()]
        return outcomes + [_outcome(s, m, e) for s, (m, e) in zip(hosted, called, strict=True)]

    async def aclose(self) -> None:
        await self.pool.aclose()
        await self.urls.aclose()


def _outcome(sub: Subscription, matched: bool, error: str | None) -> FunctionOutcome:
    """A failed call matches only when its subscription asked to fail open."""
    fail_open = sub.function is not None and sub.function.fail_open
    return FunctionOutcome(sub.id, matched or (error is not None and fail_open), error)


def _call(sub: Subscription) -> Call:
    spec = sub.function
    assert spec is not None
    if spec.kind == "code":
        return Call(sub.id, "code", code_hash(spec.source), spec.source)
    return Call(sub.id, "builtin", spec.source, params=dict(spec.params))


async def _nothing() -> dict[str, tuple[bool, str | None]]:
    return {}


def create_runner(settings: FunctionSettings) -> SandboxRunner:
    return SandboxRunner(settings)
