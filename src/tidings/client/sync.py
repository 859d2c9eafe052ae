"""The synchronous client: calls, a consuming iterator, and a callback consumer."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from types import TracebackType
from typing import Any, TypeVar

import httpx

from tidings.client import calls
from tidings.client import types as t
from tidings.client.calls import Call
from tidings.client.retries import RETRIES, again, named

log = logging.getLogger("tidings.client")
T = TypeVar("T")


class Client:
    """The synchronous client over httpx (which reads answers of any length). A publish
    whose answer is lost is sent again, up to `retries` times, under a dedup id
    (`tidings.client.retries`), so it is delivered once."""

    def __init__(
        self,
        url: str = "http://127.0.0.1:8080",
        timeout: float = 30.0,
        retries: int = RETRIES,
        key: str | None = None,
    ) -> None:
        """`key`: the broker's registration or publisher key, where it requires one
        (docs/api.md, "Keys"): sent on registering and publishing."""
        self.url = url.rstrip("/")
        self.retries = retries
        self.key = key
        # a plain-HTTP broker needs no certificate store, which httpx loads for every client
        # it makes with verify on (50 ms of each CLI call); requests go to this base URL only
        tls = self.url.startswith("https://")
        self._http = httpx.Client(base_url=self.url, timeout=timeout, verify=tls)

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: type[BaseException] | BaseException | TracebackType | None) -> None:
        self.close()

    def close(self) -> None:
        self._http.close()

    def run(self, call: Call[T], token: str | None = None) -> T:
        bearer = token if call.auth else self.key
        headers = {"Authorization": f"Bearer {bearer}"} if bearer else {}
        body: bytes | None = None
        if call.json is not None:
            body, headers["Content-Type"] = call.encoded()
        try:
            response = self._http.request(
                call.method,
                call.path,
                headers=headers,
                content=body,
                params=call.params or None,
                timeout=call.timeout or httpx.USE_CLIENT_DEFAULT,
            )
        except httpx.TransportError as exc:
            raise t.unreachable(self.url, exc) from None
        return t.checked(response, call.parse)

    def register(self, ephemeral: bool = False) -> SubscriberHandle:
        """A new subscriber; an `ephemeral` one is deleted by the broker once it has had no
        stream open and made no call for a while (docs/api.md)."""
        return SubscriberHandle(self, self.run(calls.register(ephemeral)))

    def admin(self, token: str) -> AdminHandle:
        """The admin calls, with the broker's admin token."""
        return AdminHandle(self, token)

    def subscriber(self, subscriber_id: str, token: str) -> SubscriberHandle:
        """A handle on an existing subscriber."""
        return SubscriberHandle(self, t.Registration(subscriber_id, token, ""))

    def publish(
        self,
        data: Any = None,
        *,
        topics: list[str] | None = None,
        attributes: dict[str, Any] | None = None,
        function_types: list[str] | None = None,
        dedup_id: str | None = None,
    ) -> t.Published:
        """`dedup_id`: the publication's name; a repeat within the broker's dedup window is
        answered as the first (`duplicate`) and not delivered again. Without one, the client
        gives it one when it may retry it."""
        body = t.publication_body(data, topics, attributes, function_types, dedup_id)
        if self.retries:
            return self._retried(calls.publish(named(body)))
        return self.run(calls.publish(body))

    def publish_batch(self, publications: list[dict[str, Any]]) -> list[t.Published]:
        """Each publication's body as `publish()` takes it (`dedup_id` among its keys)."""
        if self.retries:
            return self._retried(calls.publish_batch([named(p) for p in publications]))
        return self.run(calls.publish_batch(publications))

    def _retried(self, call: Call[T]) -> T:
        """A publish call, sent again while its answer cannot be had (its body carries a
        dedup id, so the broker publishes it once)."""
        backoff = t.Backoff()
        attempt = 0
        while True:
            try:
                return self.run(call)
            except t.TidingsClientError as exc:
                if not again(exc, attempt, self.retries):
                    raise
            attempt += 1
            time.sleep(backoff.next())

    def progress(self, published: t.Published) -> t.Progress:
        """Whether function subscriptions still owe `published` (this client's publish
        answer) an evaluation, and its deliveries so far of every kind."""
        return self.run(calls.progress(published))

    def health(self) -> bool:
        return self.run(calls.health())


class SubscriberHandle:
    """A registered subscriber: its id and token, and the calls on its own resources."""

    def __init__(self, client: Client, registration: t.Registration) -> None:
        self.client, self.registration = client, registration
        self.id, self.token = registration.id, registration.token
        self.base = f"/v1/subscribers/{self.id}"

    def _run(self, call: Call[T]) -> T:
        return self.client.run(call, self.token)

    def subscribe(
        self,
        *,
        topics: list[str] | None = None,
        predicates: list[dict[str, Any]] | None = None,
        function: dict[str, Any] | None = None,
    ) -> t.Subscription:
        return self._run(calls.subscribe(self.base, topics, predicates, function))

    def subscriptions(self, page: int = 100) -> list[t.Subscription]:
        """Every subscription, in id order, fetched `page` at a time."""
        found: list[t.Subscription] = []
        after: str | None = ""
        while after is not None:
            subs, after = self._run(calls.subscriptions(self.base, after, page))
            found += subs
        return found

    def subscription(self, subscription_id: str) -> t.Subscription:
        return self._run(calls.subscription(self.base, subscription_id))

    def unsubscribe(self, subscription_id: str) -> None:
        self._run(calls.unsubscribe(self.base, subscription_id))

    def resume(self, subscription_id: str) -> t.Subscription:
        return self._run(calls.subscription(self.base, subscription_id, "/resume"))

    def pull(
        self, max_messages: int = 10, wait: float = 0.0, visibility: float | None = None
    ) -> list[t.Message[None]]:
        call = calls.pull(self.base, max_messages, wait, visibility, self._settle)
        return self._run(call)

    def _settle(self, kind: str, receipts: list[str]) -> None:
        self._run(calls.settle(self.base, kind, receipts))

    def messages(
        self, max_messages: int = 10, wait: float = 20.0, reconnect: bool = True
    ) -> Iterator[t.Message[None]]:
        """Every message as it comes (long polls of up to `wait` seconds); settle each with
        `message.ack()`. With `reconnect`, an unreachable broker (say, restarting) is tried
        again with backoff instead of ending the iteration; a refusal always ends it."""
        backoff = t.Backoff()
        while True:
            try:
                batch = self.pull(max_messages, wait)
            except t.TidingsClientError as exc:
                if not t.passing(exc) or not reconnect:
                    raise
                time.sleep(backoff.next())
                continue
            backoff.reset()
            yield from batch

    def consume(
        self, callback: Callable[[t.Message[None]], None], max_messages: int = 10
    ) -> Consumer:
        """Call `callback(message)` for every message on a background thread, as
        google-cloud-pubsub's `subscribe(callback)` does, until `consumer.cancel()`. The
        callback settles each message with `message.ack()`; a message whose callback raised
        is nacked, for redelivery."""
        return Consumer(self, callback, max_messages)

    def ack(self, receipts: list[str]) -> t.AckResult:
        return self._run(calls.settle(self.base, "ack", receipts))

    def nack(self, receipts: list[str], delay: float = 0.0) -> t.AckResult:
        return self._run(calls.settle(self.base, "nack", receipts, delay))

    def info(self) -> t.SubscriberInfo:
        return self._run(calls.info(self.base))

    def depth(self) -> t.Depth:
        return self._run(calls.depth(self.base))

    def dead_letters(self, limit: int = 100) -> list[t.DeadLetter]:
        return self._run(calls.dead_letters(self.base, limit))

    def redrive(self, ids: list[int] | None = None) -> int:
        return self._run(calls.redrive(self.base, ids))

    def browse(self, limit: int = 100, after: int = 0) -> tuple[list[t.Queued], int | None]:
        """A page of the queue's waiting messages without leasing them (attempts untouched),
        and the `after` of the next page (None on the last)."""
        return self._run(calls.browse(self.base, limit, after))

    def purge(self) -> int:
        """Delete the queue's waiting messages (not the leased ones); how many went."""
        return self._run(calls.purge(self.base))

    def unregister(self) -> None:
        self._run(calls.unregister(self.base))


class Consumer:
    """A running callback consumer: `cancel()` stops it (after the long poll in progress),
    `result(timeout)` waits for it and raises what stopped it (a refusal, say)."""

    POLL_S = 1.0  # how long a poll waits, and so how soon `cancel()` takes effect

    def __init__(
        self,
        handle: SubscriberHandle,
        callback: Callable[[t.Message[None]], None],
        max_messages: int,
    ) -> None:
        self._handle, self._callback, self._max = handle, callback, max_messages
        self._stop = threading.Event()
        self._done: Future[None] = Future()
        self._thread = threading.Thread(target=self._run, name="tidings-consumer", daemon=True)
        self._thread.start()

    def cancel(self) -> None:
        self._stop.set()
        self._thread.join()

    def result(self, timeout: float | None = None) -> None:
        self._done.result(timeout)

    def _run(self) -> None:
        try:
            backoff = t.Backoff()
            while not self._stop.is_set():
                try:
                    batch = self._handle.pull(self._max, self.POLL_S)
                except t.TidingsClientError as exc:
                    if not t.passing(exc):
                        raise
                    self._stop.wait(backoff.next())
                    continue
                backoff.reset()
                for message in batch:
                    self._deliver(message)
        except BaseException as exc:  # handed to whoever waits on result()
            self._done.set_exception(exc)
            return
        self._done.set_result(None)

    def _deliver(self, message: t.Message[None]) -> None:
        try:
            self._callback(message)
        except Exception:
            log.exception("the callback failed on message %s: nacked", message.id)
            message.nack()


class AdminHandle:
    def __init__(self, client: Client, token: str) -> None:
        self.client, self.token = client, token

    def overview(self) -> dict[str, Any]:
        return self.client.run(calls.admin_overview(), self.token)

    def subscribers(self, page: int = 100) -> Iterator[t.SubscriberRecord]:
        """Every subscriber, in id order, fetched `page` at a time."""
        after: str | None = ""
        while after is not None:
            records, after = self.client.run(calls.admin_subscribers(after, page), self.token)
            yield from records

    def delete_subscriber(self, subscriber_id: str) -> None:
        self.client.run(calls.admin_delete(subscriber_id), self.token)
