"""Single publishes that arrive in the same turn of the event loop are published as one
batch, each caller answered with its own publication's answer; what is a caller's own (a
refused topic, a dedup id) stays its own."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import AsyncIterator, Sequence
from pathlib import Path

import pytest
from tests.broker.test_operations import started

from tidings.broker import Broker, PublicationInput
from tidings.broker.combining import MOST, PublishCombiner
from tidings.broker.publishing import Published
from tidings.config import AccessSettings, load_settings
from tidings.errors import ErrorCode, TidingsError
from tidings.model import Publication


class Recorder:
    """A `publish_batch` that answers each publication with its data, and records the
    batches it was given (`fail`: raises that instead)."""

    def __init__(self, fail: BaseException | None = None) -> None:
        self.batches: list[tuple[list[object], str | None]] = []
        self.fail = fail

    async def __call__(self, items: Sequence[PublicationInput], key: str | None) -> list[Published]:
        self.batches.append(([i.data for i in items], key))
        await asyncio.sleep(0)  # (as a real batch waits for its commit)
        if self.fail is not None:
            raise self.fail
        return [Published(Publication(f"id-{i.data}", 0.0, i.data), 1) for i in items]


def allow_all(key: str | None, topics: Sequence[Sequence[str]]) -> None:
    return None


def refuse_secret(key: str | None, topics: Sequence[Sequence[str]]) -> None:
    if any("secret" in each for each in topics):
        raise TidingsError(ErrorCode.FORBIDDEN, resource="publishing to secret")


async def test_single_publishes_made_in_one_turn_are_published_as_one_batch() -> None:
    recorder = Recorder()
    combiner = PublishCombiner(recorder, allow_all)
    answers = await asyncio.gather(
        *(combiner.publish(PublicationInput(n, ("a",)), None) for n in range(5))
    )
    assert [a.publication.id for a in answers] == [f"id-{n}" for n in range(5)]
    assert recorder.batches == [([0, 1, 2, 3, 4], None)]


async def test_publishes_with_different_keys_are_published_in_batches_of_their_own() -> None:
    recorder = Recorder()
    combiner = PublishCombiner(recorder, allow_all)
    keys = ["k1", "k2", "k1", None]
    answers = await asyncio.gather(
        *(combiner.publish(PublicationInput(n), k) for n, k in enumerate(keys))
    )
    assert [a.publication.data for a in answers] == [0, 1, 2, 3]
    assert sorted(recorder.batches, key=str) == sorted(
        [([0, 2], "k1"), ([1], "k2"), ([3], None)], key=str
    )


async def test_publishes_in_later_turns_are_published_in_later_batches() -> None:
    recorder = Recorder()
    combiner = PublishCombiner(recorder, allow_all)
    await combiner.publish(PublicationInput(1), None)
    await combiner.publish(PublicationInput(2), None)
    assert recorder.batches == [([1], None), ([2], None)]


async def test_a_turn_with_more_than_a_batch_holds_starts_another() -> None:
    recorder = Recorder()
    combiner = PublishCombiner(recorder, allow_all)
    await asyncio.gather(*(combiner.publish(PublicationInput(n), None) for n in range(MOST + 3)))
    assert [len(items) for items, _ in recorder.batches] == [MOST, 3]


async def test_a_refused_topic_is_its_callers_alone() -> None:
    recorder = Recorder()
    combiner = PublishCombiner(recorder, refuse_secret)
    outcomes = await asyncio.gather(
        combiner.publish(PublicationInput(1, ("news",)), None),
        combiner.publish(PublicationInput(2, ("secret",)), None),
        combiner.publish(PublicationInput(3, ("news",)), None),
        return_exceptions=True,
    )
    assert isinstance(outcomes[1], TidingsError) and outcomes[1].code == ErrorCode.FORBIDDEN
    assert [o.publication.data for o in (outcomes[0], outcomes[2])] == [1, 3]  # type: ignore[union-attr]
    assert recorder.batches == [([1, 3], None)]


async def test_a_publication_with_a_dedup_id_is_published_alone() -> None:
    recorder = Recorder()
    combiner = PublishCombiner(recorder, allow_all)
    await asyncio.gather(
        combiner.publish(PublicationInput(1), None),
        combiner.publish(PublicationInput(2, dedup_id="d"), None),
        combiner.publish(PublicationInput(3), None),
    )
    assert sorted(recorder.batches, key=str) == sorted([([2], None), ([1, 3], None)], key=str)


async def test_a_failed_batch_fails_every_caller_in_it() -> None:
    recorder = Recorder(fail=TidingsError(ErrorCode.UNAVAILABLE, detail="the store is away"))
    combiner = PublishCombiner(recorder, allow_all)
    outcomes = await asyncio.gather(
        *(combiner.publish(PublicationInput(n), None) for n in range(3)),
        return_exceptions=True,
    )
    assert all(isinstance(o, TidingsError) and o.code == ErrorCode.UNAVAILABLE for o in outcomes)


async def test_a_caller_that_stops_waiting_leaves_the_others_answered() -> None:
    recorder = Recorder()
    combiner = PublishCombiner(recorder, allow_all)
    gone = asyncio.ensure_future(combiner.publish(PublicationInput(1), None))
    kept = asyncio.ensure_future(combiner.publish(PublicationInput(2), None))
    await asyncio.sleep(0)  # both have joined the turn's batch
    gone.cancel()
    assert (await kept).publication.data == 2
    assert recorder.batches == [([1, 2], None)]  # (published all the same)


async def test_closing_stops_the_batches_under_way_and_their_callers_hear_unavailable() -> None:
    started, never = asyncio.Event(), asyncio.Event()

    async def stuck(items: Sequence[PublicationInput], key: str | None) -> list[Published]:
        started.set()
        await never.wait()  # (a commit that does not come back)
        return []

    combiner = PublishCombiner(stuck, allow_all)
    callers = [asyncio.ensure_future(combiner.publish(PublicationInput(n), None)) for n in (1, 2)]
    await started.wait()
    await combiner.close()
    outcomes = await asyncio.gather(*callers, return_exceptions=True)
    assert all(isinstance(o, TidingsError) and o.status == 503 for o in outcomes)


async def test_no_caller_is_left_waiting_when_a_batch_answers_wrongly() -> None:
    async def short(items: Sequence[PublicationInput], key: str | None) -> list[Published]:
        return []  # (fewer answers than publications)

    combiner = PublishCombiner(short, allow_all)
    outcomes = await asyncio.wait_for(
        asyncio.gather(
            *(combiner.publish(PublicationInput(n), None) for n in range(2)),
            return_exceptions=True,
        ),
        timeout=5,
    )
    assert all(isinstance(o, Exception) for o in outcomes)


# ---------------------------------------------------------------- through a broker


@pytest.fixture
async def keyed(tmp_path: Path) -> AsyncIterator[Broker]:
    settings = load_settings({"data_dir": tmp_path}, env={})
    access = AccessSettings(publish_keys="pub=news/")
    broker = await started(dataclasses.replace(settings, access=access))
    yield broker
    await broker.close()
    broker.store.sync.close()


async def test_a_broker_publishes_a_turns_single_publishes_in_one_batch_each_delivered(
    keyed: Broker,
) -> None:
    me, _ = await keyed.register()
    await keyed.subscribe(me.id, "topic", topics=("news/#",))
    outcomes = await asyncio.gather(
        *(keyed.publish(PublicationInput(n, ("news/a",)), "pub") for n in range(4)),
        keyed.publish(PublicationInput(9, ("sports",)), "pub"),
        return_exceptions=True,
    )
    assert isinstance(outcomes[4], TidingsError) and outcomes[4].code == ErrorCode.FORBIDDEN
    published = [o for o in outcomes[:4] if isinstance(o, Published)]
    assert [p.deliveries for p in published] == [1, 1, 1, 1] and keyed.combiner.batches == 1
    assert len({p.publication.id for p in published}) == 4
    assert all(p.progress_token for p in published)
    pulled = await keyed.pull(me.id, 10, wait_s=5)
    assert [m.publication_id for m in pulled] == [p.publication.id for p in published]
