"""The thesis's correctness scenarios (tables 6.1-6.8) as data, run end to end on a broker.

Each scenario registers its subscribers, subscribes them, publishes, and counts what each
one receives over its stream. Offline subscribers connect only after everything is
published and must then drain the same counts from their queues.

Through the native API (`api="native"`), Tidings delivers a publication once per subscriber
however many of its topics match, where the thesis's broker sent one message per matching topic
(its Subscriber3 got 3 in table 6.2; natively 2). Through the thesis's own operations
(`api="thesis"`: RegisterSubscriber, Subscribe*, Publish* under /api) Tidings publishes per topic
as the thesis did, and the thesis's numbers are the expectation.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import io
from dataclasses import dataclass, field
from typing import Any

from tidings.client import AsyncClient, AsyncSubscriberHandle
from tidings.client.calls import Call, decoded, limits
from tidings.wire.thesis import CompatRegistered

ENGLISH = "The weather in Munich is sunny and warm today."
SPANISH = "El tiempo en Madrid es soleado y cálido hoy."
EN_TEXT = {"function_type": "text", "builtin": "detect_language", "params": {"language": "en"}}
FACES = {"function_type": "image", "builtin": "detect_faces", "params": {"min_faces": 1}}
SETTLE_S = 0.5


@dataclass(frozen=True)
class Sub:
    name: str
    expected: int
    thesis: int
    topics: list[str] | None = None
    predicates: list[dict[str, Any]] | None = None
    functions: list[dict[str, Any]] = field(default_factory=list)
    offline: bool = False

    def describe(self) -> str:
        parts = [", ".join(self.topics)] if self.topics else []
        parts += [
            " and ".join(f"{p['key']} {p['op']} {p['value']!r}" for p in self.predicates or [])
        ]
        parts += [f"{f['builtin']}({_params(f['params'])})" for f in self.functions]
        text = "; ".join(p for p in parts if p) or "-"
        return text + (" [offline]" if self.offline else "")


def _params(params: dict[str, Any]) -> str:
    return ", ".join(f"{k}={v}" for k, v in params.items())


@dataclass(frozen=True)
class Pub:
    name: str
    data: Any = None
    topics: list[str] | None = None
    attributes: dict[str, Any] | None = None
    function_types: list[str] | None = None


@dataclass(frozen=True)
class Scenario:
    name: str
    source: str
    subscribers: list[Sub]
    publications: list[Pub]


def photo(name: str) -> dict[str, str]:
    """A scikit-image sample photo as `{"image": base64 JPEG}` (PNG would pass 256 KiB)."""
    import numpy as np
    from PIL import Image
    from skimage import data

    pixels = getattr(data, name)()
    if pixels.ndim == 2:
        pixels = np.stack([pixels] * 3, axis=-1)
    buffer = io.BytesIO()
    Image.fromarray(pixels).save(buffer, format="JPEG")
    return {"image": base64.b64encode(buffer.getvalue()).decode()}


def _lt(key: str, value: Any) -> list[dict[str, Any]]:
    return [{"key": key, "op": "<", "value": value}]


def _mixed(name: str, offline: tuple[str, ...]) -> Scenario:
    subs = [
        Sub("Subscriber1", 2, 2, topics=["topic1"], predicates=_lt("content1", 1000)),
        Sub("Subscriber2", 2, 2, predicates=_lt("content1", 1000), functions=[EN_TEXT]),
        Sub("Subscriber3", 2, 2, topics=["topic1"], functions=[EN_TEXT]),
        Sub("Subscriber4", 3, 3, ["topic1"], _lt("content1", 1000), [EN_TEXT]),
    ]
    subs = [Sub(**{**s.__dict__, "offline": s.name in offline}) for s in subs]
    pubs = [
        Pub("Publisher1", "about topic1", topics=["topic1"]),
        Pub("Publisher2", "about content1", attributes={"content1": 200}),
        Pub("Publisher3", ENGLISH, function_types=["text"]),
    ]
    source = "tables 6.7, 6.8" if not offline else "section 6.2.5 (mixed, some offline)"
    return Scenario(name, source, subs, pubs)


def suite() -> list[Scenario]:
    topic = Scenario(
        "topic",
        "tables 6.1, 6.2",
        [
            Sub("Subscriber1", 2, 2, topics=["topic1", "topic2"]),
            Sub("Subscriber2", 1, 1, topics=["topic2"]),
            Sub("Subscriber3", 2, 3, topics=["topic2", "topic3"]),
            Sub("Subscriber4", 0, 0),
        ],
        [
            Pub("Publisher1", "one", topics=["topic1"]),
            Pub("Publisher2", "two", topics=["topic2", "topic3"]),
            Pub("Publisher3", "three", topics=["topic3"]),
            Pub("Publisher4", "four", topics=["topic4"]),
        ],
    )
    content = Scenario(
        "content",
        "tables 6.3, 6.4",
        [
            Sub("Subscriber1", 1, 1, predicates=_lt("content1", 1000)),
            Sub("Subscriber2", 0, 0, predicates=[{"key": "content2", "op": "=", "value": 1000}]),
            Sub("Subscriber3", 0, 0, predicates=[{"key": "content1", "op": ">", "value": 200}]),
            Sub("Subscriber4", 1, 1, predicates=[{"key": "content3", "op": "=", "value": "text"}]),
        ],
        [
            Pub("Publisher1", "200", attributes={"content1": 200}),
            Pub("Publisher2", "500", attributes={"content2": 500}),
            Pub("Publisher3", "text", attributes={"content3": "text"}),
            Pub("Publisher4", "mobile", attributes={"content3": "mobile"}),
        ],
    )
    function = Scenario(
        "function",
        "tables 6.5, 6.6",
        [
            Sub("Subscriber1", 1, 1, functions=[EN_TEXT]),
            Sub("Subscriber2", 1, 1, functions=[FACES]),
        ],
        [
            Pub("Publisher1", SPANISH, function_types=["text"]),
            Pub("Publisher2", ENGLISH, function_types=["text"]),
            Pub("Publisher3", photo("astronaut"), function_types=["image"]),
            Pub("Publisher4", photo("coffee"), function_types=["image"]),
        ],
    )
    mixed = _mixed("mixed", ())
    offline = _mixed("offline", ("Subscriber2", "Subscriber4"))
    return [topic, content, function, mixed, offline]


@dataclass
class SubscriberResult:
    """One subscriber in one scenario: what it should receive (ours, the thesis's) and did."""

    scenario: str
    subscriber: str
    subscriptions: str
    expected: int
    thesis: int
    received: int

    @property
    def ok(self) -> bool:
        return self.received == self.expected


APIS = ("native", "thesis")
RECEIVES = ("stream", "pull")
PULL_WAIT_S = 1.0  # each long poll: short, so a few function instances serve many inboxes


class SubscriberInbox:
    """One subscriber's stream (or long polls): publication ids received, acknowledged as
    they come."""

    def __init__(self, handle: AsyncSubscriberHandle, receive: str = "stream") -> None:
        self.handle, self.received = handle, list[str]()
        self.receive = receive
        self.connected = asyncio.Event()

    async def listen(self) -> None:
        if self.receive == "pull":
            await self._poll()
            return
        async with self.handle.stream() as stream:
            self.connected.set()
            async for message in stream:
                self.received.append(message.publication_id)
                await stream.ack([message.receipt])

    async def _poll(self) -> None:
        self.connected.set()
        while True:
            messages = await self.handle.pull(max_messages=10, wait=PULL_WAIT_S)
            if messages:
                self.received += [m.publication_id for m in messages]
                await self.handle.ack([m.receipt for m in messages])


async def _thesis_subscriber(client: AsyncClient, sub: Sub) -> AsyncSubscriberHandle:
    """The thesis's operations: RegisterSubscriber, then one Subscribe* call per kind."""
    register = Call("POST", "/api/RegisterSubscriber", decoded(CompatRegistered), auth=False)
    registered = await client.run(register)
    handle = client.subscriber(registered.subscriberId, registered.token)

    async def call(operation: str, body: dict[str, Any]) -> None:
        body = {"subscriberId": handle.id, **body}
        await client.run(Call("POST", f"/api/{operation}", json=body), token=handle.token)

    if sub.topics:
        await call("SubscribeTopics", {"topics": sub.topics})
    if sub.predicates:
        content = [
            {"key": p["key"], "value": p["value"], "condition": p["op"]} for p in sub.predicates
        ]
        await call("SubscribeContent", {"content": content})
    for f in sub.functions:
        spec = {"functionType": "builtin", "subscriptionTopic": f["function_type"]}
        await call(
            "SubscribeFunction",
            {**spec, "matchingFunction": f["builtin"], "parameters": f["params"]},
        )
    return handle


async def _thesis_publish(client: AsyncClient, pub: Pub) -> None:
    """PublishTopics, PublishContent or PublishFunctions, as the publication's kind says."""
    body: dict[str, Any]
    if pub.topics:
        operation, body = "PublishTopics", {"topics": pub.topics}
    elif pub.attributes:
        content = [{"key": k, "value": v} for k, v in pub.attributes.items()]
        operation, body = "PublishContent", {"content": content}
    else:
        operation, body = "PublishFunctions", {"subscriptionTopics": pub.function_types}
    await client.run(Call("POST", f"/api/{operation}", json={"message": pub.data, **body}))


async def _native_publish(client: AsyncClient, pub: Pub) -> None:
    await client.publish(pub.data, topics=pub.topics, attributes=pub.attributes,
                         function_types=pub.function_types)  # fmt: skip


async def _subscriber(client: AsyncClient, sub: Sub) -> AsyncSubscriberHandle:
    handle = await client.register()
    if sub.topics:
        await handle.subscribe(topics=sub.topics)
    if sub.predicates:
        await handle.subscribe(predicates=sub.predicates)
    for function in sub.functions:
        await handle.subscribe(function=function)
    return handle


async def _open(inboxes: list[SubscriberInbox], tasks: list[asyncio.Task[None]]) -> None:
    for inbox in inboxes:
        tasks.append(asyncio.create_task(inbox.listen()))
    await asyncio.gather(*(i.connected.wait() for i in inboxes))


async def _until(
    boxes: list[tuple[Sub, SubscriberInbox]], which: list[Sub], timeout: float
) -> None:
    """Until each of `which` has at least its expected count, or the time is up."""

    async def wait() -> None:
        while any(len(i.received) < s.expected for s, i in boxes if s in which):
            await asyncio.sleep(0.05)

    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(wait(), timeout)


async def run_scenario(
    client: AsyncClient,
    scenario: Scenario,
    timeout: float,
    api: str = "native",
    receive: str = "stream",
) -> list[SubscriberResult]:
    if api == "thesis":
        scenario = Scenario(scenario.name, scenario.source, [
            Sub(**{**s.__dict__, "expected": s.thesis}) for s in scenario.subscribers
        ], scenario.publications)  # fmt: skip
    subscribe = _thesis_subscriber if api == "thesis" else _subscriber
    publish = _thesis_publish if api == "thesis" else _native_publish
    handles = [await subscribe(client, s) for s in scenario.subscribers]
    # brokers sharing a store (function instances) match a subscription within this bound
    await asyncio.sleep((await client.run(limits())).staleness_s)
    inboxes = [SubscriberInbox(h, receive) for h in handles]
    boxes = list(zip(scenario.subscribers, inboxes, strict=True))
    online = [s for s in scenario.subscribers if not s.offline]
    tasks: list[asyncio.Task[None]] = []
    try:
        await _open([i for s, i in boxes if not s.offline], tasks)
        for pub in scenario.publications:
            await publish(client, pub)
        await _until(boxes, online, timeout)
        await _open([i for s, i in boxes if s.offline], tasks)
        await _until(boxes, scenario.subscribers, timeout)
        await asyncio.sleep(SETTLE_S)  # anything extra would show now
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await asyncio.gather(*(h.unregister() for h in handles), return_exceptions=True)
    return [
        SubscriberResult(scenario.name, s.name, s.describe(), s.expected, s.thesis, len(i.received))
        for s, i in boxes
    ]


async def run_suite(
    url: str,
    scenarios: list[Scenario],
    timeout: float = 30.0,
    api: str = "native",
    receive: str = "stream",
) -> list[SubscriberResult]:
    from tidings.sim.control import check_broker

    async with AsyncClient(url) as client:
        await check_broker(client, url)
        rows: list[SubscriberResult] = []
        for scenario in scenarios:
            rows += await run_scenario(client, scenario, timeout, api, receive)
        return rows
