"""A function instance's broker: stateless between requests, its subscriptions no staler
than the bound (brought up to date from the change log, never read whole again), its
request's own work done before the answer, its chores the scheduled handler's."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from tests.conftest import PG
from tests.sandbox.endpoint import endpoint

from tidings.config import Settings
from tidings.serverless.runtime import Runtime, settings_from_env

JSON = {"content-type": "application/json"}


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


def settings(schema: str, **env: str) -> Settings:
    return settings_from_env({"TIDINGS_STORE_URL": f"{PG}?schema={schema}", **env})


class Instance:
    """One function instance, called as its platform's adapter calls the ASGI app."""

    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime
        transport = httpx.ASGITransport(app=runtime)
        self.http = httpx.AsyncClient(transport=transport, base_url="https://fn.example")

    async def call(self, method: str, path: str, body: Any = None, token: str = "") -> Any:
        headers = {**JSON, **({"authorization": f"Bearer {token}"} if token else {})}
        answer = await self.http.request(method, path, json=body, headers=headers)
        return answer

    async def register(self) -> tuple[str, str]:
        said = (await self.call("POST", "/v1/subscribers", {})).json()
        return said["id"], said["token"]

    def metric(self, name: str) -> float:
        assert self.runtime._started is not None
        broker = self.runtime._started[0]
        return broker.metrics.registry.get_sample_value(name) or 0.0

    async def close(self) -> None:
        await self.http.aclose()
        await self.runtime.close()


@pytest.fixture
async def pair(schema: str) -> AsyncIterator[tuple[Instance, Instance, Clock]]:
    clock = Clock()
    one, other = (Instance(Runtime(settings(schema), clock)) for _ in range(2))
    yield one, other, clock
    await one.close()
    await other.close()


def test_an_instance_takes_its_environment_over_the_serverless_defaults() -> None:
    defaults = settings_from_env({})
    assert defaults.serverless.enabled and defaults.subscriptions.staleness_s == 10.0
    assert not defaults.functions.code_functions and not defaults.event_log
    told = settings_from_env({"TIDINGS_SUBSCRIPTIONS__STALENESS_S": "2.5"})
    assert told.subscriptions.staleness_s == 2.5 and told.serverless.enabled


async def test_nothing_runs_between_requests(pair: tuple[Instance, Instance, Clock]) -> None:
    one, _, _ = pair
    assert (await one.call("GET", "/healthz")).status_code == 200
    assert one.runtime._started is not None and not one.runtime._started[0].lifecycle.tasks
    assert asyncio.all_tasks() == {asyncio.current_task()}


async def test_a_subscription_made_through_another_instance_matches_once_the_bound_has_passed(
    pair: tuple[Instance, Instance, Clock],
) -> None:
    one, other, clock = pair
    await other.call("GET", "/healthz")  # warm: its index read now
    sid, token = await one.register()
    subscribed = await one.call("POST", f"/v1/subscribers/{sid}/subscriptions",
                                {"topics": ["news"]}, token)  # fmt: skip
    assert subscribed.status_code == 201
    early = await other.call("POST", "/v1/publications", {"data": "a", "topics": ["news"]})
    assert early.json()["deliveries"] == 0  # within the bound: the index as it was held
    clock.now += 10.0  # the paper's bound, the default here
    late = await other.call("POST", "/v1/publications", {"data": "b", "topics": ["news"]})
    assert late.json()["deliveries"] == 1
    # brought up to date from the change log: never read whole again after the cold start
    assert other.metric("tidings_subscription_reloads_total") == 1
    assert other.metric("tidings_subscription_changes_applied_total") >= 1
    assert other.metric("tidings_subscription_cache_misses_total") == 1
    assert other.metric("tidings_subscription_cache_hits_total") >= 2


async def test_a_deleted_subscriber_s_token_stops_working_everywhere_within_the_bound(
    pair: tuple[Instance, Instance, Clock],
) -> None:
    one, other, clock = pair
    sid, token = await one.register()
    assert (await other.call("GET", f"/v1/subscribers/{sid}", token=token)).status_code == 200
    assert (await one.call("DELETE", f"/v1/subscribers/{sid}", token=token)).status_code == 204
    clock.now += 10.0
    assert (await other.call("GET", f"/v1/subscribers/{sid}", token=token)).status_code == 403


async def test_a_builtin_function_s_delivery_is_made_before_the_publish_answers(
    pair: tuple[Instance, Instance, Clock],
) -> None:
    one, _, _ = pair
    sid, token = await one.register()
    function = {"function_type": "lang", "builtin": "detect_language",
                "params": {"language": "en"}}  # fmt: skip
    made = await one.call("POST", f"/v1/subscribers/{sid}/subscriptions",
                          {"function": function}, token)  # fmt: skip
    assert made.status_code == 201, made.text
    text = "The quick brown fox jumps over the lazy dog, as every English sentence should."
    await one.call("POST", "/v1/publications", {"data": text, "function_types": ["lang"]})
    pulled = await one.call("GET", f"/v1/subscribers/{sid}/messages?wait=0", token=token)
    assert [m["body"]["data"] for m in pulled.json()["messages"]] == [text]


async def test_code_functions_are_refused_as_the_platform_grants_no_boundary(
    pair: tuple[Instance, Instance, Clock],
) -> None:
    one, _, _ = pair
    sid, token = await one.register()
    code = "def match(publication):\n    return True\n"
    refused = await one.call("POST", f"/v1/subscribers/{sid}/subscriptions",
                             {"function": {"function_type": "t", "code": code}}, token)  # fmt: skip
    assert refused.status_code == 422
    assert refused.json()["error"]["code"] == "function_sandbox_unavailable"


async def test_housekeeping_pushes_the_webhooks_the_requests_only_stored(schema: str) -> None:
    env = {"TIDINGS_WEBHOOKS__DENY_DEFAULT_NETWORKS": "false"}  # the receiver is on loopback
    instance = Instance(Runtime(settings(schema, **env)))
    try:
        async with endpoint() as receiver:
            sid, token = await instance.register()
            await instance.call("POST", f"/v1/subscribers/{sid}/subscriptions",
                                {"topics": ["t"]}, token)  # fmt: skip
            hook = await instance.call("PUT", f"/v1/subscribers/{sid}/webhook",
                                       {"url": receiver.url("/hook")}, token)  # fmt: skip
            assert hook.status_code == 200, hook.text
            await instance.call("POST", "/v1/publications", {"data": "x", "topics": ["t"]})
            await asyncio.sleep(0.5)
            assert receiver.calls["/hook"] == 0  # a request pushes nothing: it stores
            done = await instance.runtime.housekeep()
            assert receiver.calls["/hook"] == 1
            assert done["pushed_s"] < instance.runtime.settings.serverless.push_s
            left = await instance.call("GET", f"/v1/subscribers/{sid}", token=token)
            assert left.json()["depth"]["ready"] == 0
    finally:
        await instance.close()


async def test_housekeeping_moves_messages_past_their_retention_to_the_dead_letters(
    schema: str,
) -> None:
    clock = Clock()
    base = settings(schema)
    short = dataclasses.replace(base, queues=dataclasses.replace(base.queues, retention_s=60))
    instance = Instance(Runtime(short, clock))
    try:
        sid, token = await instance.register()
        await instance.call("POST", f"/v1/subscribers/{sid}/subscriptions",
                            {"topics": ["t"]}, token)  # fmt: skip
        await instance.call("POST", "/v1/publications", {"data": "x", "topics": ["t"]})
        clock.now += 61
        done = await instance.runtime.housekeep()
        assert done["messages_expired"] == 1
        dead = await instance.call("GET", f"/v1/subscribers/{sid}/dead-letters", token=token)
        assert len(dead.json()["dead_letters"]) == 1
    finally:
        await instance.close()


async def test_a_thawed_instance_replaces_the_connections_the_database_ended_meanwhile(
    schema: str,
) -> None:
    import psycopg

    instance = Instance(Runtime(settings(schema)))
    try:
        assert (await instance.call("POST", "/v1/subscribers", {})).status_code == 201
        assert instance.runtime._started is not None
        store = instance.runtime._started[0].store.sync

        def pooled_pids() -> set[int]:
            pids = set()
            for _ in range(8):  # a broken one is discarded as it is found
                try:
                    with store._transaction() as cur:  # type: ignore[attr-defined]
                        cur.execute("SELECT pg_backend_pid()")
                        pids.add(cur.fetchone()[0])
                except psycopg.OperationalError:
                    continue
            return pids

        def end_them() -> None:
            with psycopg.connect(PG, autocommit=True) as admin:
                for pid in pooled_pids():
                    admin.execute("SELECT pg_terminate_backend(%s)", (pid,))

        end_them()
        refused = await instance.call("POST", "/v1/subscribers", {})
        assert refused.status_code >= 500  # a warm request on a dead connection: the bite
        end_them()
        instance.runtime._last -= 120  # frozen for two minutes
        assert (await instance.call("POST", "/v1/subscribers", {})).status_code == 201
    finally:
        await instance.close()
