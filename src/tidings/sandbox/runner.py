"""The function runner the broker uses: subscriber code and builtins in sandboxed worker
pools, URL functions over HTTP, each subscriber's outcomes handed back as soon as its own
calls are done (`sandbox/lanes.py` says who shares a worker request with whom)."""

from __future__ import annotations

import asyncio
import logging
from collections import defaultdict
from collections.abc import AsyncIterator, Sequence
from typing import Any

from tidings.addresses import url_problem
from tidings.config import FunctionSettings
from tidings.errors import ErrorCode, TidingsError
from tidings.functions import check_builtin
from tidings.model import FunctionSpec, Publication, Subscription
from tidings.sandbox import FunctionOutcome
from tidings.sandbox.boundary import command, probe
from tidings.sandbox.compile import check, code_hash
from tidings.sandbox.lanes import Lanes
from tidings.sandbox.pool import Result, WorkerCall, WorkerPool
from tidings.sandbox.urlcall import URLCaller

log = logging.getLogger("tidings.sandbox")
Shared = asyncio.Future[tuple[dict[str, Result], dict[str, Result]]]  # code, library
UNSAFE_WARNING = (
    "UNSAFE: --unsafe-code-functions: subscribers' code functions run WITHOUT the operating-"
    "system sandbox (%s); only the Python-level checks stand between subscriber code and "
    "this machine (docs/sandbox.md)"
)


class SandboxRunner:
    def __init__(self, settings: FunctionSettings) -> None:
        self.settings = settings
        self.problem = probe(settings)  # None: the OS boundary works here
        bounded = self.problem is None
        if not bounded:
            if settings.unsafe_code_functions:
                log.warning(UNSAFE_WARNING, self.problem)
            else:
                log.warning("code functions are refused: %s", self.problem)
        code = command(settings, "code", bounded=bounded)
        self.pool = WorkerPool(settings, code)
        self.quarantine = WorkerPool(settings, [*code, "--nice"], settings.quarantine_workers)
        self.library = WorkerPool(settings, command(settings, "library", bounded=bounded))
        self.lanes = Lanes(settings)
        self.urls = URLCaller(settings)

    @property
    def code_allowed(self) -> bool:
        return self.problem is None or self.settings.unsafe_code_functions

    def validate(self, spec: FunctionSpec) -> None:
        if spec.kind == "code":
            if not self.code_allowed:
                raise TidingsError(
                    ErrorCode.FUNCTION_SANDBOX_UNAVAILABLE,
                    field="function.code",
                    detail="code functions are unavailable on this broker: the operating-"
                    f"system sandbox cannot start here ({self.problem}); builtin and url "
                    "functions work",
                )
            check(spec.source)
        elif spec.kind == "builtin":
            check_builtin(spec.source, spec.params)
        elif (problem := url_problem(spec.source, self.urls.deny)) is not None:
            # refused now, not only at each call: a denied URL never becomes a subscription
            raise TidingsError(ErrorCode.FUNCTION_INVALID, field="function.url", detail=problem)

    def cancel(self, subscription_id: str) -> None:
        self.lanes.cancel(subscription_id)

    async def evaluate(
        self, publication: Publication, subscriptions: Sequence[Subscription]
    ) -> list[FunctionOutcome]:
        return [o async for chunk in self.stream(publication, subscriptions) for o in chunk]

    async def stream(
        self, publication: Publication, subscriptions: Sequence[Subscription]
    ) -> AsyncIterator[list[FunctionOutcome]]:
        """One list per subscriber, as soon as its own calls are done."""
        pub, ticket = publication.to_json(), self.lanes.ticket()
        owners: dict[str, list[Subscription]] = defaultdict(list)
        for sub in subscriptions:
            owners[sub.subscriber_id].append(sub)
        suspects = {o for o in owners if self.lanes.suspect(o)}
        trusted = [_call(s) for o, subs in owners.items() if o not in suspects
                   for s in subs if s.function and s.function.kind != "url"]  # fmt: skip
        shared = asyncio.gather(
            self._pooled(self.pool, pub, [c for c in trusted if c.kind == "code"], ticket),
            self._pooled(self.library, pub, [c for c in trusted if c.kind != "code"], ticket),
        )
        # owners whose calls all ride the shared requests finish together: one task for all
        plain = {o for o, subs in owners.items() if o not in suspects and not _hosted(subs)}
        tasks = [asyncio.ensure_future(self._together(shared, [owners[o] for o in plain]))]
        tasks += [
            asyncio.ensure_future(
                self._owner(pub, subs, shared if o not in suspects else None, ticket)
            )
            for o, subs in owners.items()
            if o not in plain
        ]
        try:
            for done in asyncio.as_completed(tasks):
                for outcomes in await done:
                    if outcomes:
                        yield outcomes
        finally:
            shared.cancel()
            for task in tasks:
                task.cancel()

    async def _together(
        self, shared: Shared, groups: list[list[Subscription]]
    ) -> list[list[FunctionOutcome]]:
        if not groups:
            return []
        code, library = await asyncio.shield(shared)
        return [self._outcomes(subs, code | library) for subs in groups]

    async def _owner(
        self,
        pub: Any,
        subs: list[Subscription],
        shared: Shared | None,
        ticket: int,
    ) -> list[list[FunctionOutcome]]:
        """One subscriber's outcomes: from the shared requests, or (`shared` None: a
        suspect) from its own request in the quarantine lane; and its URL calls."""
        hosted = _hosted(subs)
        pooled, called = await asyncio.gather(
            self._quarantined(subs[0].subscriber_id, pub, subs, ticket)
            if shared is None
            else _mine(shared, subs),
            asyncio.gather(
                *(self.urls.call(s.function.source, pub, dict(s.function.params)) for s in hosted)  # type: ignore[union-attr]
            ),
        )
        return [
            self._outcomes(subs, pooled | {s.id: r for s, r in zip(hosted, called, strict=True)})
        ]

    def _outcomes(
        self, subs: list[Subscription], results: dict[str, Result]
    ) -> list[FunctionOutcome]:
        """One subscriber's outcomes, observed for its lane."""
        outcomes = [_outcome(s, *results[s.id]) for s in subs if s.id in results]
        slow = (
            max((self.pool.ms.pop(s.id, 0.0) for s in subs), default=0.0)
            > self.settings.slow_call_ms
        )
        self.lanes.observe(subs[0].subscriber_id, outcomes, slow)
        return outcomes

    async def _quarantined(
        self, owner: str, pub: Any, subs: list[Subscription], ticket: int
    ) -> dict[str, Result]:
        """A suspect subscriber's calls, alone, one evaluation at a time."""
        calls = [_call(s) for s in subs if s.function and s.function.kind != "url"]
        if self.lanes.full(owner):
            shed = f"shed: {self.settings.quarantine_queue} evaluations of this subscriber wait"
            return {c.sid: (False, shed) for c in calls}
        gate = self.lanes.gate(owner)
        gate.waiting += 1
        try:
            await gate.running.acquire()
        finally:
            gate.waiting -= 1
        pause = 0.0
        try:
            code, library = await asyncio.gather(
                self._pooled(self.quarantine, pub, [c for c in calls if c.kind == "code"], ticket),
                self._pooled(self.library, pub, [c for c in calls if c.kind != "code"], ticket),
            )
            for sid in code:
                self.pool.ms[sid] = self.quarantine.ms.pop(sid, 0.0)
            results = code | library
            pause = self.lanes.pause(owner, (e for _, e in results.values()))
            return results
        finally:
            # the outcomes go now; the gate opens for the next evaluation after the pause
            asyncio.get_running_loop().call_later(pause, gate.running.release)

    async def _pooled(
        self, pool: WorkerPool, pub: Any, calls: list[WorkerCall], ticket: int
    ) -> dict[str, Result]:
        if not calls:
            return {}
        if pool is not self.library and not self.code_allowed:
            return {c.sid: (False, f"function_sandbox_unavailable: {self.problem}") for c in calls}
        return await pool.run_many(pub, calls, lambda c: not self.lanes.cancelled(c.sid, ticket))

    async def aclose(self) -> None:
        for pool in (self.pool, self.quarantine, self.library):
            await pool.aclose()
        await self.urls.aclose()


def _hosted(subs: list[Subscription]) -> list[Subscription]:
    return [s for s in subs if s.function and s.function.kind == "url"]


async def _mine(shared: Shared, subs: list[Subscription]) -> dict[str, Result]:
    """This subscriber's results of the shared requests (awaited only if it has calls there;
    shielded: one subscriber's cancellation does not cancel everyone's)."""
    if len(_hosted(subs)) == len(subs):
        return {}
    code, library = await asyncio.shield(shared)
    return code | library


def _outcome(sub: Subscription, matched: bool, error: str | None) -> FunctionOutcome:
    """A failed call matches only when its subscription asked to fail open."""
    fail_open = sub.function is not None and sub.function.fail_open
    return FunctionOutcome(sub.id, matched or (error is not None and fail_open), error)


def _call(sub: Subscription) -> WorkerCall:
    spec = sub.function
    assert spec is not None
    if spec.kind == "code":
        return WorkerCall(sub.id, "code", code_hash(spec.source), spec.source)
    return WorkerCall(sub.id, "builtin", spec.source, params=dict(spec.params))


def create_runner(settings: FunctionSettings) -> SandboxRunner:
    return SandboxRunner(settings)
