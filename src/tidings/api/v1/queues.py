"""A subscriber's queue under /v1: pulling (leasing) messages, acknowledging and releasing
them by their receipts, its dead letters and redriving them."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from tidings.api import answers
from tidings.api.answers import answer
from tidings.api.common import RECEIPTS_BODY, owner
from tidings.api.io import body_as, query_as
from tidings.api.operations import Operation, described
from tidings.api.serve import listable
from tidings.broker import Broker
from tidings.delivery.frames import Form, batch_bytes, messages_answer, msgpack_answer
from tidings.errors import ErrorCode, TidingsError
from tidings.model import check_receipts
from tidings.store.base import Message
from tidings.wire import v1 as w
from tidings.wire.base import AckBody, Settled

S = "/v1/subscribers/{subscriber_id}"


@described(
    Operation(
        query=w.pull_query, answer=w.Messages, token=True, answer_media=("application/msgpack",)
    )
)
async def pull(request: Request) -> Response:
    """Lease up to `max` messages, waiting up to `wait` seconds for the first; their bodies
    come to at most the batch bound (`GET /v1/limits`) and half of `max_bytes`, the bytes
    this client reads of an answer (one larger message comes alone)."""
    broker, sid = await owner(request)
    q = query_as(request, w.pull_query(broker.settings.queues))
    # the lease takes one of the subscriber's turns, but a long poll waits holding none
    messages = await broker.pull(sid, q.max, q.wait, q.visibility, batch_bytes(q.max_bytes))
    async with broker.turn(sid):
        body, media = _encoded(messages, q.encoding, q.form)
        if q.max_bytes is not None and len(body) > q.max_bytes:
            await _unreadable(broker, sid, messages, len(body), q.max_bytes)
    return Response(body, media_type=media)


def _encoded(messages: list[Message], encoding: str, form: Form) -> tuple[bytes, str]:
    # encoded by the push channels' own framing: bodies embedded as stored, not re-encoded
    if encoding == "msgpack":
        return msgpack_answer(messages, form), "application/msgpack"
    return messages_answer(messages, form), "application/json"


async def _unreadable(
    broker: Broker, sid: str, messages: list[Message], size: int, most: int
) -> None:
    """One message whose answer is longer than the client reads: handed back at once (its
    attempt counts), and the client told how much it would have to read."""
    await broker.release(sid, [m.receipt for m in messages])
    raise TidingsError(ErrorCode.ANSWER_TOO_LARGE, field="max_bytes", size=size, limit=most)


@described(Operation(AckBody, answer=Settled, token=True))
async def ack(request: Request) -> Response:
    """Acknowledge (delete) leased messages by their receipts."""
    broker, sid = await owner(request)
    async with broker.turn(sid):  # the body's reading too: one of the subscriber's turns
        _, body = await body_as(request, AckBody, RECEIPTS_BODY)
        return answer(answers.settled(await broker.ack(sid, check_receipts(body.receipts))))


@described(Operation(w.NackBody, answer=Settled, token=True))
async def nack(request: Request) -> Response:
    """Release leased messages for redelivery, after `delay` seconds."""
    broker, sid = await owner(request)
    async with broker.turn(sid):
        _, body = await body_as(request, w.NackBody, RECEIPTS_BODY)
        result = await broker.nack(sid, check_receipts(body.receipts), body.delay)
        return answer(answers.settled(result))


@described(Operation(query=w.dead_letters_query, answer=w.DeadLetters, token=True))
async def dead_letters(request: Request) -> Response:
    """The subscriber's dead letters, oldest first."""
    broker, sid = await owner(request)
    q = query_as(request, w.DeadLettersQuery)
    async with broker.turn(sid):
        letters = await broker.dead_letters(sid, q.limit)
        listed = {"dead_letters": listable(letters, answers.dead_letter)}
        return answer(listed)


@described(Operation(w.RedriveBody, False, answer=w.Redriven, token=True))
async def redrive(request: Request) -> Response:
    """Move dead letters (all, or the given ids) back to the queue."""
    broker, sid = await owner(request)
    async with broker.turn(sid):
        _, body = await body_as(request, w.RedriveBody, RECEIPTS_BODY, allow_empty=True)
        return answer(w.Redriven(await broker.redrive(sid, body.ids)))


routes = [
    Route(f"{S}/messages", pull, methods=["GET"]),
    Route(f"{S}/messages/ack", ack, methods=["POST"]),
    Route(f"{S}/messages/nack", nack, methods=["POST"]),
    Route(f"{S}/dead-letters", dead_letters, methods=["GET"]),
    Route(f"{S}/dead-letters/redrive", redrive, methods=["POST"]),
]
