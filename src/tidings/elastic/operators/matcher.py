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
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import itertools
import logging
import operator
import os
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import InitVar, dataclass, field
from typing import Any

import msgspec
import numpy as np

from tidings import heap
from tidings.elastic.coordination.coordinator import ClusterConfig, Coordinator, ScaleState
from tidings.elastic.operators.operator import Operator
from tidings.elastic.protocol import wire
from tidings.elastic.protocol.partition import Selector
from tidings.matching.bitset import EXACT, OP_CODES, IntervalRows
from tidings.matching.engine import Event, Matcher
from tidings.matching.exclusion import Exclusion
from tidings.matching.owners import Matches

BULK_FROM = 256  # records added at once from which the columns are worth making
SHRINK_CHUNK = 2000  # ids removed from an index per loop step, at once (about 3 ms)
FREE_CHUNK = 4000  # records of a dropped slice freed per loop step (about 2 ms)
SPLIT_STEP = 8192  # records of a snapshot repartitioned per loop step (about 3 ms)
GROW_CHUNK = 1024  # records a matcher in both views adds to its index per loop step (4 ms)
GROW_BACKLOG = 32  # an inbox batch this large: publications wait, and a chunk gives way ...
GROW_YIELDS = 1  # ... for one more inbox batch: under a backlog, a chunk every two batches
_OP_CODES = {op.value: code for op, code in OP_CODES.items()}
_ID, _TOPICS, _PREDICATES = (operator.attrgetter(a) for a in ("id", "topics", "predicates"))

log = logging.getLogger("tidings.elastic")


@dataclass
class Slice:
    """One view's share of the subscriptions: the records (to repartition) and the index.

    A matcher in both views of a scale keeps one index for both slices (see `_grow`): each
    slice's `foreign` ids are in the index but not in the slice, and left out of its answers
    until they are removed from the index."""

    selector: Selector
    records: dict[str, wire.SubscriptionRecord] = field(default_factory=dict)
    index: Matcher = field(default_factory=Matcher)
    hide: InitVar[Iterable[str]] = ()
    foreign: Exclusion = field(init=False)

    def __post_init__(self, hide: Iterable[str]) -> None:
        # left out by slot, before the answers are named: filtering named answers by id
        # cost a matcher in both views of a scale 2-3x its matching
        self.foreign = self.index.exclusion(hide)

    def match_batch(self, events: list[Event]) -> list[Matches]:
        return self.index.match_batch(events, self.foreign if self.foreign else None)

    def add(self, records: list[wire.SubscriptionRecord]) -> None:
        """Many at once (a scale's state, a recovery's): the content subscriptions made of
        comparisons with numbers as columns, in one bulk call of the index
        (`Matcher.add_content_arrays`, no Predicate object each: 34 k records in 0.10 s
        instead of 0.41 s; 0.14 s with a Python pass per record to check and make the
        columns); the rest one by one."""
        records = list({r.id: r for r in records}.values())  # an id given twice: the last
        if self.foreign:  # (replaced, as the index does)
            self.foreign.difference_update(r.id for r in records)
        if len(records) < BULK_FROM:
            self._add_each(records)
            return
        ids = [r.id for r in records]
        rows = _numeric_rows(records) if self.records.keys().isdisjoint(ids) else None
        if rows is not None:  # all of them (a scale's state, usually): checked in C passes
            bulk, rest = records, []
        else:  # a mix: what is not numeric, and ids already held, one by one (replaced)
            fits = [_numeric(r) and r.id not in self.records for r in records]
            bulk = list(itertools.compress(records, fits))
            rest = [r for r, fit in zip(records, fits, strict=True) if not fit]
            rows = _numeric_rows(bulk) if bulk else None
            ids = [r.id for r in bulk]
        if rows is None:
            rest = records
        else:
            try:
                self.index.add_content_arrays(ids, [r.subscriber for r in bulk], rows)
            except (TypeError, ValueError):  # an index without arrays, a value it refuses
                rest = records  # (refused before anything changed)
            else:
                self.records.update(zip(ids, bulk, strict=True))
        self._add_each(rest)

    def _add_each(self, records: list[wire.SubscriptionRecord]) -> None:
        contents = []
        for record in records:
            self.records[record.id] = record
            if record.topics:
                self.index.add_topic(record.id, record.subscriber, record.topics)
            else:
                contents.append(
                    (record.id, record.subscriber, wire.model_predicates(record.predicates))
                )
        if contents:
            self.index.add_contents(contents)

    def remove(self, subscription_id: str) -> None:
        if self.records.pop(subscription_id, None) is not None:
            self.index.remove(subscription_id)


def _own_and_moved(
    shares: dict[str, list[wire.SubscriptionRecord]], me: str
) -> tuple[dict[str, wire.SubscriptionRecord], list[str]]:
    """A matcher in both views: its share by id, and the ids of the others' (which leave its
    index after the change)."""
    moved = [r.id for member, share in shares.items() if member != me for r in share]
    return {r.id: r for r in shares[me]}, moved


def _lowest_priority() -> None:
    with contextlib.suppress(OSError):  # (Linux: a thread's own nice value)
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), 19)


def _built(piece: Slice, records: list[wire.SubscriptionRecord]) -> None:
    """The slice with its records, and the index done with any rebuild this set off (not
    left to run beside the matching once the slice is in use)."""
    piece.add(records)
    piece.index.wait()


def _numeric(record: wire.SubscriptionRecord) -> bool:
    return (
        not record.topics
        and bool(record.id)
        and bool(record.predicates)
        and all(
            op in _OP_CODES and type(v) in (int, float) and abs(v) < EXACT
            for _, op, v in record.predicates
        )
    )


def _numeric_rows(records: list[wire.SubscriptionRecord]) -> IntervalRows | None:
    """The records as columns if every one is a conjunction of comparisons with numbers
    (`_numeric`), else None. Row i: record i's predicates, a shorter row repeating its last.
    The checks and the columns are passes in C over all of them: one by one, the 34,000
    records of a scale took 50 ms, the core of a new matcher's build."""
    if not records or any(map(_TOPICS, records)) or not all(map(_ID, records)):
        return None
    lists = list(map(_PREDICATES, records))
    widths = set(map(len, lists))
    if 0 in widths:
        return None
    width = max(widths)
    if len(widths) == 1:
        flat = list(itertools.chain.from_iterable(lists))
    else:
        flat = [p for ps in lists for p in itertools.chain(ps, [ps[-1]] * (width - len(ps)))]
    keys, ops, values = zip(*flat, strict=True)
    if not set(ops) <= _OP_CODES.keys() or not set(map(type, values)) <= {int, float}:
        return None
    try:
        vals = np.array(values, np.float64)
    except OverflowError:  # an int beyond any float
        return None
    if not (np.abs(vals) < EXACT).all():
        return None
    codes = {key: code for code, key in enumerate(dict.fromkeys(keys))}
    n, shape = len(flat), (len(records), width)
    return IntervalRows(
        tuple(codes),
        np.fromiter(map(codes.__getitem__, keys), np.int32, n).reshape(shape),
        np.fromiter(map(_OP_CODES.__getitem__, ops), np.int8, n).reshape(shape),
        vals.reshape(shape),
    )


@dataclass
class _MatcherScale:
    state: ScaleState
    starts: set[str] = field(default_factory=set)  # access points whose StartScale came
    changes: set[str] = field(default_factory=set)  # ... whose ChangeMatcher came
    senders: set[str] = field(default_factory=set)  # matchers whose state came
    received: list[wire.SubscriptionRecord] = field(default_factory=list)
    own: dict[str, wire.SubscriptionRecord] | None = None  # its share (in both views: kept)
    moved: list[str] = field(default_factory=list)  # ... and the ids of the others' shares
    arrived: asyncio.Event = field(default_factory=asyncio.Event)  # state came (`_grow` waits)
    aps: frozenset[str] | None = None  # the access points taking part (see `_access_points`)
    sent: bool = False
    ready: bool = False


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
    role = "matcher"

    def __init__(self, member_id: str, coordinator: Coordinator, bind: str) -> None:
        super().__init__(member_id, coordinator, bind)
        self.slices: dict[int, Slice] = {}
        self.config: ClusterConfig | None = None
        self._default_exit_points: Selector | None = None
        self._ep_scale: _ExitPointScale | None = None  # undecided, past some cuts
        self._ep_decided: dict[int, bool] = {}  # exit point scale -> released (or aborted)
        self._scale: _MatcherScale | None = None
        self._partials: dict[str, list[wire.Partial]] = defaultdict(list)
        self._building: asyncio.Task[None] | None = None  # the new view's index
        self._shrinking: asyncio.Task[None] | None = None  # foreign ids leaving the index
        self._dropped: list[Slice] = []  # slices no view matches, their records leaving
        self._freeing: asyncio.Task[None] | None = None  # ... in chunks (`_free`)
        self._holding = False  # the garbage collector, until the new slice is ready
        self._background: ThreadPoolExecutor | None = None  # see `_in_background`
        self.alone = False  # the only operator in its process (`tidings matcher`)
        self.matching_seconds: list[float] = []  # recent per-publication matching times

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

    async def _config(self) -> ClusterConfig:
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
            await self._start_scale(message)
        elif isinstance(message, wire.AddMatcherState):
            await self._add_state(message)
        elif isinstance(message, wire.ChangeMatcherOnExitPoint):
            self._forward_change(message)
        elif isinstance(message, wire.ChangeMatcher):
            await self._change(message)
        elif isinstance(message, wire.ExitPointScaling):
            await self._exit_point_marker(message)
        else:
            log.warning("%s ignores %s", self.id, type(message).__name__)

    def _slice(self, view: int) -> Slice:
        piece = self.slices.get(view)
        if piece is None:
            raise RuntimeError(f"{self.id} holds no state of matcher view {view}")
        return piece

    # ------------------------------------------------------------ matcher scaling

    def _scale_of(self, scale: int) -> _MatcherScale:
        if self._scale is None or self._scale.state.id != scale:
            raise RuntimeError(f"{self.id}: a message of scale {scale}, which is not running")
        return self._scale

    async def on_scale(self, state: ScaleState) -> None:
        if state.kind == "recover":
            await self._recovery_phase(state)
        elif state.kind == "matchers":
            if state.phase == "start" and (self._scale is None or self._scale.state.id < state.id):
                self._begin(state)
                await self.resolve(set(state.old) | set(state.new))
                await self._config()
            elif state.phase == "aborted" and self._scale and self._scale.state.id == state.id:
                current = max((v for v in self.slices if v < state.view), default=None)
                self._drop_slices(lambda v: v == current)
                self._end()
                self._tidy()
        elif state.kind == "exit_points" and state.phase == "start":
            await self.resolve(state.new)
        elif state.kind == "exit_points":
            self._decide_exit_points(state)
        if state.idle:
            if self._scale is None or self._scale.state.id <= state.id:
                self._release_heap()  # (a scale that failed, or a recovery: no `_end` here)
            await self._config()

    async def _in_background(self, work: Callable[..., None], *args: Any) -> None:
        """Work of a matcher alone in its process with nothing to match yet (a new member
        building its slice), in a thread of the lowest priority: on a machine the operators
        share, the matching and the commits of the current view go first (two new matchers
        building 34,000 records each at once paused notifications for 75-150 ms on 2 cores).
        Not where anything else matches or commits in the process (a matcher in both views,
        the broker's own operators): its loop would wait for the GIL that thread holds."""
        if self._background is None:
            self._background = ThreadPoolExecutor(1, "tidings-build", _lowest_priority)
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(self._background, functools.partial(work, *args))

    def _begin(self, state: ScaleState) -> None:
        """A scale or recovery starts (and ends any it supersedes). A member of the new view
        holds the garbage collector until its new slice is ready (`heap.hold_collections`)."""
        self._end()
        self.slices.pop(state.view, None)  # (an aborted scale's, whose end was not seen)
        self._shrink_now()
        self._scale = _MatcherScale(state)
        if self.id in state.new:
            heap.hold_collections()
            self._holding = True

    def _end(self) -> None:
        if self._scale is not None:
            self._scale.arrived.set()  # (a `_grow` waiting for state sees the end)
        self._scale = None
        self._release_heap()

    def _release_heap(self) -> None:
        if self._holding:
            self._holding = False
            heap.release_collections()

    async def stop(self, crash: bool = False) -> None:
        try:
            await super().stop(crash)
        finally:
            self._release_heap()
            if self._background is not None:
                self._background.shutdown(wait=False, cancel_futures=True)

    async def _recovery_phase(self, state: ScaleState) -> None:
        if state.phase == "start" and (self._scale is None or self._scale.state.id < state.id):
            self._begin(state)
            lost = set(state.lost)
            await self.resolve(m for m in dict.fromkeys([*state.old, *state.new]) if m not in lost)
            await self._config()
        elif state.phase == "change" and self.id in state.new:
            # the new view alone from now on; the exit points of the new view too
            self._drop_slices(lambda v: v == state.view)
            self._tidy()
            self._default_exit_points = Selector(state.ep_view, tuple(state.exit_points))
            self._ep_scale = None
            await self.resolve(state.exit_points)
            for gone in state.lost:
                self.out.drop(gone)
            self._end()
            await self.coordinator.arrive(state.id, "adopted", self.id)

    def _state_senders(self, state: ScaleState, config: ClusterConfig) -> set[str]:
        """Whose AddMatcherState a new matcher waits for: every old matcher; in a recovery,
        the surviving ones and every access point (for the lost ones' share)."""
        if state.kind != "recover":
            return set(state.old)
        return (set(state.old) | set(config.access_points)) - set(state.lost)

    async def _start_scale(self, message: wire.StartScale) -> None:
        scale = await self._scale_when_known(message.scale)
        if scale is None:
            return
        scale.starts.add(message.ap)
        if scale.sent or not await self._access_points(scale) <= scale.starts:
            return
        scale.sent = True
        state = scale.state
        await self.resolve(state.new)  # the watch that also does it may not have run yet
        if self.id in state.old:  # (no subscription changes during a scale: a snapshot)
            current = max(v for v in self.slices if v < state.view)
            records = list(self.slices[current].records.values())
            self.spawn(self._send_state(scale, records), "state")
        elif self.id not in state.new:
            await self._ready(scale)

    async def _send_state(
        self, scale: _MatcherScale, records: list[wire.SubscriptionRecord]
    ) -> None:
        """Repartition the snapshot by the new selector and send each member its share: a
        step of `SPLIT_STEP` records between the inbox loop's batches, and each chunk sent
        as soon as it is full. (At once in the loop, the 66,000 records a 1 -> 3 scale-out
        sends held it for 67 ms, a pause of every notification; in a thread, the thread took
        the GIL at each of the loop's releases, its batches took three times as long, and
        the first chunk left 77 ms after StartScale.)"""
        state = scale.state
        new = Selector(state.view, tuple(state.new))
        shares: dict[str, list[wire.SubscriptionRecord]] = {m: [] for m in new.members}
        sent = dict.fromkeys(new.members, 0)
        for start in range(0, len(records), SPLIT_STEP):
            await asyncio.sleep(0)  # (the spawner's turn goes on first)
            if self._scale is not scale:
                return  # ended meanwhile: nothing more goes out
            for record in records[start : start + SPLIT_STEP]:
                shares[new.of(record.id)].append(record)
            self._send_chunks(scale, shares, sent, last=False)
        await asyncio.sleep(0)
        if self._scale is not scale:
            return
        self._send_chunks(scale, shares, sent, last=True)
        self.count("state_records_sent", len(records) - len(shares.get(self.id, ())))
        if self._grows(scale):
            scale.own, scale.moved = await asyncio.to_thread(_own_and_moved, shares, self.id)
            if self._scale is not scale:
                return
            scale.senders.add(self.id)
            self.spawn(self._grow(scale), "grow")
        elif self.id in shares:
            await self._received(scale, self.id, shares[self.id], last=True)
        if self.id not in state.new:
            await self._ready(scale)

    def _send_chunks(
        self,
        scale: _MatcherScale,
        shares: dict[str, list[wire.SubscriptionRecord]],
        sent: dict[str, int],
        last: bool,
    ) -> None:
        """The other members' full chunks not sent yet; with `last`, the rest too, ending
        with a chunk marked last (an empty share is news too)."""
        state = scale.state
        for member, share in shares.items():
            if member == self.id:
                continue
            while len(share) - sent[member] >= wire.STATE_CHUNK or last:
                chunk = share[sent[member] : sent[member] + wire.STATE_CHUNK]
                sent[member] += len(chunk)
                done = last and sent[member] == len(share)
                message = wire.AddMatcherState(state.id, state.view, self.id, chunk, done)
                self.out.send_frame(member, wire.encode(message))
                if done:
                    break

    async def _scale_when_known(self, scale_id: int) -> _MatcherScale | None:
        """A protocol message may overtake the coordinator's watch: read the scale then.
        None for a message of a scale that has ended since (aborted or failed)."""
        if self._scale is None or self._scale.state.id != scale_id:
            state = await self.coordinator.scale()
            if state is None or state.id < scale_id:
                raise RuntimeError(f"{self.id}: scale {scale_id} is unknown to the coordinator")
            if state.id > scale_id or state.idle:
                self.count("messages_of_ended_scales")
                return None
            await self.on_scale(state)
        return self._scale_of(scale_id)

    async def _add_state(self, message: wire.AddMatcherState) -> None:
        scale = await self._scale_when_known(message.scale)
        if scale is None:
            return
        await self._received(scale, message.sender, message.records, message.last)

    async def _received(
        self, scale: _MatcherScale, sender: str, records: list[wire.SubscriptionRecord], last: bool
    ) -> None:
        scale.received.extend(records)
        scale.arrived.set()
        if last:  # (a sender's chunks come in order)
            scale.senders.add(sender)
            await self._build_when_complete(scale)

    def _grows(self, scale: _MatcherScale) -> bool:
        state = scale.state
        return state.kind == "matchers" and self.id in state.old and self.id in state.new

    async def _build_when_complete(self, scale: _MatcherScale) -> None:
        if self._grows(scale):
            return  # (`_grow` adds what comes)
        senders = self._state_senders(scale.state, await self._config())
        if senders <= scale.senders and self._building is None and not scale.ready:
            records, scale.received = scale.received, []
            self._building = self.spawn(self._build(scale, records), "build")

    async def _build(self, scale: _MatcherScale, records: list[wire.SubscriptionRecord]) -> None:
        """The new view's index, built beside the inbox loop: the current view goes on
        matching meanwhile (nothing of the new view comes before this one reports ready)."""
        state = scale.state
        piece = Slice(Selector(state.view, tuple(state.new)))
        try:
            if self.id in state.old or not self.alone:  # (matching goes on in this process)
                await asyncio.to_thread(_built, piece, records)
            else:
                await self._in_background(_built, piece, records)
        finally:
            self._building = None
        await self._built_for(scale, piece, len(piece.records))

    async def _grow(self, scale: _MatcherScale) -> None:
        """The new view's slice on the index this matcher has, for a matcher in both views:
        what moves away is left out of the new view's answers (and leaves the index after
        the change, `_tidy`); what comes from the others goes into the index a chunk per
        loop step (`GROW_CHUNK`), left out of the old view's answers. Building a
        second index in a thread instead took the inbox loop's turns while it matched:
        0.35 s for the 34,000 records of a 1 -> 3 scale-out, 0.83 s for the 106,000 of the
        3 -> 1 scale-in, and notifications paused for 120-170 ms."""
        assert scale.own is not None
        state = scale.state
        senders = self._state_senders(state, await self._config())
        current = self.slices[max(v for v in self.slices if v < state.view)]
        own = scale.own  # (made beside the loop, as `moved`: 30-60 ms of set operations)
        foreign = [*scale.moved, *(i for i in current.foreign if i not in own)]
        piece = Slice(Selector(state.view, tuple(state.new)), own, current.index, foreign)
        received = yielded = 0
        while self._scale is scale:
            if scale.received and yielded < GROW_YIELDS and self.last_batch >= GROW_BACKLOG:
                yielded += 1  # publications wait (the last batch was large): theirs first
                await asyncio.sleep(0)
            elif scale.received:
                yielded = 0
                chunk = scale.received[:GROW_CHUNK]
                del scale.received[:GROW_CHUNK]
                piece.add(chunk)
                ids = [r.id for r in chunk]
                for other in self.slices.values():  # (by slot: once they have one)
                    if other.index is piece.index:
                        other.foreign.update(ids)
                received += len(chunk)
                await asyncio.sleep(0)  # the inbox loop's turn
            elif senders <= scale.senders:
                await self._built_for(scale, piece, received)
                return
            else:
                scale.arrived.clear()
                await scale.arrived.wait()

    async def _built_for(self, scale: _MatcherScale, piece: Slice, received: int) -> None:
        if self._scale is not scale:  # ended meanwhile; a later one may wait for its turn
            if self._scale is not None:
                await self._build_when_complete(self._scale)
            return
        self.slices[scale.state.view] = piece
        self._release_heap()
        self.count("state_records_received", received)
        await self._ready(scale)

    def _tidy(self) -> None:
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
        self._tidy()  # (another slice's turn)

    def _shrink_now(self) -> None:
        """Before a scale starts, whose slices may share an index: the chunked removal of
        foreign ids stops (`_shrink` must not remove what a new slice re-adds). What is left
        of it stays in the index, left out of the current slice's answers, and the new
        view's slice carries it as foreign too (`_grow`): it leaves after that scale's
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

    async def _ready(self, scale: _MatcherScale) -> None:
        if not scale.ready:
            scale.ready = True
            await self.coordinator.arrive(scale.state.id, "ready", self.id)

    def _forward_change(self, message: wire.ChangeMatcherOnExitPoint) -> None:
        forwarded = wire.ChangeMatcherOnExitPoint(
            message.ap, message.scale, message.view, self.id, message.last_seq
        )
        assert self.config is not None
        for ep in self.config.exit_points.members:
            self.out.send(ep, forwarded)

    async def _change(self, message: wire.ChangeMatcher) -> None:
        scale = self._scale_of(message.scale)
        scale.changes.add(message.ap)
        if not await self._access_points(scale) <= scale.changes:
            return
        view = scale.state.view  # every access point sends the new view from now on
        self._drop_slices(lambda v: v >= view)
        self._tidy()
        for gone in set(scale.state.old) - set(scale.state.new) - {self.id}:
            self.out.drop(gone)
        self._end()
        # beside the inbox loop: the publications behind this message need not wait for
        # ZooKeeper (25-60 ms on a loaded machine)
        self.spawn(self.coordinator.arrive(message.scale, "done", self.id), "done")

    async def _access_points(self, scale: _MatcherScale) -> frozenset[str]:
        """The access points whose StartScale and ChangeMatcher a scale waits for, read once
        per scale: the list changes only by a scale of its own (an access point's) or at a
        recovery's `change`, never in the middle of this one, so no protocol message waits
        for ZooKeeper again. Lost ones (a recovery's) are left out."""
        if scale.aps is None:
            config = await self._config()
            scale.aps = frozenset(config.access_points) - frozenset(scale.state.lost)
        return scale.aps

    def _drop_slices(self, keep: Callable[[int], bool]) -> None:
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
        config = await self._config()  # also the outcome of the scale before this one
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
