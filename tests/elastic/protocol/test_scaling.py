"""Scaling under a constant stream of publications and subscription changes loses nothing,
duplicates nothing and keeps each publisher's order at every subscriber."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from typing import ClassVar

from tests.elastic.conftest import Recorder
from tests.elastic.stream import (
    SilentMatcher,
    Stream,
    check,
    held_subscriptions,
    idle_matcher,
    stable_and_live,
)

from tidings.elastic.hosting.deployment import Deployment
from tidings.elastic.operators.exit_point import ExitPointOperator
from tidings.elastic.operators.matcher import MatcherOperator
from tidings.elastic.operators.matcher_scale import MatcherScale, ScaleProgress
from tidings.elastic.operators.slices import Slice
from tidings.elastic.protocol import wire
from tidings.matching.engine import Event, Matcher
from tidings.model import Op, Predicate, Publication, Subscription


class GatedScale(MatcherScale):
    async def _ready(self, scale: ScaleProgress) -> None:
        GatedMatcher.reached.set()
        await GatedMatcher.gate.wait()
        await super()._ready(scale)


class GatedMatcher(MatcherOperator):
    """Holds its `ready` until the test opens the gate: the scale is then certainly in the
    middle of its state transfer while the stream publishes and subscriptions change."""

    reached = asyncio.Event()
    gate = asyncio.Event()
    Scaling = GatedScale


async def test_scaling_matchers_and_exit_points_out_and_in_under_a_stream_loses_nothing(
    zookeeper: str,
) -> None:
    recorder = Recorder()
    GatedMatcher.reached, GatedMatcher.gate = asyncio.Event(), asyncio.Event()
    async with Deployment(zookeeper, recorder.sink, matcher_class=GatedMatcher) as deployment:
        stream = Stream(deployment)
        stream.subscribe_stable()
        shapes: list[tuple[int, int]] = []
        during: list[int] = []

        async def open_gate_after_traffic() -> None:
            await GatedMatcher.reached.wait()
            before, changes = sum(stream.published.values()), stream.changes
            while sum(stream.published.values()) < before + 30 or stream.changes < changes + 5:
                await stream.progress.wait()
                stream.progress.clear()
            during.append(sum(stream.published.values()) - before)
            GatedMatcher.gate.set()

        async def scaling() -> None:
            opener = asyncio.create_task(open_gate_after_traffic())
            for matchers, exit_points in ((3, None), (None, 2), (1, None), (None, 1)):
                reports = await deployment.scale(matchers=matchers, exit_points=exit_points)
                assert [r.outcome for r in reports] == ["done"]
                shapes.append((len(deployment.matchers), len(deployment.exit_points)))
            await opener

        await stream.run(scaling)
        assert shapes == [(3, 1), (3, 2), (1, 2), (1, 1)]
        assert during and during[0] >= 30  # published while the first scale was under way
        assert deployment.ap.counters["subscriptions_buffered"] >= 5
        check(stream, recorder.messages)
        assert held_subscriptions(deployment) == stable_and_live(stream)


class StallingScale(MatcherScale):
    def __init__(self, matcher: MatcherOperator) -> None:
        super().__init__(matcher)
        self.has_state = asyncio.Event()

    async def add_state(self, message: wire.AddMatcherState) -> None:
        self.has_state.set()


class StallingMatcher(MatcherOperator):
    """A new matcher that takes its state and never reports ready, until it dies."""

    Scaling = StallingScale


async def test_a_matcher_dying_in_the_middle_of_a_scale_out_aborts_it_and_loses_nothing(
    zookeeper: str,
) -> None:
    recorder = Recorder()
    async with Deployment(zookeeper, recorder.sink) as deployment:
        stalling = await idle_matcher(deployment, StallingMatcher, "stalling")
        stream = Stream(deployment)
        stream.subscribe_stable()
        outcomes: list[str] = []

        async def scaling() -> None:
            async def kill_when_it_has_state() -> None:
                assert isinstance(stalling.scaling, StallingScale)
                await stalling.scaling.has_state.wait()
                await stalling.stop(crash=True)

            killer = asyncio.create_task(kill_when_it_has_state())
            reports = await deployment.scale(matchers=3)  # the idle `stalling` is taken first
            await killer
            await stalling.coordinator.close()
            outcomes.append(reports[0].outcome)
            # the deployment goes on, and a later scale succeeds
            outcomes.append((await deployment.scale(matchers=3))[0].outcome)
            outcomes.append((await deployment.scale(matchers=1))[0].outcome)

        await stream.run(scaling)
        assert outcomes == ["aborted", "done", "done"]
        check(stream, recorder.messages)
        assert held_subscriptions(deployment) == stable_and_live(stream)


class HoldingExitPoint(ExitPointOperator):
    """An old exit point that does not report `drained` until the test opens the gate (the
    scale is then certainly undecided); a new one that tells when partials after the cut
    have come to it."""

    gate = asyncio.Event()
    after_cut = asyncio.Event()

    async def _check_drained(self) -> None:
        if HoldingExitPoint.gate.is_set():
            await super()._check_drained()

    def _collect(self, message: wire.Partials) -> None:
        super()._collect(message)
        if any(self.id not in s.old for s in self._scales.values()) and self.backlog() >= 20:
            HoldingExitPoint.after_cut.set()


async def test_a_new_exit_point_dying_in_the_middle_of_a_scale_rolls_back_and_loses_nothing(
    zookeeper: str,
) -> None:
    recorder = Recorder()
    HoldingExitPoint.gate, HoldingExitPoint.after_cut = asyncio.Event(), asyncio.Event()
    async with Deployment(
        zookeeper, recorder.sink, matchers=2, exit_point_class=HoldingExitPoint
    ) as deployment:
        stream = Stream(deployment)
        stream.subscribe_stable()
        outcomes: list[str] = []

        async def scaling() -> None:
            (old,) = deployment.exit_points
            scale = asyncio.create_task(deployment.scale(exit_points=2))
            await HoldingExitPoint.after_cut.wait()  # both views hold publications after the cut
            (new,) = set(deployment.exit_points) - {old}
            dying = deployment.exit_points.pop(new)
            await dying.stop(crash=True)
            await dying.coordinator.close()
            outcomes.append((await scale)[0].outcome)
            HoldingExitPoint.gate.set()
            # the deployment goes on, and later scales succeed
            outcomes.append((await deployment.scale(exit_points=2))[0].outcome)
            outcomes.append((await deployment.scale(exit_points=1))[0].outcome)

        await asyncio.wait_for(stream.run(scaling), 120)  # a lost publication: no answer
        assert outcomes == ["aborted", "done", "done"]
        assert deployment.ap.counters.get("unexpected_commits", 0) == 0
        check(stream, recorder.messages)


async def test_a_matcher_silent_after_change_ends_the_scale_failed_at_the_timeout(
    zookeeper: str,
) -> None:
    async with Deployment(zookeeper, Recorder().sink) as deployment:
        silent = await idle_matcher(deployment, SilentMatcher, "silent")
        deployment.scaler.after_change_timeout_s = 0.5
        (report,) = await deployment.scale(matchers=2)
        assert (report.outcome, "no answer" in report.reason) == ("failed", True)
        assert (await deployment.status())["scale"]["phase"] == "failed"
        await silent.stop()
        await silent.coordinator.close()


class ChunkCountingScale(MatcherScale):
    async def add_state(self, message: wire.AddMatcherState) -> None:
        ChunkCountingMatcher.chunks.setdefault(self.matcher.id, []).append(
            (len(message.records), message.last)
        )
        await super().add_state(message)

    async def _built_for(self, scale: ScaleProgress, piece: Slice, received: int) -> None:
        if ChunkCountingMatcher.hold is not None and received:  # a share went into its index
            ChunkCountingMatcher.holding.set()
            await ChunkCountingMatcher.hold.wait()
        await super()._built_for(scale, piece, received)


class ChunkCountingMatcher(MatcherOperator):
    """Records the size and `last` flag of every chunk of state it receives; holds the
    removal of moved subscriptions from a kept index while `shrink` is off, and a slice
    grown by others' shares until `hold` is set."""

    chunks: ClassVar[dict[str, list[tuple[int, bool]]]] = {}
    shrink = True
    hold: ClassVar[asyncio.Event | None] = None  # set: the new view's slice may be used
    holding = asyncio.Event()

    Scaling = ChunkCountingScale

    def tidy(self) -> None:
        if ChunkCountingMatcher.shrink:
            super().tidy()


def ranges(n: int) -> list[Subscription]:
    return [
        Subscription(
            f"s{i}",
            f"u{i % 50}",
            "content",
            (),
            (Predicate("x", Op.GE, i % 100), Predicate("x", Op.LT, i % 100 + 5)),
        )
        for i in range(n)
    ]


async def delivered_as_one_matcher(
    deployment: Deployment, recorder: Recorder, subs: list[Subscription], tag: str
) -> None:
    recorder.messages.clear()
    pubs = [Publication(f"{tag}{x}", 0.0, {}, (), {"x": x}) for x in range(0, 104, 3)]
    await deployment.publish(pubs)
    want = Matcher()
    want.add_contents((s.id, s.subscriber_id, s.predicates) for s in subs)
    expected = {
        (who, p.id, tuple(sorted(ids)))
        for p in pubs
        for who, ids in want.match(Event((), p.attributes)).items()
    }
    got = {(m.subscriber_id, m.publication_id, m.subscription_ids) for m in recorder.messages}
    assert got == expected and len(recorder.messages) == len(expected)


@contextlib.asynccontextmanager
async def one_matcher_with(
    zookeeper: str, recorder: Recorder, n: int
) -> AsyncIterator[tuple[Deployment, list[Subscription], MatcherOperator, Matcher]]:
    """A deployment of one `ChunkCountingMatcher` holding `n` subscriptions (the moved ones
    do not leave its index until `shrink` is set): the deployment, the subscriptions, the
    matcher and its index."""
    ChunkCountingMatcher.chunks, ChunkCountingMatcher.shrink = {}, False
    ChunkCountingMatcher.hold = None
    async with Deployment(
        zookeeper, recorder.sink, matcher_class=ChunkCountingMatcher
    ) as deployment:
        subs = ranges(n)
        for sub in subs:
            deployment.subscribe(sub)
        await deployment.publish([Publication("before", 0.0, {}, (), {"x": 1})])
        (stays,) = deployment.matchers.values()
        yield deployment, subs, stays, stays.slices[max(stays.slices)].index


async def back_to_one(
    deployment: Deployment,
    recorder: Recorder,
    subs: list[Subscription],
    stays: MatcherOperator,
    while_held: Callable[[], None],
) -> None:
    """Scale in to `stays`, which keeps its index and takes the others' shares into it:
    `while_held` checks the index before the switch, and the deliveries are a single
    matcher's during the scale (the old view's answers) and after it."""
    index = stays.slices[max(stays.slices)].index
    ChunkCountingMatcher.hold, ChunkCountingMatcher.holding = asyncio.Event(), asyncio.Event()
    scaling = asyncio.create_task(deployment.scale(matchers=1))
    await asyncio.wait_for(ChunkCountingMatcher.holding.wait(), 30)
    while_held()
    await delivered_as_one_matcher(deployment, recorder, subs, "during-")
    ChunkCountingMatcher.hold.set()
    (report,) = await scaling
    assert report.outcome == "done" and list(deployment.matchers) == [stays.id]
    piece = stays.slices[max(stays.slices)]
    assert piece.index is index and not piece.foreign  # each share in it, once
    assert len(index) == len(piece.records) == len(subs)
    await delivered_as_one_matcher(deployment, recorder, subs, "back-")


async def test_a_matcher_that_stays_in_a_scale_keeps_its_index_and_state_moves_in_chunks(
    zookeeper: str,
) -> None:
    recorder = Recorder()
    # each new member's share: more than a chunk
    async with one_matcher_with(zookeeper, recorder, 4 * wire.STATE_CHUNK) as (
        deployment,
        subs,
        stays,
        index,
    ):
        (report,) = await deployment.scale(matchers=3)
        assert report.outcome == "done"
        piece = stays.slices[max(stays.slices)]
        assert piece.index is index  # the same index, not one built again
        assert len(piece.foreign) == len(subs) - len(piece.records) > 0
        # the moved subscriptions, still in the index, are left out of its answers
        await delivered_as_one_matcher(deployment, recorder, subs, "held-")

        ChunkCountingMatcher.shrink = True
        stays.tidy()
        for _ in range(200):  # they leave the index a chunk per loop step
            if not piece.foreign:
                break
            await asyncio.sleep(0.01)
        assert not piece.foreign and len(index) == len(piece.records)
        await delivered_as_one_matcher(deployment, recorder, subs, "shed-")

        held = [set(op.slices[max(op.slices)].records) for op in deployment.matchers.values()]
        assert sum(map(len, held)) == len(subs) and set().union(*held) == {s.id for s in subs}
        for member, chunks in ChunkCountingMatcher.chunks.items():
            assert member != stays.id  # its own share is not sent to itself
            sizes, lasts = zip(*chunks, strict=True)
            assert max(sizes) <= wire.STATE_CHUNK and len(chunks) > 1
            assert lasts == (False,) * (len(chunks) - 1) + (True,)
            assert sum(sizes) == len(held[list(deployment.matchers).index(member)])

        # back to one: it keeps its index again and the others' shares go into it
        def every_share_in() -> None:  # before the switch: the old view's answers too
            assert len(index) == len(subs)

        await back_to_one(deployment, recorder, subs, stays, every_share_in)


async def test_a_scale_in_that_starts_before_the_moved_ids_left_the_index_takes_them_back(
    zookeeper: str,
) -> None:
    recorder = Recorder()
    async with one_matcher_with(zookeeper, recorder, 3 * wire.STATE_CHUNK) as (
        deployment,
        subs,
        stays,
        index,
    ):
        (report,) = await deployment.scale(matchers=3)
        assert report.outcome == "done"
        moved = set(stays.slices[max(stays.slices)].foreign)
        assert moved and len(index) == len(subs)  # none has left the index yet

        def still_left_out() -> None:  # still in the index, out of the old view's answers
            assert set(stays.slices[min(stays.slices)].foreign) >= moved

        await back_to_one(deployment, recorder, subs, stays, still_left_out)
