"""The exit point operator: collects the partial results of each publication, merges them
once every matcher of its view has answered, and enqueues the deliveries through the store
exactly as the broker does (a `Fanout` per publication, no object per delivery), then tells
the access point.

Each access point's publications are released in their order (a reorder buffer by sequence
number), so whatever the matchers' relative speed, and across a change of matcher view, a
publisher's publications reach each subscriber's queue in the order they were published.

During an exit point scale the consistent cut decides who delivers what: an old exit point
delivers up to the cut and then says it has drained; a new one (or one that stays) holds what
follows the cut until the coordinator says every old exit point has drained (`release`).

At a recovery's `change` it forgets every partial result and every cut, and waits for each
access point's publications again from the first it sends again; those up to the last it
had sent before pausing are enqueued idempotently (`fresh=False`: the store skips the
deliveries committed before the loss), so nothing is delivered twice.
"""

from __future__ import annotations

import asyncio
import logging
from collections import defaultdict
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import orjson

from tidings.elastic.coordination.coordinator import Coordinator
from tidings.elastic.coordination.records import ClusterConfig, ScaleState
from tidings.elastic.operators.operator import Operator
from tidings.elastic.protocol import wire
from tidings.elastic.protocol.cuts import ANY, UNDECIDED, Cut, Cuts
from tidings.errors import TidingsError
from tidings.store.base import Enqueue, Fanout, NewMessage, QueueOp

log = logging.getLogger("tidings.elastic")


class Sink(Protocol):
    """Where an exit point's deliveries go: the store (in one commit per call), a `Fanout`
    per publication. `fresh` False: some may have been committed before (sent again after a
    recovery, or by another exit point of a scale), and those must be skipped, as the store's
    `enqueue` does by (dedup key, subscriber)."""

    async def deliver(self, fanouts: Sequence[Fanout], fresh: bool = True) -> None: ...


class EnqueueStore(Protocol):
    def apply(self, ops: Sequence[QueueOp]) -> list[Any]: ...
    def enqueue(self, messages: Sequence[NewMessage], fresh: bool = False) -> int: ...


class StoreSink:
    """Enqueue as the broker does: one transaction; fresh publications as fan-outs (a row
    each in the store, no object each here), the others checked delivery by delivery."""

    def __init__(
        self,
        store: EnqueueStore,
        then: Callable[[Sequence[Fanout]], Awaitable[None] | None] | None = None,
    ) -> None:
        self.store = store
        self.then = then  # e.g. the broker's wake-ups and event log

    async def deliver(self, fanouts: Sequence[Fanout], fresh: bool = True) -> None:
        if fanouts and fresh:
            op = Enqueue([], fresh=True, fanouts=fanouts)
            [answer] = await asyncio.to_thread(self.store.apply, [op])
            if isinstance(answer, BaseException):  # (`apply` answers what an op raised)
                raise answer
        elif fanouts:
            messages = [m for f in fanouts for m in f.messages()]
            await asyncio.to_thread(self.store.enqueue, messages, False)
        if self.then is not None:
            done = self.then(fanouts)
            if done is not None:
                await done


@dataclass
class _Collecting:
    of: int
    got: int = 0
    matches: dict[str, list[str]] = field(default_factory=dict)
    body: bytes | None = None


@dataclass
class _Scale:
    state_id: int
    old: list[str]
    new: list[str]
    markers: set[tuple[str, str]] = field(default_factory=set)  # (matcher, access point)
    cuts: dict[str, int] = field(default_factory=dict)  # access point -> cut
    expected: set[tuple[str, str]] = field(default_factory=set)  # every (matcher, ap)
    drained: bool = False


class ExitPointOperator(Operator):
    role = "exit_point"

    def __init__(self, member_id: str, coordinator: Coordinator, bind: str, sink: Sink) -> None:
        super().__init__(member_id, coordinator, bind)
        self.sink = sink
        self.config: ClusterConfig | None = None
        self._collecting: dict[tuple[str, int, int], _Collecting] = {}  # (ap, seq, view)
        # access point -> seq -> exit point view -> the merged result
        self._complete: dict[str, dict[int, dict[int, _Collecting]]] = defaultdict(dict)
        self._next: dict[str, int] = {}  # access point -> next sequence number to release
        self._scales: dict[int, _Scale] = {}  # exit point scales in progress
        self._cuts = Cuts()
        self._changes: dict[int, set[tuple[str, str]]] = defaultdict(set)  # matcher scales
        self.threshold = 0  # matchers in the latest view seen (what partials are counted to)
        self._lock = asyncio.Lock()
        self.epoch = 0  # the last recovery's matcher view: partials of earlier views are stale
        self._again: dict[str, int] = {}  # access point -> last publication sent again

    async def prepare(self) -> None:
        self.config = await self.coordinator.config()
        if self.config is not None:
            self.threshold = len(self.config.matchers.members)

    # ------------------------------------------------------------ messages

    async def handle(self, batch: list[wire.Message]) -> None:
        for message in batch:
            if isinstance(message, wire.Partials):
                self._collect(message)
            elif isinstance(message, wire.ExitPointScaling):
                await self._marker(message)
            elif isinstance(message, wire.ChangeMatcherOnExitPoint):
                await self._matcher_change(message)
            else:
                log.warning("%s ignores %s", self.id, type(message).__name__)
        await self._release()
        if self._scales:
            await self._check_drained()

    def _collect(self, message: wire.Partials) -> None:
        for part in message.items:
            if part.mv < self.epoch:
                continue  # matched before a recovery, which sends it again
            if part.seq < self._next.get(part.ap, 0):
                continue  # released already, under the other view of a scale
            wanted = self._cuts.wanted(part.ap, part.seq)
            if wanted is not UNDECIDED and wanted != ANY and wanted != part.ev:
                continue  # the view that does not deliver it
            key = (part.ap, part.seq, part.ev)
            entry = self._collecting.get(key)
            if entry is None:
                entry = self._collecting[key] = _Collecting(part.of)
            entry.got += 1
            if part.matches:
                entry.matches = _merged(entry.matches, part.matches)
                entry.body = part.body
            if entry.got == entry.of:
                del self._collecting[key]
                self._complete[part.ap].setdefault(part.seq, {})[part.ev] = entry
            self.threshold = part.of

    def _releasable(self, ap: str, seq: int) -> _Collecting | None:
        """Publication `seq`'s merged result under the view that delivers it, when that
        view is decided and every matcher has answered."""
        views = self._complete[ap].get(seq)
        wanted = self._cuts.wanted(ap, seq)
        if views is None or wanted is UNDECIDED:
            return None
        if wanted == ANY:
            return next(iter(views.values()))
        return views.get(wanted)

    async def _release(self) -> None:
        async with self._lock:  # one commit at a time, in order
            ready: list[tuple[str, int, _Collecting]] = []
            for ap, complete in self._complete.items():
                seq = self._next.get(ap, 0)
                while (entry := self._releasable(ap, seq)) is not None:
                    del complete[seq]
                    self._drop_collecting(ap, seq)
                    ready.append((ap, seq, entry))
                    seq += 1
                self._next[ap] = seq
            if not ready:
                return
            fanouts: list[Fanout] = []
            by_ap: dict[str, tuple[list[int], list[int]]] = defaultdict(lambda: ([], []))
            again = any(seq <= self._again.get(ap, -1) for ap, seq, _ in ready)
            for ap, seq, entry in ready:
                fanout = _fanout(entry)
                if fanout is not None:
                    fanouts.append(fanout)
                seqs, counts = by_ap[ap]
                seqs.append(seq)
                counts.append(0 if fanout is None else len(fanout.owners))
            if again:
                self.count("publications_again", len(ready))
            if again or not self._alone():
                await self.sink.deliver(fanouts, fresh=False)
            else:
                await self.sink.deliver(fanouts)
            self.count("publications", len(ready))
            self.count("deliveries", sum(len(f.owners) for f in fanouts))
            for ap, (seqs, counts) in by_ap.items():
                if await self._reachable(ap):
                    self.out.send(ap, wire.Committed(self.id, seqs, counts, self.epoch))
                else:
                    self.count("commits_for_gone_access_points", len(seqs))

    async def _reachable(self, ap: str) -> bool:
        """An access point's address is looked up at its first commit (one that joined
        after this exit point started is no different); one that is gone is told nothing."""
        try:
            await self.resolve([ap])
        except TidingsError:
            return False
        return True

    def _alone(self) -> bool:
        """The only exit point, with no scale under way: no other writer enqueues deliveries
        of the same publications, so a fresh enqueue (one body row keyed by the publication,
        no per-row check) cannot collide with another exit point's."""
        config = self.config
        return config is not None and config.exit_points.members == [self.id] and not self._scales

    def _drop_collecting(self, ap: str, seq: int) -> None:
        """The other view's partials of a released publication (a scale's both views)."""
        for view in self._cuts.views(ap):
            self._collecting.pop((ap, seq, view), None)

    # ------------------------------------------------------------ matcher scaling

    async def _matcher_change(self, message: wire.ChangeMatcherOnExitPoint) -> None:
        """Chandy-Lamport marker of a matcher scale: once every old matcher has forwarded
        every access point's, no partial of the old view is still on its way here. Which
        markers a scale waits for is read from ZooKeeper beside the inbox loop: in it, the
        partials behind the marker waited for the reads and the arrival (28-40 ms at each
        scale's `change` under figure 13's load, the longest pause of a scale-out)."""
        self._changes[message.scale].add((message.matcher, message.ap))
        self.spawn(self._changed_when_complete(message.scale), "changed")

    async def _changed_when_complete(self, scale: int) -> None:
        state = await self.coordinator.scale()
        config = await self.coordinator.require_config()
        seen = self._changes.get(scale)
        if state is None or state.id != scale or seen is None:
            return  # (another marker's check saw them all)
        if {(m, ap) for m in state.old for ap in config.access_points} <= seen:
            del self._changes[scale]
            self.threshold = len(state.new)
            await self.coordinator.arrive(scale, "changed", self.id)

    # ------------------------------------------------------------ exit point scaling

    async def _marker(self, message: wire.ExitPointScaling) -> None:
        if self._cuts.outcome(message.scale) is not None:
            return  # decided already (a late marker of an aborted scale)
        if self.id not in message.old:  # a new exit point starts after the cut
            self._next[message.ap] = max(self._next.get(message.ap, 0), message.cut + 1)
        self._cuts.add(message.ap, Cut(message.scale, message.cut, message.old_view, message.view))
        scale = self._scales.get(message.scale)
        if scale is None:
            scale = _Scale(message.scale, message.old, message.members)
            self._scales[message.scale] = scale
        scale.markers.add((message.matcher, message.ap))
        scale.cuts.setdefault(message.ap, message.cut)

    async def _check_drained(self) -> None:
        for scale in list(self._scales.values()):
            if scale.drained or self.id not in scale.old:
                continue
            if not scale.expected:
                config = self.config = await self.coordinator.require_config()
                matchers, aps = config.matchers.members, config.access_points
                scale.expected = {(m, ap) for m in matchers for ap in aps}
            if not scale.expected <= scale.markers:
                continue
            if all(self._next.get(ap, 0) > cut for ap, cut in scale.cuts.items()):
                scale.drained = True
                await self.coordinator.arrive(scale.state_id, "drained", self.id)

    async def on_scale(self, state: ScaleState) -> None:
        if state.kind == "recover" and state.phase == "change" and self.id in state.exit_points:
            await self._recover(state)
        if state.kind == "access_points" or (state.kind == "recover" and state.idle):
            await self._forget_access_points(set(state.old) - set(state.new) | set(state.lost))
        if state.kind != "exit_points":
            return
        if state.phase == "start":
            await self._check_drained()
            return
        self.config = await self.coordinator.require_config()  # before any release it allows
        released = state.phase != "aborted"
        if self._cuts.outcome(state.id) is None:
            self._cuts.decide(state.id, released)
            self._scales.pop(state.id, None)
            member_after = self.id in (state.new if released else state.old)
            if not member_after:  # what it holds belongs to the view that does not deliver
                self._collecting.clear()
                self._complete.clear()
        await self._release()

    async def _recover(self, state: ScaleState) -> None:
        """Start over from what each access point will send again: forget every partial
        result, cut and scale in progress (their publications come again, under the new
        views), and deliver those it had sent before idempotently."""
        async with self._lock:  # not in the middle of a commit
            self._collecting.clear()
            self._complete.clear()
            self._scales.clear()
            self._changes.clear()
            self._cuts = Cuts()
            for ap, (first, last) in state.since.items():
                self._next[ap] = first
                self._again[ap] = last
            self.epoch = state.view
            self.threshold = len(state.new)
            self.config = await self.coordinator.require_config()
        await self.coordinator.arrive(state.id, "adopted", self.id)

    async def _forget_access_points(self, gone: set[str]) -> None:
        """Drop what is held of access points that left or were lost (nothing of theirs
        that is still unanswered was promised to anyone). `_next` stays: a late partial of
        a publication released already is still recognised."""
        gone &= set(self._complete) | {key[0] for key in self._collecting}
        if not gone:
            return
        async with self._lock:
            self.config = await self.coordinator.require_config()
            gone -= set(self.config.access_points)
            for ap in gone:
                self._complete.pop(ap, None)
                self.out.drop(ap)
            for key in [k for k in self._collecting if k[0] in gone]:
                del self._collecting[key]

    def backlog(self) -> int:
        """Publications waiting: partly answered, or complete but not yet released."""
        return len(self._collecting) + sum(len(c) for c in self._complete.values())


def _merged(merged: dict[str, list[str]], part: dict[str, list[str]]) -> dict[str, list[str]]:
    """One more matcher's answer merged in, as dictionary operations (no step per
    subscriber): a subscriber whose subscriptions sit on several matchers gets their ids
    in order, whichever matcher answered first."""
    if not merged:
        return part  # (decoded for this exit point alone: nothing else holds it)
    both = merged.keys() & part.keys()
    joined = {s: sorted([*merged[s], *part[s]]) for s in both}
    merged.update(part)
    merged.update(joined)
    return merged


def _fanout(entry: _Collecting) -> Fanout | None:
    """The deliveries of one publication, as `Broker._fanout` makes them; None without."""
    if not entry.matches or entry.body is None:
        return None
    head = orjson.loads(entry.body)
    body = bytes(entry.body)  # the bytes the access point encoded, shared by its deliveries
    return Fanout(head["id"], head["id"], body, head["published_at"], entry.matches)
