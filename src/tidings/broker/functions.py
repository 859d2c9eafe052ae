"""Function subscriptions at publish time: evaluated by the function runner (subscriber code
never runs in the broker's process) after the publish is answered, each subscriber's matches
enqueued as soon as its own calls are done; a subscription failing by the failure rule
(`tidings.sandbox.health`) is suspended at once.

Durable (docs/guarantees.md): the evaluations a publication owes are recorded (`Owe`) in the
same group commit as its topic and content deliveries, before the publish is answered, and
removed (`Discharge`) once every one is done. This broker claims its records as queue
messages are leased and renews the claims while it evaluates; a record whose claim ran out
(its broker died) is claimed and finished by any broker, the same one restarted included.
A match is enqueued once whoever finishes it: its key is the publication's id.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from typing import Any, Literal

import orjson

from tidings.broker.index import SubscriptionIndex
from tidings.broker.telemetry import Telemetry
from tidings.delivery.committer import Committer
from tidings.delivery.signals import Signals
from tidings.errors import ErrorCode, TidingsError
from tidings.ids import new_id
from tidings.model import FunctionSpec, Publication, Subscription
from tidings.sandbox import FunctionOutcome, FunctionRunner
from tidings.sandbox.health import FailureRule
from tidings.store.asyncstore import AsyncStore
from tidings.store.base import (
    Discharge,
    Enqueue,
    NewMessage,
    Owe,
    PendingEvaluation,
    encode_body,
)

log = logging.getLogger("tidings.broker")
Spawn = Callable[[Coroutine[Any, Any, None]], None]
Status = Literal["active", "suspended"]
Owed = list[tuple[Publication, list[Subscription]]]  # each publication's function candidates
MAX_CLAIMED = 256  # pending records evaluated here at once, fresh ones included
RENEW_PAGE = 500  # claims renewed per statement


class FunctionMatching:
    def __init__(
        self,
        runner: FunctionRunner | None,
        index: SubscriptionIndex,
        store: AsyncStore,
        committer: Committer,
        signals: Signals,
        telemetry: Telemetry,
        rule: FailureRule,
        clock: Callable[[], float],
        claim_s: float = 30.0,
    ) -> None:
        self.runner, self.index, self.store = runner, index, store
        self.committer, self.signals, self.telemetry = committer, signals, telemetry
        self.rule, self.clock, self.claim_s = rule, clock, claim_s
        self.claimant = new_id()  # this broker's name on its claims
        self._evaluating: set[str] = set()  # publication ids whose records this broker holds

    def validate(self, spec: FunctionSpec) -> None:
        if self.runner is None:
            raise TidingsError(ErrorCode.UNAVAILABLE, detail="function matching is not enabled")
        self.runner.validate(spec)

    def owed(self, pubs: Sequence[Publication]) -> Owed:
        """The function subscriptions each publication names (none without a runner)."""
        if self.runner is None:
            return []
        found = ((pub, self.index.functions.candidates(pub)) for pub in pubs)
        return [(pub, subs) for pub, subs in found if subs]

    async def routed_owing(self, routed: Awaitable[list[int]], owed: Owed) -> list[int]:
        """Route the publications (`routed`) while recording what they owe: both are
        submitted together, so they join one group commit, and the answer waits for both.
        What a failed routing owed is removed again: its publish is not accepted."""
        if not owed:
            return await routed
        now = self.clock()
        records = [
            PendingEvaluation(
                pub.id,
                orjson.dumps(pub.to_json()),
                tuple(s.id for s in subs),
                self.claimant,
                now + self.claim_s,
            )
            for pub, subs in owed
        ]
        counts, owing = await asyncio.gather(
            routed, self.committer.submit(Owe(records)), return_exceptions=True
        )
        if isinstance(counts, BaseException):
            if not isinstance(owing, BaseException):
                await self.committer.submit(Discharge([r.publication_id for r in records]))
            raise counts
        if isinstance(owing, BaseException):
            raise owing
        return counts

    async def forgive(self, owed: Owed, publication_ids: set[str]) -> Owed:
        """What these publications owed is removed (repeated publishes: their first owes it);
        what the others owe, kept."""
        gone = [pub.id for pub, _ in owed if pub.id in publication_ids]
        if gone:
            await self.committer.submit(Discharge(gone))
        return [(pub, subs) for pub, subs in owed if pub.id not in publication_ids]

    def spawn_for(self, owed: Owed, spawn: Spawn) -> None:
        """Start evaluating the function subscriptions each publication owes."""
        if self.runner is None:
            return
        for pub, subs in owed:
            self._evaluating.add(pub.id)
            spawn(self._run(self.runner, pub, subs))

    async def _run(
        self, runner: FunctionRunner, pub: Publication, subs: list[Subscription]
    ) -> None:
        """Deliver each subscriber's matches as soon as its own calls are done: a slow or
        failing subscriber never holds back another's deliveries. The record goes once all
        are done; one cut short (a shutdown, a failure) stays for its claim to run out."""
        try:
            by_id = {s.id: s for s in subs}
            async for outcomes in runner.stream(pub, subs):
                await self._deliver(pub, by_id, outcomes)
            await self.committer.submit(Discharge([pub.id]))
        finally:
            self._evaluating.discard(pub.id)

    # ---------------------------------------------------------------- pending records

    async def keep_pending(self, spawn: Spawn) -> None:
        """For as long as the broker runs: renew this broker's claims, and claim and finish
        the records whose claim ran out (a broker died before finishing them)."""
        if self.runner is None:
            return
        pause = max(0.05, min(1.0, self.claim_s / 3))
        while True:
            try:
                await self._renew()
                await self._claim(self.runner, spawn)
            except Exception as exc:  # the store restarting, say: the next round tries again
                self.telemetry.background_failed("pending function evaluations", exc)
            await asyncio.sleep(pause)

    async def claim_once(self, spawn: Spawn) -> int:
        """One round of `keep_pending` (a stateless broker's housekeeping): how many
        publications' evaluations were taken up."""
        if self.runner is None:
            return 0
        before = len(self._evaluating)
        await self._claim(self.runner, spawn)
        return len(self._evaluating) - before

    async def release(self) -> None:
        """End this broker's claims now (it is closing, its evaluations about to be cut
        short): any broker, the same one restarted included, may finish them at once."""
        try:
            await self._renew(until=self.clock())
        except Exception as exc:  # the store gone: the claims run out in their own time
            self.telemetry.background_failed("releasing pending function evaluations", exc)

    async def _renew(self, until: float | None = None) -> None:
        held = sorted(self._evaluating)
        until = self.clock() + self.claim_s if until is None else until
        for i in range(0, len(held), RENEW_PAGE):
            await self.store.renew_pending(self.claimant, held[i : i + RENEW_PAGE], until)

    async def _claim(self, runner: FunctionRunner, spawn: Spawn) -> None:
        room = MAX_CLAIMED - len(self._evaluating)
        if room <= 0:
            return
        now = self.clock()
        claimed = await self.store.claim_pending(self.claimant, now, now + self.claim_s, room)
        gone: list[str] = []
        for record in claimed:
            try:
                pub = Publication.from_json(orjson.loads(record.publication))
            except (orjson.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
                log.error(
                    "the pending evaluations of publication %s do not decode, dropped: %r",
                    record.publication_id,
                    exc,
                )
                gone.append(record.publication_id)
                continue
            wanted = set(record.subscription_ids)  # still active: suspended or removed are done
            subs = [s for s in self.index.functions.candidates(pub) if s.id in wanted]
            if not subs:
                gone.append(pub.id)
            elif pub.id not in self._evaluating:
                log.info("finishing the function evaluations of publication %s", pub.id)
                self._evaluating.add(pub.id)
                spawn(self._run(runner, pub, subs))
        if gone:
            await self.committer.submit(Discharge(gone))

    async def _deliver(
        self, pub: Publication, by_id: dict[str, Subscription], outcomes: list[FunctionOutcome]
    ) -> None:
        # a subscription removed while its call ran: no delivery, no count towards suspension
        outcomes = [o for o in outcomes if self.index.kind_of(o.subscription_id) is not None]
        suspended = [(o.subscription_id, r) for o in outcomes if (r := self._record(o))]
        for sid, reason in suspended:
            await self.set_status(sid, "suspended", reason)
        matched: dict[str, list[str]] = {}
        for outcome in outcomes:
            sub = by_id[outcome.subscription_id]
            if outcome.matched or (outcome.error and sub.function and sub.function.fail_open):
                matched.setdefault(sub.subscriber_id, []).append(sub.id)
        if not matched:
            return
        body = encode_body(pub.to_wire())
        messages = [
            NewMessage(owner, pub.id, pub.id, tuple(sorted(ids)), body, self.clock())
            for owner, ids in matched.items()
        ]
        # checked, not fresh: topic or content may have delivered this publication already
        added = await self.committer.submit(Enqueue(messages))
        self.telemetry.function_enqueued(added, messages)
        self.signals.notify(matched)

    def forget(self, subscription_id: str) -> None:
        """The subscription is gone (unsubscribed, its subscriber unregistered or expired,
        here or through another broker): its calls still queued are dropped, and what its
        calls running now answer is delivered to no one."""
        if self.runner is not None:
            self.runner.cancel(subscription_id)
        self.rule.forget(subscription_id)

    def _record(self, outcome: FunctionOutcome) -> str | None:
        """The failure rule: the suspension reason when it trips. The subscription's queued
        calls are cancelled at once, before anything awaits."""
        self.telemetry.function_called(outcome)
        sid = outcome.subscription_id
        reason = self.rule.count(sid, outcome.error)
        if reason is not None:
            self.telemetry.function_suspended(sid, reason)
            if self.runner is not None:
                self.runner.cancel(sid)
            self.index.functions.stop(sid)  # no publication reaches it from now on
        return reason

    async def set_status(self, subscription_id: str, status: Status, reason: str | None) -> None:
        """Suspend or resume: committed, then indexed by its new status."""
        await self.store.set_subscription_status(subscription_id, status, reason)
        sub = await self.store.get_subscription(subscription_id)
        self.rule.forget(subscription_id)
        if sub is not None:
            self.index.add(sub)

    def suspended(self) -> list[Subscription]:
        """The function subscriptions suspended after repeated failures, with their reasons."""
        return self.index.functions.suspended()
