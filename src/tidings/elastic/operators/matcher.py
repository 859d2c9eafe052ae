"""The matcher operator: a slice of the topic and content subscriptions in the compiled
`Matcher` index, matching every publication broadcast to it and sending each exit point its
share of the result.

During a matcher scale it holds two slices, the current view's and the next one's, and
matches each publication with the slice of the view it was broadcast under; subscriptions
never arrive meanwhile (the access points buffer them). During an exit point scale it routes
each access point's publications by the exit point view that access point's marker set.

A recovery (after a lost operator) is a matcher scale whose state comes from the surviving
matchers and, for the lost ones' share, from the access points; at its `change` the matcher
drops every older view at once (their publications are sent again under the new one).

Its part in a matcher scale or a recovery (the state transfer, the new slice, the change) is
`matcher_scale.MatcherScale`; a slice and its index, `slices.Slice`. This module keeps the
matching loop and the slices' upkeep: what leaves an index, a chunk per loop step.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import ClassVar

import msgspec

from tidings.elastic.coordination.coordinator import Coordinator
from tidings.elastic.coordination.records import ClusterConfig, ScaleState
from tidings.elastic.operators.matcher_scale import MatcherScale
from tidings.elastic.operators.operator import Operator
from tidings.elastic.operators.slices import Slice
from tidings.elastic.protocol import wire
from tidings.elastic.protocol.partition import Selector
from tidings.matching.engine import Event

SHRINK_CHUNK = 2000  # ids removed from an index per loop step, at once (about 3 ms)
FREE_CHUNK = 4000  # records of a dropped slice freed per loop step (about 2 ms)

log = logging.getLogger("tidings.elastic")


@dataclass
class _ExitPointScale:
    """An exit point scale past the cut of some access points, not yet decided: their
    publications go to both views, and the coordinator's decision says which one delivers."""

    id: int
    old: Selector
    new: Selector
    aps: set[str] = field(default_factory=set)  # access points whose cut has passed
    done: bool = False


class MatcherOperator(Operator):
    """The matching loop, the slices it matches with, and the exit point views it splits
    the answers by; its part in matcher scales and recoveries is `scaling`."""

    role = "matcher"
    Scaling: ClassVar[type[MatcherScale]] = MatcherScale  # (a subclass's may hold a step)

    def __init__(self, member_id: str, coordinator: Coordinator, bind: str) -> None:
        super().__init__(member_id, coordinator, bind)
        self.slices: dict[int, Slice] = {}
        self.config: ClusterConfig | None = None
        self._default_exit_points: Selector | None = None
        self._ep_scale: _ExitPointScale | None = None  # undecided, past some cuts
        self._ep_decided: dict[int, bool] = {}  # exit point scale -> released (or aborted)
        self._partials: dict[str, list[wire.Partial]] = defaultdict(list)
        self._shrinking: asyncio.Task[None] | None = None  # foreign ids leaving the index
        self._dropped: list[Slice] = []  # slices no view matches, their records leaving
        self._freeing: asyncio.Task[None] | None = None  # ... in chunks (`_free`)
        self.alone = False  # the only operator in its process (`tidings matcher`)
        self.matching_seconds: list[float] = []  # recent per-publication matching times
        self.scaling = self.Scaling(self)

    async def prepare(self) -> None:
        config = await self.coordinator.config()
        if config is not None:
            await self._adopt(config)

    async def _adopt(self, config: ClusterConfig) -> None:
        self.config = config
        view = config.matchers
        if self.id in view.members and view.view not in self.slices:
            self.slices[view.view] = Slice(Selector(view.view, tuple(view.members)))
        eps = config.exit_points
        self._default_exit_points = Selector(eps.view, tuple(eps.members))
        # a replacement started for a recovery: lost exit points may still be in the views
        await self.resolve(eps.members, missing_ok=True)

    async def fresh_config(self) -> ClusterConfig:
        """The configuration read again; its exit point view adopted if it is newer."""
        config = await self.coordinator.require_config()
        if self.config is None or config != self.config:
            self.config = config
            eps = config.exit_points
            if self._default_exit_points is None or eps.view > self._default_exit_points.view:
                self._default_exit_points = Selector(eps.view, tuple(eps.members))
            await self.resolve(eps.members, missing_ok=True)  # (lost ones: being replaced)
        return config

    # ------------------------------------------------------------ messages

    async def handle(self, batch: list[wire.Message]) -> None:
        run: list[wire.Publish] = []
        subscribes: list[wire.Subscribe] = []  # in a row: added at once, before what follows
        for message in batch:
            if isinstance(message, wire.Publish):
                self._subscribe(subscribes)
                run.append(message)
                continue
            if run:
                self._match(run)
                run = []
            self._flush()  # what was matched goes before anything this message causes
            if isinstance(message, wire.Subscribe):
                subscribes.append(message)
                continue
            self._subscribe(subscribes)
            await self._control(message)
        if run:
            self._match(run)
        self._subscribe(subscribes)
        self._flush()

    def _subscribe(self, subscribes: list[wire.Subscribe]) -> None:
        """Subscriptions that came in a row (nothing between them to match), added to their
        view's slice in one call, whose bulk path takes numeric ones as columns: the
        changes an access point buffered during a scale come in a row, 18,000 after a
        slow scale-in, and one by one (50-65 us each on a slow machine) they held every
        publication behind them for 2 s."""
        for view, run in itertools.groupby(subscribes, key=lambda m: m.view):
            self._slice(view).add([m.record for m in run])
        subscribes.clear()

    def _match(self, publications: list[wire.Publish]) -> None:
        by_view: dict[int, list[wire.Publish]] = defaultdict(list)
        for p in publications:
            by_view[p.view].append(p)
        for view, pubs in by_view.items():
            piece = self.slices.get(view)
            if piece is None and self.slices and view < min(self.slices):
                self.count("publications_of_a_dropped_view", len(pubs))  # sent again
                continue
            if piece is None:
                self.count("publications_without_state")
                log.error("%s holds no state of matcher view %d", self.id, view)
                continue
            started = time.perf_counter()
            answers = piece.match_batch([Event(tuple(p.topics), p.attributes) for p in pubs])
            each = (time.perf_counter() - started) / len(pubs)
            self.matching_seconds.append(each)
            del self.matching_seconds[:-1000]
            of = len(piece.selector)
            for pub, matches in zip(pubs, answers, strict=True):
                self._split(pub, matches, of)
        self.count("publications", len(publications))

    def _split(self, pub: wire.Publish, matches: dict[str, list[str]], of: int) -> None:
        for selector in self._routes(pub.ap):
            if len(selector) == 1:
                only = selector.members[0]
                body = pub.body if matches else None
                self._partials[only].append(
                    wire.Partial(pub.ap, pub.seq, of, matches, body, selector.view, pub.view)
                )
                continue
            shares: dict[str, dict[str, list[str]]] = {m: {} for m in selector.members}
            for subscriber, ids in matches.items():
                shares[selector.of(subscriber)][subscriber] = ids
            for ep, share in shares.items():
                body = pub.body if share else None
                self._partials[ep].append(
                    wire.Partial(pub.ap, pub.seq, of, share, body, selector.view, pub.view)
                )

    def _routes(self, ap: str) -> tuple[Selector, ...]:
        """The exit point views an access point's publication is split by: both while an
        exit point scale is undecided and this access point's cut has passed."""
        scale = self._ep_scale
        if scale is not None and ap in scale.aps:
            return (scale.old, scale.new)
        assert self._default_exit_points is not None
        return (self._default_exit_points,)

    def _flush(self) -> None:
        for ep, items in self._partials.items():
            if items:
                self.out.send(ep, wire.Partials(self.id, items))
        self._partials.clear()

    async def _control(self, message: wire.Message) -> None:
        if isinstance(message, wire.Unsubscribe):
            self._slice(message.view).remove(message.id)
        elif isinstance(message, wire.StartScale):
            await self.scaling.start(message)
        elif isinstance(message, wire.AddMatcherState):
            await self.scaling.add_state(message)
        elif isinstance(message, wire.ChangeMatcherOnExitPoint):
            self._forward_change(message)
        elif isinstance(message, wire.ChangeMatcher):
            await self.scaling.change(message)
        elif isinstance(message, wire.ExitPointScaling):
            await self._exit_point_marker(message)
        else:
            log.warning("%s ignores %s", self.id, type(message).__name__)

    def _forward_change(self, message: wire.ChangeMatcherOnExitPoint) -> None:
        forwarded = wire.ChangeMatcherOnExitPoint(
            message.ap, message.scale, message.view, self.id, message.last_seq
        )
        assert self.config is not None
        for ep in self.config.exit_points.members:
            self.out.send(ep, forwarded)

    def _slice(self, view: int) -> Slice:
        piece = self.slices.get(view)
        if piece is None:
            raise RuntimeError(f"{self.id} holds no state of matcher view {view}")
        return piece

    # ------------------------------------------------------------ the scale watch

    async def on_scale(self, state: ScaleState) -> None:
        if state.kind in ("matchers", "recover"):
            await self.scaling.on_scale(state)
        elif state.kind == "exit_points" and state.phase == "start":
            await self.resolve(state.new)
        elif state.kind == "exit_points":
            self._decide_exit_points(state)
        if state.idle:
            self.scaling.settled(state)
            await self.fresh_config()

    async def stop(self, crash: bool = False) -> None:
        try:
            await super().stop(crash)
        finally:
            self.scaling.close()

    # ------------------------------------------------------------ slices, kept and let go

    def tidy(self) -> None:
        """Ids left out of a slice's answers leave the index once no other slice shares it:
        a chunk per loop step (66,000 of a 1 -> 3 scale-out: 0.10 s in all)."""
        if self._shrinking is not None:
            return
        for piece in self.slices.values():
            shared = any(o is not piece and o.index is piece.index for o in self.slices.values())
            if piece.foreign and not shared:
                self._shrinking = self.spawn(self._shrink(piece), "shrink")
                return

    async def _shrink(self, piece: Slice) -> None:
        try:
            while piece.foreign and any(o is piece for o in self.slices.values()):
                chunk = list(itertools.islice(piece.foreign, SHRINK_CHUNK))
                piece.foreign.difference_update(chunk)
                piece.index.remove_many(chunk)
                await asyncio.sleep(0)
        finally:
            if self._shrinking is asyncio.current_task():
                self._shrinking = None
        self.tidy()  # (another slice's turn)

    def shrink_now(self) -> None:
        """Before a scale starts, whose slices may share an index: the chunked removal of
        foreign ids stops (`_shrink` must not remove what a new slice re-adds). What is left
        of it stays in the index, left out of the current slice's answers, and the new
        view's slice carries it as foreign too (`MatcherScale._grow`): it leaves after that scale's
        change, or comes back with another matcher's share and is replaced (a scale-in
        after a scale-out brings back just those ids). Removed here, at once, the 66,000
        ids of a scale-out that had not left yet held the inbox loop for 0.44 s.

        Two slices may still share an index (a scale that failed after `change`, or one
        whose end this matcher has not seen): an id foreign to both leaves at once."""
        if self._shrinking is not None:
            self._shrinking.cancel()
            self._shrinking = None
        for index in {id(p.index): p.index for p in self.slices.values()}.values():
            sharing = [p for p in self.slices.values() if p.index is index]
            if len(sharing) == 1:
                continue
            gone = set(sharing[0].foreign).intersection(*(p.foreign for p in sharing[1:]))
            index.remove_many(gone)
            for piece in sharing:
                piece.foreign.difference_update(gone)

    def drop_slices(self, keep: Callable[[int], bool]) -> None:
        """Only the slices of the views `keep` says stay; the records of the others are freed
        a chunk per loop step (`_free`). Freed at once, the 66,000 records a 1 -> 3
        scale-out moves away held the inbox loop for 35-44 ms."""
        self._dropped += [s for v, s in self.slices.items() if not keep(v)]
        self.slices = {v: s for v, s in self.slices.items() if keep(v)}
        if self._dropped and self._freeing is None:
            self._freeing = self.spawn(self._free(), "free")

    async def _free(self) -> None:
        try:
            while self._dropped:
                records = self._dropped[-1].records
                for _ in range(min(FREE_CHUNK, len(records))):
                    records.popitem()
                if not records:
                    self._dropped.pop()  # (its index goes with it, unless a slice shares it)
                await asyncio.sleep(0)
        finally:
            self._freeing = None

    # ------------------------------------------------------------ exit point scaling

    async def _exit_point_marker(self, message: wire.ExitPointScaling) -> None:
        """The consistent cut: this access point's publications after the marker go to the
        old and the new exit points until the scale is decided; the marker goes on to every
        old and new exit point."""
        if self._ep_decided.get(message.scale) is False:
            return  # aborted before its marker came: the old view goes on alone
        await self.resolve(message.members)
        config = await self.fresh_config()  # also the outcome of the scale before this one
        scale = self._ep_scale
        if scale is None or scale.id != message.scale:
            old = Selector(message.old_view, tuple(message.old))
            new = Selector(message.view, tuple(message.members))
            scale = self._ep_scale = _ExitPointScale(message.scale, old, new)
        scale.aps.add(message.ap)
        forwarded = msgspec.structs.replace(message, matcher=self.id)
        for ep in dict.fromkeys([*message.old, *message.members]):
            self.out.send(ep, forwarded)
        if set(config.access_points) <= scale.aps and not scale.done:
            scale.done = True
            await self.coordinator.arrive(message.scale, "done", self.id)

    async def adopt_exit_points(self, view: Selector) -> None:
        """A recovery's new exit point view, alone from now on (any cut undone)."""
        self._default_exit_points = view
        self._ep_scale = None
        await self.resolve(view.members)

    def _decide_exit_points(self, state: ScaleState) -> None:
        """Release: the new view alone from now on; aborted: the old one."""
        if state.id in self._ep_decided:
            return
        released = state.phase != "aborted"
        self._ep_decided[state.id] = released
        self._ep_scale = None
        if released:
            if self._default_exit_points is None or state.view > self._default_exit_points.view:
                self._default_exit_points = Selector(state.view, tuple(state.new))
            gone = set(state.old) - set(state.new)
        else:
            gone = set(state.new) - set(state.old)
        for member in gone:
            self.out.drop(member)

    def matching_p99(self) -> float:
        recent = sorted(self.matching_seconds)
        return recent[int(0.99 * (len(recent) - 1))] if recent else 0.0

    def subscriptions(self) -> int:
        current = max(self.slices, default=None)
        return 0 if current is None else len(self.slices[current].records)
