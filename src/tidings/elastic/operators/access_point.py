"""The access point operator: routes each subscription to one matcher by the selector,
broadcasts each publication to every matcher of the current view, and answers a publisher
once every exit point of the publication's view has committed its deliveries.

Stateless but for what is in flight: its publications are numbered (`seq`) so that the exit
points can keep their order, and during a matcher scale it buffers subscription changes and
applies them to the new view once the coordinator says the new state is ready.

Beyond the paper, for recovery after a lost operator: it keeps each publication until every
exit point has committed it, and the subscriptions it routed (`records`). A recovery pauses
it, it sends the lost matchers' share of the subscriptions to the new view, and once the new
view is in place it sends every unanswered publication again (the exit points enqueue those
idempotently, so what was committed before the loss is not delivered twice).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field

import msgspec

from tidings.elastic.coordination.coordinator import Coordinator
from tidings.elastic.coordination.records import ClusterConfig, ScaleState
from tidings.elastic.operators.operator import Operator
from tidings.elastic.protocol import wire
from tidings.elastic.protocol.partition import Selector
from tidings.errors import ErrorCode, TidingsError
from tidings.model import Publication
from tidings.store.base import encode_body

log = logging.getLogger("tidings.elastic")


@dataclass
class _Pending:
    remaining: int  # exit points still to commit
    future: asyncio.Future[int]
    publish: wire.Publish  # kept until committed everywhere: a recovery sends it again
    deliveries: int = 0
    sent_at: float = 0.0


@dataclass
class _Buffered:
    subscribe: wire.SubscriptionRecord | None = None
    unsubscribe: str = ""


@dataclass
class _ScaleSeen:
    state: ScaleState
    handled: set[str] = field(default_factory=set)  # phases acted on


class AccessPointOperator(Operator):
    role = "access_point"

    def __init__(
        self,
        member_id: str,
        coordinator: Coordinator,
        bind: str,
        admit: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        super().__init__(member_id, coordinator, bind)
        # registered, not yet reading the configuration: what puts it in (or creates it)
        self._admit = admit
        self.leaving = False  # no more publications: it leaves once its pending are answered
        self._answered = asyncio.Event()  # set whenever nothing is pending
        self._crashed = False
        self.seq = 0  # the next publication's number
        self.selector: Selector | None = None
        self.exit_points = 0  # exit points in the view publications are sent under
        self._pending: dict[int, _Pending] = {}
        self._buffer: list[_Buffered] | None = None  # while a matcher scale runs
        self._seen: dict[int, _ScaleSeen] = {}
        self._cuts: dict[int, int] = {}  # exit point scale -> cut, until it is decided
        self._cut_states: dict[int, ScaleState] = {}
        self.phase_log: list[tuple[float, int, str, str]] = []  # (time, scale, kind, phase)
        self.latencies: list[float] = []  # recent publish-to-commit times, seconds
        self._untaken: list[float] = []  # ... not yet taken by `take_latencies`
        self.records: dict[str, wire.SubscriptionRecord] = {}  # routed, by subscription id
        self.epoch = 0  # the last recovery's matcher view: earlier commits are stale
        self._held: list[int] | None = None  # while a recovery runs: publications not sent
        self._since: list[int] = []  # [first, last] publication to send again after it

    async def prepare(self) -> None:
        if self._admit is not None:
            await self._admit()  # now in `config.access_points`: every later scale waits for it
        config = await self.coordinator.require_config()
        await self._adopt(config)

    async def _adopt(self, config: ClusterConfig) -> None:
        view = config.matchers
        self.selector = Selector(view.view, tuple(view.members))
        self.exit_points = len(config.exit_points.members)
        await self.resolve(view.members)

    # ------------------------------------------------------------ the publisher's side

    def publish_nowait(self, pub: Publication) -> asyncio.Future[int]:
        """Broadcast one publication; the future gives its number of deliveries once every
        exit point of its view has committed them."""
        assert self.selector is not None
        if self.leaving:
            raise TidingsError(
                ErrorCode.UNAVAILABLE,
                detail=f"access point {self.id} is leaving the elastic deployment",
            )
        seq, self.seq = self.seq, self.seq + 1
        loop = asyncio.get_running_loop()
        future: asyncio.Future[int] = loop.create_future()
        publish = wire.Publish(
            self.id,
            seq,
            self.selector.view,
            list(pub.topics),
            dict(pub.attributes),
            encode_body(pub.to_wire()),  # as queued: encoded once, here
        )
        self._pending[seq] = _Pending(self.exit_points, future, publish, sent_at=loop.time())
        self._answered.clear()
        if self._held is not None:
            self._held.append(seq)
        else:
            self._broadcast(publish)
        self.count("publications")
        return future

    def _broadcast(self, publish: wire.Publish) -> None:
        assert self.selector is not None
        frame = wire.encode(publish)
        for member in self.selector.members:
            self.out.send_frame(member, frame)

    async def publish(self, pubs: Sequence[Publication]) -> list[int]:
        futures = [self.publish_nowait(p) for p in pubs]
        return list(await asyncio.gather(*futures))

    def subscribe(self, record: wire.SubscriptionRecord) -> None:
        if self._buffer is not None:
            self._buffer.append(_Buffered(subscribe=record))
            self.count("subscriptions_buffered")
            return
        assert self.selector is not None
        self.records[record.id] = record
        self.out.send(
            self.selector.of(record.id), wire.Subscribe(self.id, self.selector.view, record)
        )

    def unsubscribe(self, subscription_id: str) -> None:
        if self._buffer is not None:
            self._buffer.append(_Buffered(unsubscribe=subscription_id))
            return
        assert self.selector is not None
        self.records.pop(subscription_id, None)
        self.out.send(
            self.selector.of(subscription_id),
            wire.Unsubscribe(self.id, self.selector.view, subscription_id),
        )

    def know(self, records: Sequence[wire.SubscriptionRecord]) -> None:
        """Subscriptions the matchers hold already (routed by another access point): kept,
        not sent, so that a recovery can rebuild a lost matcher's share from them too."""
        for record in records:
            self.records[record.id] = record

    def backlog(self) -> int:
        """Publications sent and not yet committed everywhere."""
        return len(self._pending)

    async def drain(self, timeout_s: float) -> bool:
        """Refuse new publications, then wait (at most `timeout_s`) until every pending one
        is answered; False if some are still pending."""
        self.leaving = True
        if not self._pending:
            return True
        self._answered.clear()
        try:
            await asyncio.wait_for(self._answered.wait(), timeout_s)
        except TimeoutError:
            return not self._pending
        return True

    # ------------------------------------------------------------ messages

    async def handle(self, batch: list[wire.Message]) -> None:
        now = asyncio.get_running_loop().time()
        for message in batch:
            if not isinstance(message, wire.Committed):
                log.warning("%s ignores %s", self.id, type(message).__name__)
                continue
            if message.epoch != self.epoch:  # before a recovery: it sends those again
                self.count("stale_commits", len(message.seqs))
                continue
            for seq, count in zip(message.seqs, message.deliveries, strict=True):
                pending = self._pending.get(seq)
                if pending is None:
                    self.count("unexpected_commits")
                    continue
                pending.deliveries += count
                pending.remaining -= 1
                self._settle(seq, pending, now)
        del self.latencies[:-2000]
        del self._untaken[:-10_000]

    def _settle(self, seq: int, pending: _Pending, now: float) -> None:
        """Answer the publisher once every exit point that delivers `seq` has committed;
        after the cut of an undecided exit point scale, not before the decision (which
        says how many exit points that is)."""
        if pending.remaining > 0 or any(seq > cut for cut in self._cuts.values()):
            return
        if self._held is not None:
            return  # a recovery runs: what is pending is sent and committed again
        del self._pending[seq]
        if not self._pending:
            self._answered.set()
        self.latencies.append(now - pending.sent_at)
        self._untaken.append(now - pending.sent_at)
        if not pending.future.done():
            pending.future.set_result(pending.deliveries)

    def _settle_all(self) -> None:
        now = asyncio.get_running_loop().time()
        for seq, pending in list(self._pending.items()):
            self._settle(seq, pending, now)

    async def stop(self, crash: bool = False) -> None:
        """As any operator; a publisher still waiting (an access point that left with
        publications unanswered) is told UNAVAILABLE rather than left waiting. (A crash
        answers nobody: the process is gone.)"""
        self._crashed = self._crashed or crash
        await super().stop(crash)
        if self._crashed:
            return
        for pending in self._pending.values():
            if not pending.future.done():
                pending.future.set_exception(
                    TidingsError(
                        ErrorCode.UNAVAILABLE,
                        detail=f"access point {self.id} stopped before the publication was "
                        "committed everywhere (it may be delivered or not)",
                    )
                )
        self._pending.clear()

    def take_latencies(self) -> list[float]:
        """The publish-to-commit times since the last call (the autoscaler's signal)."""
        taken, self._untaken = self._untaken, []
        return taken

    # ------------------------------------------------------------ scaling

    async def on_scale(self, state: ScaleState) -> None:
        seen = self._seen.setdefault(state.id, _ScaleSeen(state))
        if state.phase in seen.handled:
            return
        seen.handled.add(state.phase)
        self.phase_log.append(
            (asyncio.get_running_loop().time(), state.id, state.kind, state.phase)
        )
        if state.kind == "matchers":
            await self._matcher_phase(state, seen)
        elif state.kind == "recover":
            await self._recovery_phase(state)
        elif state.kind == "access_points":
            pass  # one joined or left: the matchers and exit points read it from the config
        elif state.phase == "start":
            await self._exit_point_cut(state)
        elif state.phase == "aborted":
            self._exit_points_aborted(state)
            self._settle_all()
        elif self._cuts.pop(state.id, None) is not None:
            self._cut_states.pop(state.id, None)
            self._settle_all()
        for old in [k for k in self._seen if k < state.id]:
            del self._seen[old]

    async def _matcher_phase(self, state: ScaleState, seen: _ScaleSeen) -> None:
        if state.phase == "start":
            self._buffer = [] if self._buffer is None else self._buffer
            await self.resolve(dict.fromkeys([*state.old, *state.new]))
            message = wire.StartScale(self.id, state.id, state.view, state.old, state.new)
            for member in dict.fromkeys([*state.old, *state.new]):
                self.out.send(member, message)
        elif state.phase == "change" and "start" in seen.handled:
            # one synchronous step: no publication or subscription can fall in between
            last = self.seq - 1
            for member in state.old:
                self.out.send(
                    member,
                    wire.ChangeMatcherOnExitPoint(self.id, state.id, state.view, last_seq=last),
                )
            change = wire.ChangeMatcher(self.id, state.id, state.view)
            for member in dict.fromkeys([*state.old, *state.new]):
                self.out.send(member, change)
            self.selector = Selector(state.view, tuple(state.new))
            self._flush_buffer()
            await self.coordinator.arrive(state.id, "switched", self.id)
        elif state.phase == "aborted":
            self._flush_buffer()  # to the selector in force: the old one, or the new one
        elif state.phase == "end":
            for gone in set(state.old) - set(state.new):
                self.out.drop(gone)

    # ------------------------------------------------------------ recovery

    async def _recovery_phase(self, state: ScaleState) -> None:
        if state.phase == "start":
            await self._pause(state)
        elif state.phase == "resume" and self._held is not None:
            await self._resume(state)
        # failed: stay paused; the deployment starts another recovery

    async def _pause(self, state: ScaleState) -> None:
        """Hold publications and subscription changes; send StartScale, and the lost
        matchers' share of the subscriptions this access point routed; say from which
        publication on it will send again."""
        if self._held is None:  # (a recovery after a failed one keeps the first pause's)
            self._held = []
            first = min(self._pending, default=self.seq)
            self._since = [first, self.seq - 1]
        self.epoch = state.view
        self._buffer = [] if self._buffer is None else self._buffer
        config = await self.coordinator.require_config()
        members = list(dict.fromkeys([*state.old, *state.new]))
        lost = set(state.lost)
        await self.resolve(m for m in members if m not in lost)
        start = wire.StartScale(self.id, state.id, state.view, state.old, state.new)
        for member in members:
            if member not in lost:
                self.out.send(member, start)
        for member in lost:
            self.out.drop(member)
        routed = Selector(config.matchers.view, tuple(config.matchers.members))
        new = Selector(state.view, tuple(state.new))
        shares: dict[str, list[wire.SubscriptionRecord]] = {m: [] for m in new.members}
        for sid, record in self.records.items():
            if routed.of(sid) in lost:
                shares[new.of(sid)].append(record)
        for member, share in shares.items():  # every new member hears from every access point
            for message in wire.state_messages(state.id, state.view, self.id, share):
                self.out.send(member, message)
        self.count("recovered_records", sum(len(s) for s in shares.values()))
        await self.coordinator.arrive(state.id, "paused", self.id, str(self._since).encode())

    async def _resume(self, state: ScaleState) -> None:
        """The new views are in place: every publication not committed everywhere goes out
        again (in order, before the held ones), then the buffered subscription changes."""
        self.selector = Selector(state.view, tuple(state.new))
        self.exit_points = len(state.exit_points)
        self._cuts.clear()
        self._cut_states.clear()
        await self.resolve(state.new)
        seqs = sorted(self._pending)
        if seqs and seqs != list(range(self._since[0], self._since[0] + len(seqs))):
            # the exit points release from `first` in sequence: a gap would stall them
            # (none can arise: each exit point commits in order, and nothing settles paused)
            log.error("%s: unanswered publications are not %d on, one by one", self.id, seqs[0])
            self.count("resend_gaps")
        for seq in seqs:
            pending = self._pending[seq]
            pending.remaining, pending.deliveries = self.exit_points, 0
            publish = msgspec.structs.replace(pending.publish, view=state.view)
            pending.publish = publish
            self._broadcast(publish)
            self.count("publications_resent" if seq <= self._since[1] else "publications_held")
        self._held, self._since = None, []
        self._flush_buffer()
        await self.coordinator.arrive(state.id, "resumed", self.id)

    def _flush_buffer(self) -> None:
        buffered, self._buffer = self._buffer or [], None
        for item in buffered:
            if item.subscribe is not None:
                self.subscribe(item.subscribe)
            else:
                self.unsubscribe(item.unsubscribe)

    async def _exit_point_cut(self, state: ScaleState) -> None:
        """The marker of the consistent cut, on every channel to the matchers; the
        publications after it are counted against the new exit points (against the old ones
        again if the scale aborts)."""
        assert self.selector is not None
        config = await self.coordinator.require_config()
        self._decide_missed(config)
        old_view = config.exit_points.view
        # from here to the marker's sending, one synchronous step: the cut is exact
        cut = self.seq - 1
        marker = wire.ExitPointScaling(
            self.id, state.id, state.view, state.new, state.old, cut, old_view=old_view
        )
        for member in self.selector.members:
            self.out.send(member, marker)
        self.exit_points = len(state.new)
        self._cuts[state.id] = cut
        self._cut_states[state.id] = state
        await self.coordinator.arrive(state.id, "switched", self.id)

    def _decide_missed(self, config: ClusterConfig) -> None:
        """A watch may skip a phase: an earlier exit point scale still undecided here was
        released if the configuration holds its view, else aborted."""
        for state in list(self._cut_states.values()):
            if config.exit_points.view == state.view:
                self._cuts.pop(state.id, None)
                self._cut_states.pop(state.id, None)
            else:
                self._exit_points_aborted(state)
        self._settle_all()

    def _exit_points_aborted(self, state: ScaleState) -> None:
        """The old exit points deliver what followed the cut: count the commits against them."""
        cut = self._cuts.pop(state.id, None)
        self._cut_states.pop(state.id, None)
        if cut is None:
            return
        self.exit_points = len(state.old)
        for seq, pending in self._pending.items():
            if seq > cut:
                pending.remaining += len(state.old) - len(state.new)
