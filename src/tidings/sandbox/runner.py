"""The function runner the broker uses: each subscriber's code in workers of its own
(`sandbox/tenants.py`), taking its turns fairly with the others (`sandbox/fair.py`); the
library's builtins in the shared library workers; URL functions over HTTP. Each
subscriber's outcomes are handed back as soon as its own calls are done; a suspect
subscriber is evaluated apart (`sandbox/lanes.py`)."""

from __future__ import annotations

import asyncio
import logging
from collections import defaultdict
from collections.abc import AsyncIterator, Coroutine, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

from tidings.addresses import Own
from tidings.config import FunctionSettings
from tidings.errors import ErrorCode, TidingsError
from tidings.functions import check_builtin
from tidings.model import FunctionSpec, Publication, Subscription
from tidings.sandbox import FunctionOutcome
from tidings.sandbox.boundary import command, probe
from tidings.sandbox.cgroup import MemoryCgroups
from tidings.sandbox.compile import check, code_hash
from tidings.sandbox.fair import FairShare
from tidings.sandbox.lanes import Lanes, costly
from tidings.sandbox.pool import Result, WorkerCall, WorkerPool, publication_text, watchdog_s
from tidings.sandbox.tenants import TenantWorkers
from tidings.sandbox.urlcall import Answer, URLCaller

log = logging.getLogger("tidings.sandbox")
Library = asyncio.Future[dict[str, Result]]
Evaluation = asyncio.Future[list[FunctionOutcome]]  # one subscriber's
START_CHUNK = 256  # subscribers' evaluations started in one go of the event loop
UNSAFE_WARNING = (
    "UNSAFE: --unsafe-code-functions: subscribers' code functions run WITHOUT the operating-"
    "system sandbox (%s); only the Python-level checks stand between subscriber code and "
    "this machine (docs/sandbox.md)"
)

NO_CODE = (
    "code functions are off here (functions.code_functions = false: a serverless platform "
    "grants no namespaces for the operating-system boundary)"
)

NO_CGROUP = (
    "no memory cgroup per function worker (%s): each worker's address space limit "
    "(RLIMIT_AS) alone bounds its memory (docs/sandbox.md)"
)


@dataclass(frozen=True, slots=True)
class Lane:
    """Where code runs: the turns (the CPU budget) and the tenants' workers."""

    turns: FairShare
    workers: TenantWorkers


class SandboxRunner:
    def __init__(self, settings: FunctionSettings, own: Own | None = None) -> None:
        self.settings = settings
        # None: the OS boundary works here
        self.problem = probe(settings) if settings.code_functions else NO_CODE
        bounded = self.problem is None
        if not bounded and settings.code_functions:
            if settings.unsafe_code_functions:
                log.warning(UNSAFE_WARNING, self.problem)
            else:
                log.warning("code functions are refused: %s", self.problem)
        code, budget_s = command(settings, "code", bounded=bounded), watchdog_s(settings)
        cpu_s = settings.cpu_ms / 1000
        self.cgroups = MemoryCgroups(settings.memory_mib)
        if self.cgroups.problem and settings.code_functions:
            log.warning(NO_CGROUP, self.cgroups.problem)
        workers = max(settings.max_workers, settings.workers + settings.spare_workers)
        starts = settings.workers - 1
        self.main = Lane(
            # a worker's start holds a turn: one turn at least stays for warm workers' calls
            FairShare(settings.workers, settings.turn_burst, self._trusted_owner, costly=starts),
            TenantWorkers(code, budget_s, workers, settings.spare_workers, self.cgroups, cpu_s),
        )
        slots = settings.quarantine_workers
        self.quarantine = Lane(
            FairShare(slots),
            TenantWorkers(
                [*code, "--nice"], budget_s, slots + 1, cgroups=self.cgroups, cpu_s=cpu_s
            ),
        )
        self.library = WorkerPool(settings, command(settings, "library", bounded=bounded))
        self.lanes = Lanes(settings)
        self.urls = URLCaller(settings, own)

    def _trusted_owner(self, owner: str) -> bool:
        """Whether `owner` may keep its turn for its next evaluation: not while suspect."""
        return not self.lanes.suspect(owner)

    @property
    def code_allowed(self) -> bool:
        if not self.settings.code_functions:
            return False
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
        elif (problem := self.urls.problem(spec.source)) is not None:
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
        data, ticket = publication.to_json(), self.lanes.ticket()
        pub = publication_text(data)
        owners: dict[str, list[Subscription]] = defaultdict(list)
        for sub in subscriptions:
            owners[sub.subscriber_id].append(sub)
        suspects = {o for o in owners if self.lanes.suspect(o)}
        # the library's builtins are ours: the trusted subscribers' share one request
        builtins = [_call(s) for o, subs in owners.items() if o not in suspects
                    for s in subs if s.function and s.function.kind == "builtin"]  # fmt: skip
        library: Library = asyncio.ensure_future(self._library(pub, builtins, ticket))
        finished: asyncio.Queue[Evaluation] = asyncio.Queue()
        tasks: list[Evaluation] = []
        try:
            for n, (owner, subs) in enumerate(owners.items()):
                if n and not n % START_CHUNK:
                    # a fan-out to thousands of subscribers starts in chunks, the loop's
                    # other work (requests, answers) running between them: each start
                    # costs tens of microseconds, 32,000 at once had stalled it a second
                    await asyncio.sleep(0)
                task = asyncio.ensure_future(
                    self._owner(
                        owner, (data, pub), subs, library if owner not in suspects else None,
                        ticket,
                    )
                )  # fmt: skip
                task.add_done_callback(finished.put_nowait)
                tasks.append(task)
            for _ in range(len(tasks)):
                outcomes = (await finished.get()).result()
                if outcomes:
                    yield outcomes
        finally:
            # cancelled and waited for: a worker being started or a call cut short is
            # killed and reaped before this evaluation is over
            library.cancel()
            for evaluation in tasks:
                evaluation.cancel()
            pending: list[asyncio.Future[Any]] = [library, *tasks]
            await asyncio.wait(pending)
            self.lanes.done(ticket)

    async def _owner(
        self,
        owner: str,
        publication: tuple[Any, str],
        subs: list[Subscription],
        library: Library | None,
        ticket: int,
    ) -> list[FunctionOutcome]:
        """One subscriber's outcomes: its code in its own worker, its builtins from the
        shared library request (`library` None: a suspect, all apart in the quarantine
        lane), and its URL calls (`publication`: as data, and as JSON text)."""
        data, pub = publication
        hosted = [(s, s.function) for s in subs if s.function and s.function.kind == "url"]
        calls = [
            self.urls.call(f.source, data, dict(f.params), owner,
                           partial(self.lanes.cancelled, s.id, ticket))
            for s, f in hosted
        ]  # fmt: skip
        pooled: dict[str, Result] = {}
        if len(hosted) == len(subs):  # URL functions alone: no worker's part to wait for
            called = [await calls[0]] if len(calls) == 1 else await _all(calls)
        else:
            pooled, called = await asyncio.gather(
                self._quarantined(owner, pub, subs, ticket)
                if library is None
                else self._trusted(owner, pub, subs, library, ticket),
                _all(calls),
            )
        # a URL call of a subscription cancelled while it waited has no outcome
        results = pooled | {
            s.id: r for (s, _), r in zip(hosted, called, strict=True) if r is not None
        }
        return self._outcomes(subs, results)

    async def _trusted(
        self, owner: str, pub: str, subs: list[Subscription], library: Library, ticket: int
    ) -> dict[str, Result]:
        code = [_call(s) for s in subs if s.function and s.function.kind == "code"]
        mine = {s.id for s in subs}
        own, shared = await asyncio.gather(
            self._code(self.main, owner, pub, code, ticket),
            asyncio.shield(library) if any(s.function and s.function.kind == "builtin"
                                           for s in subs) else _nothing(),
        )  # fmt: skip
        return own | {sid: r for sid, r in shared.items() if sid in mine}

    def _outcomes(
        self, subs: list[Subscription], results: dict[str, Result]
    ) -> list[FunctionOutcome]:
        """One subscriber's outcomes, observed for its lane."""
        outcomes = [_outcome(s, *results[s.id]) for s in subs if s.id in results]
        times = self.main.workers.ms, self.quarantine.workers.ms, self.library.ms
        slowest = max((t.pop(s.id, 0.0) for s in subs for t in times), default=0.0)
        self.lanes.observe(subs[0].subscriber_id, outcomes, slowest > self.settings.slow_call_ms)
        return outcomes

    async def _quarantined(
        self, owner: str, pub: str, subs: list[Subscription], ticket: int
    ) -> dict[str, Result]:
        """A suspect subscriber's calls, alone, one evaluation at a time, on the quarantine
        lane's turns and workers."""
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
                self._code(self.quarantine, owner, pub, [c for c in calls if c.kind == "code"],
                           ticket),
                self._library(pub, [c for c in calls if c.kind != "code"], ticket),
            )  # fmt: skip
            results = code | library
            pause = self.lanes.pause(owner, (e for _, e in results.values()))
            return results
        finally:
            # the outcomes go now; the gate opens for the next evaluation after the pause
            asyncio.get_running_loop().call_later(pause, gate.running.release)

    async def _code(
        self, lane: Lane, owner: str, pub: str, calls: list[WorkerCall], ticket: int
    ) -> dict[str, Result]:
        """`owner`'s code calls in its own worker, on its turns: a call that ends the
        worker fails, and the rest wait for the owner's next turn (and a fresh worker).
        Once a call hits a limit, the owner is suspect: its calls still waiting, in this
        evaluation or another, take the quarantine lane's turns instead of the shared ones."""
        if calls and not self.code_allowed:
            return {c.sid: (False, f"function_sandbox_unavailable: {self.problem}") for c in calls}
        results: dict[str, Result] = {}
        pending = calls
        while pending:
            pending = [c for c in pending if not self.lanes.cancelled(c.sid, ticket)]
            if not pending:
                break  # suspended or removed meanwhile: no call, no outcome, not even a shed
            if lane is self.main and self.lanes.suspect(owner):
                lane = self.quarantine
                if lane.turns.waiting(owner) >= self.settings.quarantine_queue:
                    shed = f"shed: {self.settings.quarantine_queue} calls of this subscriber wait"
                    return results | {c.sid: (False, shed) for c in pending}
            async with lane.turns.turn(owner, lane.workers.expected_s(owner, pending)):
                pending = [c for c in pending if not self.lanes.cancelled(c.sid, ticket)]
                if not pending:
                    break
                await lane.workers.ready(owner, pending)  # a start is not its calls' time
                running = asyncio.ensure_future(lane.workers.run(owner, pub, pending))
                try:
                    await self._within_turn(lane, owner, running, pending)
                except asyncio.CancelledError:
                    await _cut_short(running)
                    raise
            try:
                done, pending = await running
            except asyncio.CancelledError:
                await _cut_short(running)
                raise
            results |= done
            if any(costly(error) for _, error in done.values()):
                self.lanes.flag(owner)
        return results

    async def _within_turn(
        self, lane: Lane, owner: str, running: asyncio.Future[Any], calls: list[WorkerCall]
    ) -> None:
        """Calls keep a shared turn for `slow_call_ms` of their worker's CPU time each, from
        when it is ready. Past it they finish outside the turn, their owner suspect, and the
        turn goes to the next subscriber: a spin the kernel ends only after a second costs
        its neighbours a share of the CPU for that second, not a turn held all along. CPU
        time, not wall time: on a loaded machine a cheap call waits for the CPU, which is no
        fault of its owner's (and a call cannot wait without CPU otherwise: no sleep, no
        I/O, no lock in the sandbox; the watchdog bounds its wall time all the same)."""
        if lane is not self.main:
            await asyncio.wait({running})
            return
        allowed_s = self.settings.slow_call_ms / 1000 * len(calls)
        before = lane.workers.used_cpu_s(owner)
        while not running.done():
            await asyncio.wait({running}, timeout=allowed_s)
            if running.done():
                return
            now = lane.workers.used_cpu_s(owner)
            if now is None or before is None or now - before >= allowed_s:
                self.lanes.flag(owner)  # overstayed its turn: it finishes outside it
                return

    async def _library(self, pub: str, calls: list[WorkerCall], ticket: int) -> dict[str, Result]:
        if not calls:
            return {}
        return await self.library.run_many(
            pub, calls, lambda c: not self.lanes.cancelled(c.sid, ticket)
        )

    async def call_library(self, name: str, publication: Any, params: Mapping[str, Any]) -> Result:
        """One of the library's functions on one publication, in the library's workers
        (the thesis's `/api/Detect*`): never in the broker's process."""
        call = WorkerCall("api", "builtin", name, params=dict(params))
        return (await self.library.run(publication_text(publication), [call]))["api"]

    async def aclose(self) -> None:
        for lane in (self.main, self.quarantine):
            await lane.workers.aclose()
        await self.library.aclose()
        await self.urls.aclose()


async def _cut_short(running: asyncio.Future[Any]) -> None:
    """Cancel a call still running, and wait until its worker is killed: a request cut
    short leaves a worker out of step (pool.py), and nothing of it may outlive its caller."""
    running.cancel()
    await asyncio.wait({running})


async def _all(calls: list[Coroutine[Any, Any, Answer | None]]) -> list[Answer | None]:
    return list(await asyncio.gather(*calls))


async def _nothing() -> dict[str, Result]:
    return {}


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


def create_runner(settings: FunctionSettings, own: Own | None = None) -> SandboxRunner:
    """The runner; `own` is the broker's own endpoint, which its URL functions never call
    (a subscription's URL pointed back at the broker would make it call itself)."""
    return SandboxRunner(settings, own)
