"""Function subscriptions at publish time: evaluated by the function runner (subscriber code
never runs in the broker's process) after the publish is answered, each subscriber's matches
enqueued as soon as its own calls are done; a subscription failing by the failure rule
(`tidings.sandbox.health`) is suspended at once."""

from __future__ import annotations

import logging
from collections.abc import Callable, Coroutine, Sequence
from typing import Any, Literal

from tidings.broker.index import SubscriptionIndex
from tidings.broker.telemetry import Telemetry
from tidings.delivery.committer import Committer
from tidings.delivery.signals import Signals
from tidings.errors import ErrorCode, TidingsError
from tidings.model import FunctionSpec, Publication, Subscription
from tidings.sandbox import FunctionOutcome, FunctionRunner
from tidings.sandbox.health import FailureRule
from tidings.store.asyncstore import AsyncStore
from tidings.store.base import Enqueue, NewMessage, encode_body

log = logging.getLogger("tidings.broker")
Spawn = Callable[[Coroutine[Any, Any, None]], None]
Status = Literal["active", "suspended"]


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
    ) -> None:
        self.runner, self.index, self.store = runner, index, store
        self.committer, self.signals, self.telemetry = committer, signals, telemetry
        self.rule, self.clock = rule, clock

    def validate(self, spec: FunctionSpec) -> None:
        if self.runner is None:
            raise TidingsError(ErrorCode.UNAVAILABLE, detail="function matching is not enabled")
        self.runner.validate(spec)

    def spawn_for(self, pubs: Sequence[Publication], spawn: Spawn) -> None:
        """Start evaluating the function subscriptions each publication names."""
        if self.runner is None:
            return
        for pub in pubs:
            subs = self.index.functions.candidates(pub)
            if subs:
                spawn(self._run(self.runner, pub, subs))

    async def _run(
        self, runner: FunctionRunner, pub: Publication, subs: list[Subscription]
    ) -> None:
        """Deliver each subscriber's matches as soon as its own calls are done: a slow or
        failing subscriber never holds back another's deliveries."""
        by_id = {s.id: s for s in subs}
        async for outcomes in runner.stream(pub, subs):
            await self._deliver(pub, by_id, outcomes)

    async def _deliver(
        self, pub: Publication, by_id: dict[str, Subscription], outcomes: list[FunctionOutcome]
    ) -> None:
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
