"""Typed clients of the native API: `Client` (sync) and `AsyncClient` (asyncio).

with Client("http://127.0.0.1:8080") as client:
    me = client.register()
    me.subscribe(topics=["sensors/#"])
    client.publish(data={"t": 21.5}, topics=["sensors/kitchen"])
    for message in me.pull(wait=5):
        me.ack([message.receipt])
"""

from tidings.client.asyncio import AsyncClient, AsyncSubscriberHandle
from tidings.client.sync import Client, SubscriberHandle
from tidings.client.types import (
    AckResult,
    DeadLetter,
    Depth,
    Message,
    Progress,
    Published,
    Queued,
    Registration,
    SubscriberInfo,
    Subscription,
    TidingsClientError,
)

__all__ = [
    "AckResult",
    "AsyncClient",
    "AsyncSubscriberHandle",
    "Client",
    "DeadLetter",
    "Depth",
    "Message",
    "Progress",
    "Published",
    "Queued",
    "Registration",
    "SubscriberHandle",
    "SubscriberInfo",
    "Subscription",
    "TidingsClientError",
]
