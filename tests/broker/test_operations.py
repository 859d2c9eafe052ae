"""The broker's operations composed over a real SQLite store, with a fake function runner."""

from __future__ import annotations

import asyncio
import dataclasses
import gc
import logging
from collections.abc import AsyncIterator, Sequence
from pathlib import Path

import orjson
import pytest

from tidings import heap
from tidings.broker import Broker, PublicationInput
from tidings.config import (
    FunctionSettings,
    Settings,
    SubscriberSettings,
    SubscriptionSettings,
    load_settings,
)
from tidings.errors import ErrorCode, TidingsError
from tidings.eventlog import EventLog
from tidings.model import FunctionSpec, Op, Predicate, Publication, Subscription
from tidings.sandbox import FunctionOutcome
from tidings.store import open_store

SPEC = FunctionSpec("sentiment", "builtin", "positive")


class FakeRunner:
    """Matches when the publication's data equals the spec's source; "boom" fails;
    `gate` holds every evaluation until it is set."""

    def __init__(self) -> None:
        self.gate = asyncio.Event()
        self.gate.set()
        self.calls = 0
        self.cancelled: list[str] = []

    def validate(self, spec: FunctionSpec) -> None:
        if spec.source == "unknown":
            raise TidingsError(
                ErrorCode.FUNCTION_UNKNOWN, field="builtin", name=spec.source, known="positive"
            )

    async def evaluate(
        self, publication: Publication, subscriptions: Sequence[Subscription]
    ) -> list[FunctionOutcome]:
        await self.gate.wait()
        self.calls += 1
        return [self._one(publication, s) for s in subscriptions]

    async def stream(
        self, publication: Publication, subscriptions: Sequence[Subscription]
    ) -> AsyncIterator[list[FunctionOutcome]]:
        yield await self.evaluate(publication, subscriptions)

    def cancel(self, subscription_id: str) -> None:
        self.cancelled.append(subscription_id)

    def _one(self, publication: Publication, sub: Subscription) -> FunctionOutcome:
        if publication.data == "boom":
            return FunctionOutcome(sub.id, False, "raised ValueError")
        assert sub.function is not None
        return FunctionOutcome(sub.id, publication.data == sub.function.source)

    async def aclose(self) -> None:
        pass


def settings_for(tmp_path: Path, **changes: object) -> Settings:
    base = load_settings({"data_dir": tmp_path}, env={})
    functions = FunctionSettings(failures_to_suspend=2)
    return dataclasses.replace(base, functions=functions, **changes)  # type: ignore[arg-type]


async def started(settings: Settings, runner: FakeRunner | None = None) -> Broker:
    store = open_store(settings.resolved_store_url)
    log = EventLog(settings.log_dir, 10**6, 3600)
    broker = Broker(settings, store, runner=runner, eventlog=log)
    await broker.start()
    return broker


@pytest.fixture
def runner() -> FakeRunner:
    return FakeRunner()


@pytest.fixture
async def broker(tmp_path: Path, runner: FakeRunner) -> AsyncIterator[Broker]:
    b = await started(settings_for(tmp_path), runner)
    yield b
    await b.close()
    b.store.sync.close()


async def eventually_pulled(broker: Broker, subscriber_id: str) -> list[str]:
    messages = await broker.pull(subscriber_id, 10, wait_s=5)
    return [m.publication_id for m in messages]


async def test_a_function_match_is_delivered_after_the_answer(
    broker: Broker, runner: FakeRunner
) -> None:
    me, _ = await broker.register()
    await broker.subscribe(me.id, "function", function=SPEC)
    runner.gate.clear()
    published = await broker.publish(PublicationInput("positive", function_types=("sentiment",)))
    assert published.deliveries == 0 and runner.calls == 0
    runner.gate.set()
    assert await eventually_pulled(broker, me.id) == [published.publication.id]


async def test_a_subscriber_matched_by_topic_and_function_gets_one_delivery(
    broker: Broker, runner: FakeRunner
) -> None:
    me, _ = await broker.register()
    await broker.subscribe(me.id, "topic", topics=("news",))
    await broker.subscribe(me.id, "function", function=SPEC)
    await broker.publish(PublicationInput("positive", ("news",), None, ("sentiment",)))
    while runner.calls == 0:
        await asyncio.sleep(0.01)
    await asyncio.sleep(0.1)  # the function's enqueue, if any, follows its evaluation
    assert len(await broker.pull(me.id, 10, wait_s=0)) == 1
    assert (await broker.depth(me.id)).ready == 0


async def test_consecutive_failures_suspend_a_function_until_it_is_resumed(
    broker: Broker, runner: FakeRunner
) -> None:
    me, _ = await broker.register()
    sub = await broker.subscribe(me.id, "function", function=SPEC)
    for _ in range(2):
        await broker.publish(PublicationInput("boom", function_types=("sentiment",)))
    while (await broker.subscription(me.id, sub.id)).status != "suspended":
        await asyncio.sleep(0.01)
    suspended = await broker.subscription(me.id, sub.id)
    assert suspended.status_reason is not None and "raised ValueError" in suspended.status_reason
    calls = runner.calls
    await broker.publish(PublicationInput("positive", function_types=("sentiment",)))
    await asyncio.sleep(0.1)
    assert runner.calls == calls
    await broker.resume(me.id, sub.id)
    published = await broker.publish(PublicationInput("positive", function_types=("sentiment",)))
    assert await eventually_pulled(broker, me.id) == [published.publication.id]


async def test_a_function_unknown_to_the_runner_is_refused_at_subscribe(broker: Broker) -> None:
    me, _ = await broker.register()
    with pytest.raises(TidingsError) as caught:
        await broker.subscribe(me.id, "function", function=FunctionSpec("t", "builtin", "unknown"))
    assert caught.value.code == ErrorCode.FUNCTION_UNKNOWN


async def test_without_a_runner_function_subscriptions_are_unavailable(tmp_path: Path) -> None:
    broker = await started(settings_for(tmp_path))
    me, _ = await broker.register()
    with pytest.raises(TidingsError) as caught:
        await broker.subscribe(me.id, "function", function=SPEC)
    assert caught.value.code == ErrorCode.UNAVAILABLE
    await broker.close()


async def subscribed_then_closed(settings: Settings, *limits: float) -> tuple[str, list[str]]:
    """A subscriber with a content subscription `price < limit` per limit, made through a
    broker that then closed, store and all: (subscriber id, subscription ids)."""
    first = await started(settings)
    me, _ = await first.register()
    subs = [
        await first.subscribe(me.id, "content", predicates=(Predicate("price", Op.LT, limit),))
        for limit in limits
    ]
    await first.close()
    first.store.sync.close()
    return me.id, [sub.id for sub in subs]


async def test_subscriptions_survive_a_restart_and_are_matched_again(tmp_path: Path) -> None:
    settings = settings_for(tmp_path)
    await subscribed_then_closed(settings, 10)
    second = await started(settings)
    published = await second.publish(PublicationInput("cheap", (), {"price": 5}))
    assert published.deliveries == 1
    await second.close()


async def test_content_subscriptions_loaded_at_restart_can_be_unsubscribed(tmp_path: Path) -> None:
    settings = settings_for(tmp_path)
    me, (cheap, _) = await subscribed_then_closed(settings, 10, 3)
    second = await started(settings)
    await second.unsubscribe(me, cheap)
    assert (await second.publish(PublicationInput("a", (), {"price": 5}))).deliveries == 0
    assert (await second.publish(PublicationInput("b", (), {"price": 1}))).deliveries == 1
    await second.close()


async def test_loading_many_subscriptions_keeps_the_collector_off_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, unfrozen: None
) -> None:
    settings = settings_for(tmp_path)
    await subscribed_then_closed(settings, 10)
    gc.unfreeze()
    monkeypatch.setattr(heap, "SETTLE_FROM", 1)
    second = await started(settings)
    assert gc.get_freeze_count() > 0
    assert (await second.publish(PublicationInput("a", (), {"price": 5}))).deliveries == 1
    await second.close()


async def test_a_broker_growing_through_subscribe_settles_its_heap_too(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, unfrozen: None
) -> None:
    monkeypatch.setattr(heap, "SETTLE_FROM", 2)
    broker = await started(settings_for(tmp_path))
    gc.unfreeze()
    me, _ = await broker.register()
    for topic in ("a", "b"):
        await broker.subscribe(me.id, "topic", topics=(topic,))
    for _ in range(40):  # housekeeping looks once a second
        if gc.get_freeze_count():
            break
        await asyncio.sleep(0.1)
    assert gc.get_freeze_count() > 0
    await broker.close()


async def test_the_heap_is_settled_once_per_doubling_not_on_every_look(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    settles: list[int] = []
    monkeypatch.setattr(heap, "SETTLE_FROM", 2)
    monkeypatch.setattr(heap, "settle_heap", lambda: settles.append(1))
    # housekeeping looks every min(1 s, staleness_s): ten looks a second here, so a wait of
    # half a second holds five looks (the default's 2.2 s held two)
    fast = SubscriptionSettings(staleness_s=0.1)
    broker = await started(settings_for(tmp_path, subscriptions=fast))
    me, _ = await broker.register()

    made: list[str] = []

    async def grown_to(count: int) -> None:
        while len(made) < count:
            made.append((await broker.subscribe(me.id, "topic", topics=(f"t{len(made)}",))).id)
        await asyncio.sleep(0.5)  # five of housekeeping's looks

    await grown_to(3)
    assert len(settles) == 1
    await grown_to(5)
    assert len(settles) == 1  # 5 < 2 x 3
    await grown_to(6)
    assert len(settles) == 2
    await broker.close()


async def test_spark_matching_commits_and_logs_but_enqueues_nothing(tmp_path: Path) -> None:
    broker = await started(settings_for(tmp_path, matching="spark"))
    me, _ = await broker.register()
    await broker.subscribe(me.id, "topic", topics=("a",))
    published = await broker.publish(PublicationInput(1, ("a",)))
    await broker.close()
    assert published.deliveries == 0 and (await broker.depth(me.id)).ready == 0
    logged = [orjson.loads(line) for f in tmp_path.rglob("*.jsonl") for line in f.open("rb")]
    assert any(r.get("id") == published.publication.id for r in logged)


async def test_the_retention_sweeper_dead_letters_old_messages(tmp_path: Path) -> None:
    now = [1000.0]
    settings = settings_for(tmp_path)
    store = open_store(settings.resolved_store_url)
    broker = Broker(settings, store, clock=lambda: now[0])
    await broker.start()
    me, _ = await broker.register()
    await broker.subscribe(me.id, "topic", topics=("a",))
    await broker.publish(PublicationInput(1, ("a",)))
    now[0] += settings.queues.retention_s + 120
    while not await broker.dead_letters(me.id, 10):
        await asyncio.sleep(0.1)
    assert [d.reason for d in await broker.dead_letters(me.id, 10)] == ["retention"]
    await broker.close()


async def test_the_subscription_limit_is_enforced(tmp_path: Path) -> None:
    limits = dataclasses.replace(Settings().limits, max_subscriptions_per_subscriber=1)
    broker = await started(settings_for(tmp_path, limits=limits))
    me, _ = await broker.register()
    await broker.subscribe(me.id, "topic", topics=("a",))
    with pytest.raises(TidingsError) as caught:
        await broker.subscribe(me.id, "topic", topics=("b",))
    assert caught.value.code == ErrorCode.LIMIT_EXCEEDED
    await broker.close()


async def test_a_waiting_pull_wakes_when_a_publication_arrives(broker: Broker) -> None:
    me, _ = await broker.register()
    await broker.subscribe(me.id, "topic", topics=("a",))
    waiting = asyncio.create_task(broker.pull(me.id, 10, wait_s=15))
    await asyncio.sleep(0.1)
    assert not waiting.done()
    published = await broker.publish(PublicationInput(1, ("a",)))
    messages = await asyncio.wait_for(waiting, 10)
    assert [m.publication_id for m in messages] == [published.publication.id]


async def test_a_token_is_checked_in_full(broker: Broker) -> None:
    me, token = await broker.register()
    await broker.authenticate(me.id, token)
    for wrong, code in ((None, ErrorCode.UNAUTHORIZED), (token[:-1], ErrorCode.FORBIDDEN)):
        with pytest.raises(TidingsError) as caught:
            await broker.authenticate(me.id, wrong)
        assert caught.value.code == code


async def test_leases_and_acknowledgements_are_logged(tmp_path: Path) -> None:
    broker = await started(settings_for(tmp_path))
    me, _ = await broker.register()
    await broker.subscribe(me.id, "topic", topics=("a",))
    published = await broker.publish(PublicationInput(1, ("a",)))
    [message] = await broker.pull(me.id, 10, wait_s=0)
    await broker.ack(me.id, [message.receipt, "stale"])
    await broker.close()
    logged = [
        orjson.loads(line) for f in tmp_path.rglob("deliveries/*.jsonl") for line in f.open("rb")
    ]
    assert [(r["event"], r["publication_id"]) for r in logged] == [
        (event, published.publication.id) for event in ("enqueued", "delivered", "acked")
    ]


async def test_every_subscriber_s_acknowledgement_of_a_fan_out_is_logged_as_its_own(
    tmp_path: Path,
) -> None:
    broker = await started(settings_for(tmp_path))
    subscribers = [(await broker.register())[0] for _ in range(3)]
    for me in subscribers:
        await broker.subscribe(me.id, "topic", topics=("a",))
    await broker.publish(PublicationInput(1, ("a",)))
    leased = {me.id: await broker.pull(me.id, 10, wait_s=0) for me in subscribers}
    for sid, messages in reversed(leased.items()):  # (each queue's receipts look alike)
        await broker.ack(sid, [m.receipt for m in messages])
    await broker.close()
    logged = [
        orjson.loads(line) for f in tmp_path.rglob("deliveries/*.jsonl") for line in f.open("rb")
    ]
    acked = sorted(r["subscriber_id"] for r in logged if r["event"] == "acked")
    assert acked == sorted(me.id for me in subscribers)


async def test_a_burst_of_dead_letters_is_a_warning_in_the_log(
    broker: Broker, caplog: pytest.LogCaptureFixture
) -> None:
    me, _ = await broker.register()
    await broker.subscribe(me.id, "topic", topics=("poison",))
    await broker.publish_batch([PublicationInput(None, ("poison",))] * 12)
    await broker.housekeeping.expire(broker.clock())  # the first look only counts
    for _ in range(broker.settings.queues.max_attempts):  # never acknowledged
        await broker.pull(me.id, 100, wait_s=0, visibility_s=0)
    await broker.pull(me.id, 100, wait_s=0)  # the expired leases move to dead letters
    with caplog.at_level(logging.WARNING, logger="tidings.broker"):
        await broker.housekeeping.expire(broker.clock())
    assert "12 messages were dead-lettered in the last minute" in caplog.text


async def test_housekeeping_goes_on_after_the_store_failed_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    quick = SubscriberSettings(ephemeral_grace_s=0.6)  # presence kept every 0.2 s
    broker = await started(settings_for(tmp_path, subscribers=quick))
    calls: list[int] = []
    real = broker.store.sync.idle_subscribers

    def flaky(idle_before: float, ephemeral_before: float) -> list[str]:
        calls.append(1)
        if len(calls) == 1:
            raise OSError("the database is restarting")
        return real(idle_before, ephemeral_before)

    monkeypatch.setattr(broker.store.sync, "idle_subscribers", flaky)
    with caplog.at_level(logging.ERROR, logger="tidings.broker"):
        for _ in range(100):  # presence is kept every few seconds: wait for two looks
            if len(calls) >= 2:
                break
            await asyncio.sleep(0.1)
    await broker.close()
    broker.store.sync.close()
    assert len(calls) >= 2, "the loop stopped after the first failure"
    assert "housekeeping failed" in caplog.text
