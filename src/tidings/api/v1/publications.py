"""Publishing under /v1: one publication, or a batch; a publication's progress.

`POST /v1/publications` is the hottest call a broker takes, so its endpoint is a pure ASGI
app: no request object, exception or middleware layers (the profile is in docs/perf.md).
The route serves it within the application, and `tidings.api.lane.PublishLane` calls the
very same endpoint in front of the application, skipping the framework's routing."""

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
from tidings.api.io import (
    SIMULATION_HEADER,
    bearer,
    header,
    is_msgpack,
    parse_body,
    query_as,
    read_body,
    receive_body,
    scope_bearer,
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
HEADERS = [(b"content-type", b"application/json")]


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
    if isinstance(raw, dict) and isinstance(raw.get("data"), bytes | bytearray):
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


class Publish:
    """Publish one publication: its topics, attributes, function types and data."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self.answer(scope["app"].state.broker, scope, receive, send)

    async def answer(self, broker: Broker, scope: Scope, receive: Receive, send: Send) -> int:
        """Answer the request; its status. Errors are answered here as the application's
        handlers answer them (`tidings.api.errors`): a JSON error, a JSON 500 for the
        unexpected, the connection kept."""
        try:
            status, body = 201, await self._publish(broker, scope, receive)
        except TidingsError as exc:
            status, body = exc.status, msgspec.json.encode(answers.error(exc))
        except Exception:
            log.exception("unhandled error on POST %s", PATH)
            status = 500
            body = msgspec.json.encode(answers.error(TidingsError(ErrorCode.INTERNAL)))
        headers = [*HEADERS, (b"content-length", str(len(body)).encode())]
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": body})
        return status

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


@described(
    Operation(
        w.BatchBody,
        query=w.batch_query,
        answer=w.BatchAnswer,
        status=201,
        body_media=("application/msgpack",),
        headers=(SIMULATION_HEADER,),
    )
)
async def publish_batch(request: Request) -> Response:
    """Publish many publications in one call (one group commit)."""
    settings = settings_of(request)
    kind = query_as(request, w.BatchQuery).answer
    limits = settings.limits
    body = await read_body(request, limits.max_publication_bytes * 16)
    content_type = request.headers.get("content-type", "")
    simulated = scope_simulation(request.scope) is not None
    packed = is_msgpack(content_type)
    inputs = await beside(
        len(body),
        lambda: batch_inputs(parse_body(body, content_type), settings, simulated, packed),
    )
    results = await request.app.state.broker.publish_batch(inputs, bearer(request))
    if kind == "count":
        deliveries = sum(r.deliveries for r in results)
        return answer(w.BatchCounts(published=len(results), deliveries=deliveries), 201)
    return answer(w.BatchCounts(publications=[answers.published(r) for r in results]), 201)


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
    Route(f"{PATH}/batch", publish_batch, methods=["POST"]),
    Route(PATH + "/{publication_id}", progress, methods=["GET"]),
]
