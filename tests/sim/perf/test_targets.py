"""Every target runs the same short workload for real: nothing lost, nothing duplicated; the
lean clients (AMQP and MQTT over asyncio streams, nats-py, redis-py) batched and durable."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest
from tests.conftest import require_service

from tidings.config import load_settings
from tidings.errors import ErrorCode, TidingsError
from tidings.ports import free_port
from tidings.server import EmbeddedServer
from tidings.sim.perf.targets import TARGETS, make_target
from tidings.sim.perf.traffic import X_DOMAIN, Workload
from tidings.sim.perf.trial import Summary, run

SERVICE_OF = {
    "rabbitmq": "rabbitmq",
    "nats": "nats",
    "nats-jetstream": "nats",
    "mqtt": "mqtt",
    "redis": "redis",
}


@pytest.fixture(scope="module")
def tidings_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    settings = load_settings({"data_dir": tmp_path_factory.mktemp("perf-broker")})
    with EmbeddedServer(settings) as server:
        yield server.url


def url_of(name: str, tidings_url: str) -> str | None:
    if name.startswith("tidings"):
        return tidings_url
    require_service(SERVICE_OF[name])
    return None


def run_briefly(name: str, url: str | None, **overrides: float) -> Summary:
    workload = Workload(**{"consumers": 3, "rate": 100, "duration": 1.0, "size": 150, **overrides})  # type: ignore[arg-type]
    return asyncio.run(run(make_target(name, url, workload), workload))


@pytest.mark.service
@pytest.mark.parametrize("name", sorted(TARGETS))
def test_a_short_fan_out_run_delivers_every_message_to_every_consumer_once(
    name: str, tidings_url: str
) -> None:
    # 50 messages, however long a busy peer takes to confirm them (a shared JetStream once
    # took 1.3 s a publish, and a one-second run sent 2)
    summary = run_briefly(name, url_of(name, tidings_url), topics=1, messages=50, duration=60)
    assert summary.sent >= 50
    assert summary.expected == 3 * summary.sent
    assert (summary.received, summary.lost, summary.duplicates) == (summary.expected, 0, 0)
    assert summary.send_errors == 0
    assert summary.latency_ms[0] > 0


@pytest.mark.service
@pytest.mark.parametrize("name", ["tidings", "rabbitmq", "nats", "mqtt"])
def test_in_the_content_workload_only_brokers_that_cannot_filter_waste_deliveries(
    name: str, tidings_url: str
) -> None:
    summary = run_briefly(name, url_of(name, tidings_url), selectivity=0.2)
    assert summary.lost == 0
    assert 0 < summary.received < summary.sent * 3
    if name == "tidings":
        assert summary.wasted == 0
    else:
        assert summary.received + summary.wasted == 3 * summary.sent


DURABLE = {"rabbitmq", "nats-jetstream", "mqtt"}


@pytest.mark.service
@pytest.mark.parametrize("name", sorted(TARGETS))
def test_each_client_sends_batches_and_every_consumer_gets_each_message_exactly_once(
    name: str, tidings_url: str
) -> None:
    durable = name in DURABLE
    summary = run_briefly(
        name, url_of(name, tidings_url), consumers=2, rate=0, duration=30, messages=300,
        batch=50, inflight=2, confirm=durable, persistent=durable,
    )  # fmt: skip
    assert (summary.sent, summary.send_errors) == (300, 0)
    assert (summary.received, summary.lost, summary.duplicates) == (600, 0, 0)
    assert summary.closed == 0


@pytest.mark.service
@pytest.mark.parametrize("name", ["tidings", "rabbitmq", "nats-jetstream"])
def test_a_backlog_sent_while_the_consumer_was_away_is_drained_whole(
    name: str, tidings_url: str
) -> None:
    durable = name != "tidings"
    summary = run_briefly(
        name, url_of(name, tidings_url), consumers=1, rate=0, duration=30, messages=400,
        batch=100, offline=True, confirm=durable, persistent=durable,
    )  # fmt: skip
    assert (summary.received, summary.lost, summary.duplicates) == (400, 0, 0)
    assert summary.drain_per_s is not None and summary.drain_per_s > 0


@pytest.mark.parametrize("name", ["nats", "redis", "mqtt"])
def test_a_backlog_is_refused_by_peers_that_keep_nothing_for_an_absent_consumer(
    name: str,
) -> None:
    require_service(SERVICE_OF[name])
    with pytest.raises(TidingsError) as caught:
        run_briefly(name, None, consumers=1, offline=True, messages=10)
    assert caught.value.field == "--offline"


@pytest.mark.service
def test_a_stream_the_broker_ends_is_counted_as_closed(tidings_url: str) -> None:
    async def scenario() -> int:
        workload = Workload(consumers=1, size=150)
        target = make_target("tidings", tidings_url, workload)
        await target.open()
        await target.subscribe(0, 0, range(X_DOMAIN), lambda *_: None)
        handle = target._handles[0]  # type: ignore[attr-defined]
        await handle.unregister()  # the broker closes its stream; reopening is refused
        for _ in range(500):
            if target.closed:
                break
            await asyncio.sleep(0.02)
        closed = target.closed
        await target.close()
        return closed

    assert asyncio.run(scenario()) == 1


@pytest.mark.service
def test_confirmed_persistent_sends_reach_durable_rabbitmq_queues() -> None:
    require_service("rabbitmq")
    summary = run_briefly("rabbitmq", None, confirm=True, persistent=True)
    assert (summary.lost, summary.send_errors) == (0, 0)


@pytest.mark.service
def test_jetstream_with_publish_acks_loses_nothing() -> None:
    require_service("nats")
    summary = run_briefly("nats-jetstream", None, confirm=True, persistent=True)
    assert (summary.lost, summary.send_errors) == (0, 0)


@pytest.mark.parametrize("name", sorted(TARGETS))
def test_a_target_that_is_not_there_is_one_unavailable_error_naming_it(name: str) -> None:
    scheme = {"rabbitmq": "amqp://guest:guest@", "nats": "nats://", "nats-jetstream": "nats://"}
    url = scheme.get(
        name, "mqtt://" if name == "mqtt" else "redis://" if name == "redis" else "http://"
    )
    url += f"127.0.0.1:{free_port()}"
    with pytest.raises(TidingsError) as caught:
        run_briefly(name, url)
    assert caught.value.code is ErrorCode.UNAVAILABLE
    assert name in caught.value.message and url in caught.value.message


@pytest.mark.parametrize(
    ("name", "option", "overrides"),
    [
        ("nats", "--persistent", {"persistent": True}),
        ("nats", "--confirm", {"confirm": True}),
        ("redis", "--persistent", {"persistent": True}),
    ],
)
def test_a_guarantee_the_peer_does_not_have_is_refused_not_faked(
    name: str, option: str, overrides: dict[str, bool]
) -> None:
    with pytest.raises(TidingsError) as caught:
        make_target(name, None, Workload(**overrides))  # type: ignore[arg-type]
    assert (caught.value.code, caught.value.field) == (ErrorCode.INVALID_FIELD, option)


def test_an_unknown_target_is_refused_naming_the_option() -> None:
    with pytest.raises(TidingsError) as caught:
        make_target("kafka", None, Workload())
    assert caught.value.field == "--target"


@pytest.mark.service
@pytest.mark.parametrize("name", ["tidings", "nats"])
def test_consumers_spread_over_processes_lose_and_duplicate_nothing(
    name: str, tidings_url: str
) -> None:
    summary = run_briefly(name, url_of(name, tidings_url), consumers=4, processes=2)
    assert summary.expected == 4 * summary.sent > 0
    assert (summary.received, summary.lost, summary.duplicates) == (summary.expected, 0, 0)


def test_an_mqtt_consumer_whose_client_id_is_taken_over_is_counted_as_closed() -> None:
    """A misbehaving device that connects with a consumer's client id makes Mosquitto close
    the consumer's connection (MQTT 3.1.1, 3.1.4-2): the run says so."""
    require_service("mqtt")
    from tidings.sim.perf.targets.mqtt import MqttConnection

    async def scenario() -> tuple[int, int]:
        workload = Workload(consumers=1, size=150)
        target = make_target("mqtt", None, workload)
        await target.open()
        await target.subscribe(0, 0, range(X_DOMAIN), lambda *_: None)
        before = target.closed
        thief = await MqttConnection.open(
            "127.0.0.1", 1883, f"perf-{workload.run_id}-0", clean=True
        )
        for _ in range(250):
            if target.closed:
                break
            await asyncio.sleep(0.02)
        after = target.closed
        await thief.close()
        await target.close()
        return before, after

    assert asyncio.run(scenario()) == (0, 1)
