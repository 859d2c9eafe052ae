"""Publishing under /v1: one publication, or a batch; a publication's progress.

`POST /v1/publications` and `POST /v1/publications/batch` are the hottest calls a broker
takes, so their endpoints are pure ASGI apps: no request object, exception or middleware
layers (the profile is in docs/perf.md). The routes serve them within the application, and
`tidings.api.lane.PublishLane` calls the very same endpoints in front of the application,
skipping the framework's routing."""

from __future__ import annotations

import base64
import logging
from typing import Any

import msgspec
import orjson
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from tidings.api import answers
from tidings.api.answers import answer
from tidings.api.beside import beside
from tidings.api.common import broker_of, settings_of
from tidings.api.errors import retry_after
from tidings.api.io import (
    SIMULATION_HEADER,
    bearer,
    header,
    is_msgpack,
    parse_body,
    query_as,
    receive_body,
    scope_bearer,
    scope_query_as,
    scope_simulation,
)
from tidings.api.operations import Operation, described
from tidings.broker import Broker, PublicationInput
from tidings.config import Settings
from tidings.delivery.frames import BATCH_BYTES, largest_answer
from tidings.errors import ErrorCode, TidingsError
from tidings.model import convert, parse_publication_body
from tidings.wire import v1 as w

log = logging.getLogger("tidings.api")
PATH = "/v1/publications"
BATCH_PATH = PATH + "/batch"
HEADERS = [(b"content-type", b"application/json")]
BINARY = (bytes, bytearray)  # MessagePack's `bin` (a tuple: a union is built at each call)


def publication_input(
    raw: Any, settings: Settings, simulated: bool = False, packed: bool = True
) -> PublicationInput:
    """A publication from its decoded body. Binary `data` (MessagePack `bin`) is kept as its
    base64 text, marked `data_encoding: base64`; binary anywhere else has no JSON form.
    `packed`: the body was MessagePack (a JSON body holds nothing binary to look for)."""
    encoding, dedup_id = "json", None
    if isinstance(raw, dict) and "dedup_id" in raw:  # checked by the wire shape already
        raw = dict(raw)
        dedup_id = raw.pop("dedup_id")
    if isinstance(raw, dict) and isinstance(raw.get("data"), BINARY):
        raw = {**raw, "data": base64.b64encode(raw["data"]).decode()}
        encoding = "base64"
    data, topics, attributes, ftypes = parse_publication_body(raw, settings.limits)
    try:
        if packed:
            orjson.dumps(data)
    except orjson.JSONEncodeError:
        raise TidingsError(
            ErrorCode.INVALID_FIELD,
            field="data",
            detail="binary data is taken only as the whole of data",
        ) from None
    return PublicationInput(data, topics, attributes, ftypes, encoding, dedup_id, simulated)


class Endpoint:
    """A publish route's pure ASGI endpoint: the application's route calls it, the publish
    lane (`tidings.api.lane`) its `answer`. Errors are answered here as the application's
    handlers answer them (`tidings.api.errors`): a JSON error with its `Retry-After`, a JSON
    500 for the unexpected, the connection kept."""

    path = ""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self.answer(scope["app"].state.broker, scope, receive, send)

    async def answer(self, broker: Broker, scope: Scope, receive: Receive, send: Send) -> int:
        """Answer the request; its status."""
        status, headers = 201, list(HEADERS)
        try:
            body = await self._publish(broker, scope, receive)
        except TidingsError as exc:
            status, body = exc.status, msgspec.json.encode(answers.error(exc))
            if retry := retry_after(exc):
                headers.append((b"retry-after", retry.encode()))
        except Exception:
            log.exception("unhandled error on POST %s", self.path)
            status = 500
            body = msgspec.json.encode(answers.error(TidingsError(ErrorCode.INTERNAL)))
        headers.append((b"content-length", str(len(body)).encode()))
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": body})
        return status

    async def _publish(self, broker: Broker, scope: Scope, receive: Receive) -> bytes:
        """The answer's body."""
        raise NotImplementedError


class Publish(Endpoint):
    """Publish one publication: its topics, attributes, function types and data."""

    path = PATH

    async def _publish(self, broker: Broker, scope: Scope, receive: Receive) -> bytes:
        settings = broker.settings
        body = await receive_body(scope, receive, settings.limits.max_publication_bytes)
        content_type, simulated = (
            header(scope, b"content-type"),
            scope_simulation(scope) is not None,
        )

        def read() -> PublicationInput:
            raw = parse_body(body, content_type)
            convert(raw, w.PublicationBody)
            return publication_input(raw, settings, simulated, is_msgpack(content_type))

        item = await beside(len(body), read)
        published = await broker.publish(item, scope_bearer(scope))
        return msgspec.json.encode(answers.published(published))


publish = described(
    Operation(
        w.PublicationBody,
        answer=w.Published,
        status=201,
        body_media=("application/msgpack",),
        headers=(SIMULATION_HEADER,),
    )
)(Publish())


class PublishBatch(Endpoint):
    """Publish many publications in one call (one group commit)."""

    path = BATCH_PATH

    async def _publish(self, broker: Broker, scope: Scope, receive: Receive) -> bytes:
        settings = broker.settings
        kind = scope_query_as(scope, w.BatchQuery).answer
        limits = settings.limits
        body = await receive_body(scope, receive, limits.max_publication_bytes * 16)
        content_type = header(scope, b"content-type")
        simulated = scope_simulation(scope) is not None
        packed = is_msgpack(content_type)
        inputs = await beside(
            len(body),
            lambda: batch_inputs(parse_body(body, content_type), settings, simulated, packed),
        )
        results = await broker.publish_batch(inputs, scope_bearer(scope))
        if kind == "count":
            deliveries = sum(r.deliveries for r in results)
            return msgspec.json.encode(w.BatchCounts(published=len(results), deliveries=deliveries))
        return msgspec.json.encode(
            w.BatchCounts(publications=[answers.published(r) for r in results])
        )


publish_batch = described(
    Operation(
        w.BatchBody,
        query=w.batch_query,
        answer=w.BatchAnswer,
        status=201,
        body_media=("application/msgpack",),
        headers=(SIMULATION_HEADER,),
    )
)(PublishBatch())


def batch_inputs(
    raw: Any, settings: Settings, simulated: bool, packed: bool = True
) -> list[PublicationInput]:
    """A batch's publications from its decoded body, each checked; an error names which."""
    convert(raw, w.BatchBody)
    items = raw["publications"]
    limits = settings.limits
    if len(items) > limits.max_batch:
        raise TidingsError(
            ErrorCode.LIMIT_EXCEEDED,
            field="publications",
            detail=f"at most {limits.max_batch} publications per batch",
        )
    inputs = []
    for i, item in enumerate(items):
        try:
            inputs.append(publication_input(item, settings, simulated, packed))
        except TidingsError as exc:
            exc.field = (
                f"publications[{i}].{exc.field}"
                if exc.field not in (None, "$")
                else f"publications[{i}]"
            )
            raise
    return inputs


@described(Operation(query=w.progress_query, answer=w.Progress))
async def progress(request: Request) -> Response:
    """A publication's progress: whether function subscriptions still owe it an evaluation
    (they run after the publish is answered), and its deliveries so far, of every kind. For
    its publisher, who gives the publish answer's `progress_token` (or the admin, with the
    admin token): any other caller, and an unknown id, hear false and 0."""
    pid = request.path_params["publication_id"]
    token = query_as(request, w.ProgressQuery).token
    evaluating, deliveries = await broker_of(request).progress(pid, token, bearer(request))
    return answer(w.Progress(pid, evaluating, deliveries))


@described(Operation(answer=w.Limits))
async def limits(request: Request) -> Response:
    """What this broker takes and sends: the publication limit, the largest answer or
    stream frame a client must read, the batch bound, the dedup window; and how long a
    subscription made through another broker on its store may take to match here."""
    settings = settings_of(request)
    limit = settings.limits
    shared = settings.serverless.enabled or settings.resolved_store_url.startswith("postgres")
    return answer(
        w.Limits(
            max_publication_bytes=limit.max_publication_bytes,
            max_answer_bytes=largest_answer(limit.max_publication_bytes),
            max_batch_bytes=BATCH_BYTES,
            dedup_window_s=limit.dedup_window_s,
            staleness_s=settings.subscriptions.staleness_s if shared else 0.0,
        )
    )


routes = [
    Route("/v1/limits", limits, methods=["GET"]),
    Route(PATH, publish, methods=["POST"], name="publish"),
    Route(BATCH_PATH, publish_batch, methods=["POST"], name="publish_batch"),
    Route(PATH + "/{publication_id}", progress, methods=["GET"]),
]
