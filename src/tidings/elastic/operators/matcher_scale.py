"""A matcher's part in a matcher scale or a recovery (`MatcherScale`, which the
`MatcherOperator` composes): the state machine apart from the matching loop.

An old matcher snapshots its slice once every access point's StartScale has come, and sends
each member of the new view its share (`AddMatcherState`, in chunks); a new matcher builds
its slice from what comes, beside the inbox loop, and reports `ready`; a matcher in both
views grows the index it has instead. Once every access point's ChangeMatcher has come, the
new view alone is matched and the matcher reports `done`. A recovery is the same transfer,
with the lost matchers' share sent by the access points, and ends at its `change` phase
(`adopted`). Meanwhile the garbage collector is held by a member of the new view
(`heap.hold_collections`), until its new slice is ready.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from tidings import heap
from tidings.elastic.coordination.records import ClusterConfig, ScaleState
from tidings.elastic.operators.slices import Slice, built
from tidings.elastic.protocol import wire
from tidings.elastic.protocol.partition import Selector

if TYPE_CHECKING:
    from tidings.elastic.operators.matcher import MatcherOperator

SPLIT_STEP = 8192  # records of a snapshot repartitioned per loop step (about 3 ms)
GROW_CHUNK = 1024  # records a matcher in both views adds to its index per loop step (4 ms)
GROW_BACKLOG = 32  # an inbox batch this large: publications wait, and a chunk gives way ...
GROW_YIELDS = 1  # ... for one more inbox batch: under a backlog, a chunk every two batches


@dataclass
class ScaleProgress:
    """One matcher scale (or recovery) as this matcher follows it."""

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


class MatcherScale:
    """The scale state machine of one matcher: what its scale watch and the scale's messages
    (StartScale, AddMatcherState, ChangeMatcher) do to its slices."""

    def __init__(self, matcher: MatcherOperator) -> None:
        self.matcher = matcher
        self.current: ScaleProgress | None = None  # the scale in progress, if any
        self._building: asyncio.Task[None] | None = None  # the new view's index
        self._holding = False  # the garbage collector, until the new slice is ready
        self._background: ThreadPoolExecutor | None = None  # see `_in_background`

    # ------------------------------------------------------------ the scale watch

    async def on_scale(self, state: ScaleState) -> None:
        """A phase of a matcher scale or a recovery, told by the coordinator."""
        m = self.matcher
        if state.kind == "recover":
            await self._recovery_phase(state)
        elif state.phase == "start" and (self.current is None or self.current.state.id < state.id):
            self._begin(state)
            await m.resolve(set(state.old) | set(state.new))
            await m.fresh_config()
        elif state.phase == "aborted" and self.current and self.current.state.id == state.id:
            current = max((v for v in m.slices if v < state.view), default=None)
            m.drop_slices(lambda v: v == current)
            self._end()
            m.tidy()

    def settled(self, state: ScaleState) -> None:
        """A scale of any kind reached its last phase: the collector's hold ends, unless a
        later scale holds it (a scale that failed, or a recovery: no `_end` here)."""
        if self.current is None or self.current.state.id <= state.id:
            self.release_heap()

    def _begin(self, state: ScaleState) -> None:
        """A scale or recovery starts (and ends any it supersedes). A member of the new view
        holds the garbage collector until its new slice is ready (`heap.hold_collections`)."""
        self._end()
        self.matcher.slices.pop(state.view, None)  # (an aborted scale's, whose end was not seen)
        self.matcher.shrink_now()
        self.current = ScaleProgress(state)
        if self.matcher.id in state.new:
            heap.hold_collections()
            self._holding = True

    def _end(self) -> None:
        if self.current is not None:
            self.current.arrived.set()  # (a `_grow` waiting for state sees the end)
        self.current = None
        self.release_heap()

    def release_heap(self) -> None:
        if self._holding:
            self._holding = False
            heap.release_collections()

    def close(self) -> None:
        """The matcher stops: the collector's hold ends, the background thread goes."""
        self.release_heap()
        if self._background is not None:
            self._background.shutdown(wait=False, cancel_futures=True)

    async def _recovery_phase(self, state: ScaleState) -> None:
        m = self.matcher
        if state.phase == "start" and (self.current is None or self.current.state.id < state.id):
            self._begin(state)
            lost = set(state.lost)
            await m.resolve(x for x in dict.fromkeys([*state.old, *state.new]) if x not in lost)
            await m.fresh_config()
        elif state.phase == "change" and m.id in state.new:
            # the new view alone from now on; the exit points of the new view too
            m.drop_slices(lambda v: v == state.view)
            m.tidy()
            await m.adopt_exit_points(Selector(state.ep_view, tuple(state.exit_points)))
            for gone in state.lost:
                m.out.drop(gone)
            self._end()
            await m.coordinator.arrive(state.id, "adopted", m.id)

    def _scale_of(self, scale: int) -> ScaleProgress:
        if self.current is None or self.current.state.id != scale:
            raise RuntimeError(
                f"{self.matcher.id}: a message of scale {scale}, which is not running"
            )
        return self.current

    async def _scale_when_known(self, scale_id: int) -> ScaleProgress | None:
        """A protocol message may overtake the coordinator's watch: read the scale then.
        None for a message of a scale that has ended since (aborted or failed)."""
        if self.current is None or self.current.state.id != scale_id:
            state = await self.matcher.coordinator.scale()
            if state is None or state.id < scale_id:
                raise RuntimeError(
                    f"{self.matcher.id}: scale {scale_id} is unknown to the coordinator"
                )
            if state.id > scale_id or state.idle:
                self.matcher.count("messages_of_ended_scales")
                return None
            await self.matcher.on_scale(state)
        return self._scale_of(scale_id)

    async def _access_points(self, scale: ScaleProgress) -> frozenset[str]:
        """The access points whose StartScale and ChangeMatcher a scale waits for, read once
        per scale: the list changes only by a scale of its own (an access point's) or at a
        recovery's `change`, never in the middle of this one, so no protocol message waits
        for ZooKeeper again. Lost ones (a recovery's) are left out."""
        if scale.aps is None:
            config = await self.matcher.fresh_config()
            scale.aps = frozenset(config.access_points) - frozenset(scale.state.lost)
        return scale.aps

    def _state_senders(self, state: ScaleState, config: ClusterConfig) -> set[str]:
        """Whose AddMatcherState a new matcher waits for: every old matcher; in a recovery,
        the surviving ones and every access point (for the lost ones' share)."""
        if state.kind != "recover":
            return set(state.old)
        return (set(state.old) | set(config.access_points)) - set(state.lost)

    # ------------------------------------------------------------ an old matcher's state

    async def start(self, message: wire.StartScale) -> None:
        """An access point's StartScale; once every one's has come, an old matcher's state
        goes out (a snapshot: no subscription changes during a scale)."""
        scale = await self._scale_when_known(message.scale)
        if scale is None:
            return
        scale.starts.add(message.ap)
        if scale.sent or not await self._access_points(scale) <= scale.starts:
            return
        scale.sent = True
        state, m = scale.state, self.matcher
        await m.resolve(state.new)  # the watch that also does it may not have run yet
        if m.id in state.old:
            current = max(v for v in m.slices if v < state.view)
            records = list(m.slices[current].records.values())
            m.spawn(self._send_state(scale, records), "state")
        elif m.id not in state.new:
            await self._ready(scale)

    async def _send_state(
        self, scale: ScaleProgress, records: list[wire.SubscriptionRecord]
    ) -> None:
        """Repartition the snapshot by the new selector and send each member its share: a
        step of `SPLIT_STEP` records between the inbox loop's batches, and each chunk sent
        as soon as it is full. (At once in the loop, the 66,000 records a 1 -> 3 scale-out
        sends held it for 67 ms, a pause of every notification; in a thread, the thread took
        the GIL at each of the loop's releases, its batches took three times as long, and
        the first chunk left 77 ms after StartScale.)"""
        state, me = scale.state, self.matcher.id
        new = Selector(state.view, tuple(state.new))
        shares: dict[str, list[wire.SubscriptionRecord]] = {m: [] for m in new.members}
        sent = dict.fromkeys(new.members, 0)
        for start in range(0, len(records), SPLIT_STEP):
            await asyncio.sleep(0)  # (the spawner's turn goes on first)
            if self.current is not scale:
                return  # ended meanwhile: nothing more goes out
            for record in records[start : start + SPLIT_STEP]:
                shares[new.of(record.id)].append(record)
            self._send_chunks(scale, shares, sent, last=False)
        await asyncio.sleep(0)
        if self.current is not scale:
            return
        self._send_chunks(scale, shares, sent, last=True)
        self.matcher.count("state_records_sent", len(records) - len(shares.get(me, ())))
        if self._grows(scale):
            scale.own, scale.moved = await asyncio.to_thread(_own_and_moved, shares, me)
            if self.current is not scale:
                return
            scale.senders.add(me)
            self.matcher.spawn(self._grow(scale), "grow")
        elif me in shares:
            await self._received(scale, me, shares[me], last=True)
        if me not in state.new:
            await self._ready(scale)

    def _send_chunks(
        self,
        scale: ScaleProgress,
        shares: dict[str, list[wire.SubscriptionRecord]],
        sent: dict[str, int],
        last: bool,
    ) -> None:
        """The other members' full chunks not sent yet; with `last`, the rest too, ending
        with a chunk marked last (an empty share is news too)."""
        state, me = scale.state, self.matcher.id
        for member, share in shares.items():
            if member == me:
                continue
            while len(share) - sent[member] >= wire.STATE_CHUNK or last:
                chunk = share[sent[member] : sent[member] + wire.STATE_CHUNK]
                sent[member] += len(chunk)
                done = last and sent[member] == len(share)
                message = wire.AddMatcherState(state.id, state.view, me, chunk, done)
                self.matcher.out.send_frame(member, wire.encode(message))
                if done:
                    break

    # ------------------------------------------------------------ a new matcher's state

    async def add_state(self, message: wire.AddMatcherState) -> None:
        scale = await self._scale_when_known(message.scale)
        if scale is None:
            return
        await self._received(scale, message.sender, message.records, message.last)

    async def _received(
        self, scale: ScaleProgress, sender: str, records: list[wire.SubscriptionRecord], last: bool
    ) -> None:
        scale.received.extend(records)
        scale.arrived.set()
        if last:  # (a sender's chunks come in order)
            scale.senders.add(sender)
            await self._build_when_complete(scale)

    def _grows(self, scale: ScaleProgress) -> bool:
        state, me = scale.state, self.matcher.id
        return state.kind == "matchers" and me in state.old and me in state.new

    async def _build_when_complete(self, scale: ScaleProgress) -> None:
        if self._grows(scale):
            return  # (`_grow` adds what comes)
        senders = self._state_senders(scale.state, await self.matcher.fresh_config())
        if senders <= scale.senders and self._building is None and not scale.ready:
            records, scale.received = scale.received, []
            self._building = self.matcher.spawn(self._build(scale, records), "build")

    async def _build(self, scale: ScaleProgress, records: list[wire.SubscriptionRecord]) -> None:
        """The new view's index, built beside the inbox loop: the current view goes on
        matching meanwhile (nothing of the new view comes before this one reports ready)."""
        state = scale.state
        piece = Slice(Selector(state.view, tuple(state.new)))
        try:
            if self.matcher.id in state.old or not self.matcher.alone:  # (matching goes on)
                await asyncio.to_thread(built, piece, records)
            else:
                await self._in_background(built, piece, records)
        finally:
            self._building = None
        await self._built_for(scale, piece, len(piece.records))

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

    async def _grow(self, scale: ScaleProgress) -> None:
        """The new view's slice on the index this matcher has, for a matcher in both views:
        what moves away is left out of the new view's answers (and leaves the index after
        the change, `MatcherOperator.tidy`); what comes from the others goes into the index
        a chunk per loop step (`GROW_CHUNK`), left out of the old view's answers. Building a
        second index in a thread instead took the inbox loop's turns while it matched:
        0.35 s for the 34,000 records of a 1 -> 3 scale-out, 0.83 s for the 106,000 of the
        3 -> 1 scale-in, and notifications paused for 120-170 ms."""
        assert scale.own is not None
        state, m = scale.state, self.matcher
        senders = self._state_senders(state, await m.fresh_config())
        current = m.slices[max(v for v in m.slices if v < state.view)]
        own = scale.own  # (made beside the loop, as `moved`: 30-60 ms of set operations)
        foreign = [*scale.moved, *(i for i in current.foreign if i not in own)]
        piece = Slice(Selector(state.view, tuple(state.new)), own, current.index, foreign)
        received = yielded = 0
        while self.current is scale:
            if scale.received and yielded < GROW_YIELDS and m.last_batch >= GROW_BACKLOG:
                yielded += 1  # publications wait (the last batch was large): theirs first
                await asyncio.sleep(0)
            elif scale.received:
                yielded = 0
                chunk = scale.received[:GROW_CHUNK]
                del scale.received[:GROW_CHUNK]
                piece.add(chunk)
                ids = [r.id for r in chunk]
                for other in m.slices.values():  # (by slot: once they have one)
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

    async def _built_for(self, scale: ScaleProgress, piece: Slice, received: int) -> None:
        if self.current is not scale:  # ended meanwhile; a later one may wait for its turn
            if self.current is not None:
                await self._build_when_complete(self.current)
            return
        self.matcher.slices[scale.state.view] = piece
        self.release_heap()
        self.matcher.count("state_records_received", received)
        await self._ready(scale)

    async def _ready(self, scale: ScaleProgress) -> None:
        if not scale.ready:
            scale.ready = True
            await self.matcher.coordinator.arrive(scale.state.id, "ready", self.matcher.id)

    # ------------------------------------------------------------ the change

    async def change(self, message: wire.ChangeMatcher) -> None:
        """An access point's ChangeMatcher; once every one's has come, every access point
        sends under the new view: the older slices go, and the matcher reports `done`."""
        scale = self._scale_of(message.scale)
        scale.changes.add(message.ap)
        if not await self._access_points(scale) <= scale.changes:
            return
        m, view = self.matcher, scale.state.view
        m.drop_slices(lambda v: v >= view)
        m.tidy()
        for gone in set(scale.state.old) - set(scale.state.new) - {m.id}:
            m.out.drop(gone)
        self._end()
        # beside the inbox loop: the publications behind this message need not wait for
        # ZooKeeper (25-60 ms on a loaded machine)
        m.spawn(m.coordinator.arrive(message.scale, "done", m.id), "done")
