"""The push stream over a WebSocket: framing only. Flow control (prefetch, settling beside
the reader, release on close) is `tidings.delivery.stream.PushStream`'s.

Frames are binary WebSocket frames holding JSON, or MessagePack with `?encoding=msgpack`
(docs/api.md): `messages` from the broker, `ack`/`nack` from the subscriber, `error` for a
malformed frame (the stream goes on) or before the broker closes it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import TYPE_CHECKING, Any, TypeVar

import msgspec
from starlette.routing import WebSocketRoute
from starlette.websockets import WebSocket, WebSocketDisconnect

from tidings.api import answers
from tidings.api.beside import beside
from tidings.api.io import parse_json, parse_msgpack
from tidings.delivery.frames import ENCODINGS, FORMS, Encoding, Form, messages_frame, msgpack_frame
from tidings.delivery.stream import PushStream
from tidings.errors import ErrorCode, TidingsError
from tidings.model import check_receipts, convert, seqs_in_range
from tidings.wire.v1 import ErrorFrame, StreamFrame

if TYPE_CHECKING:
    from tidings.broker import Broker

_FRAME = msgspec.json.Decoder(StreamFrame)
# 503 (the queue held by another broker now: a partition moved): 1013, try again later
CLOSE_CODES = {401: 4401, 403: 4403, 404: 4404, 503: 1013}
log = logging.getLogger("tidings.api")
T = TypeVar("T", bound=str)


def _token(ws: WebSocket) -> str | None:
    scheme, _, token = ws.headers.get("authorization", "").partition(" ")
    if scheme.lower() == "bearer" and token:
        return token.strip()
    return ws.query_params.get("token")


def _prefetch(ws: WebSocket, default: int) -> int:
    raw = ws.query_params.get("prefetch", "")
    return max(1, min(int(raw), 10_000)) if raw.isdigit() else default


def _max_bytes(ws: WebSocket) -> int | None:
    """The largest frame the client reads (`max_bytes`): its batches stay within half."""
    raw = ws.query_params.get("max_bytes", "")
    if not raw:
        return None
    if not raw.isdigit() or int(raw) < 1024:
        raise TidingsError(ErrorCode.INVALID_FIELD, field="max_bytes", detail="at least 1024")
    return int(raw)


def _choice(ws: WebSocket, name: str, choices: tuple[T, ...]) -> T:
    """A query parameter that names one of `choices` (the first is the default)."""
    raw = ws.query_params.get(name, choices[0])
    for choice in choices:
        if raw == choice:
            return choice
    raise TidingsError(ErrorCode.INVALID_FIELD, field=name, detail=" or ".join(choices))


class Framing:
    """How this stream's frames are written and read: JSON or MessagePack."""

    def __init__(self, form: Form = "full", encoding: Encoding = "json") -> None:
        self.form, self.encoding = form, encoding

    def messages(self, batch: list[Any]) -> bytes:
        if self.encoding == "msgpack":
            return msgpack_frame(batch, self.form)
        return messages_frame(batch, self.form)

    def error(self, exc: TidingsError) -> bytes:
        frame = ErrorFrame(answers.error(exc).error)
        if self.encoding == "msgpack":
            return msgspec.msgpack.encode(frame)
        return msgspec.json.encode(frame)

    def frame(self, raw: Any) -> tuple[Any, list[str]]:
        """An ack or nack frame's kind and receipts. A plain JSON frame (no escape, each of
        its two keys written once: a receipt holds no quote) is decoded straight into its
        type, whose pattern checks every receipt; a frame not plain, or refused, is read as
        any body is, for the same answer and the same error. Most of an acknowledgement's
        cost on the broker was reading it three times (issue #30)."""
        if self.encoding == "json":
            data = raw.encode() if isinstance(raw, str) else bytes(raw)
            if b"\\" not in data and data.count(b'"type"') == data.count(b'"receipts"') == 1:
                try:
                    frame = _FRAME.decode(data)
                except msgspec.DecodeError:
                    pass
                else:  # no escape: no line break ends a receipt the pattern's `$` let pass
                    if seqs_in_range(frame.receipts):
                        return frame.type, frame.receipts
        frame = convert(self.read(raw), StreamFrame)
        return frame.type, check_receipts(frame.receipts)

    def read(self, raw: Any) -> Any:
        """A frame from the subscriber: text is JSON; binary is JSON, or MessagePack on a
        MessagePack stream."""
        if isinstance(raw, str):
            return parse_json(raw.encode())
        if self.encoding == "msgpack":
            return parse_msgpack(bytes(raw))
        return parse_json(bytes(raw))


async def _refuse(ws: WebSocket, exc: TidingsError, framing: Framing | None = None) -> None:
    await ws.send_bytes((framing or Framing()).error(exc))
    await ws.close(CLOSE_CODES.get(exc.status, 4400))


async def stream(ws: WebSocket) -> None:
    broker: Broker = ws.app.state.broker
    sid = ws.path_params["subscriber_id"]
    await ws.accept()
    # watched before authenticating: a deletion told during the check still closes it
    with broker.revocations.watch(sid) as revoked:
        try:
            await broker.authenticate(sid, _token(ws))
            broker.quotas.check_stream(sid)
            framing = Framing(_choice(ws, "form", FORMS), _choice(ws, "encoding", ENCODINGS))
            client_max = _max_bytes(ws)
        except TidingsError as exc:
            await _refuse(ws, exc)
            return
        prefetch = _prefetch(ws, broker.settings.queues.prefetch)
        inflight = broker.settings.queues.stream_inflight_bytes
        push = PushStream.sized_by(broker.queues, sid, prefetch, client_max, inflight)
        tasks = [
            asyncio.create_task(_send(ws, push, framing)),
            asyncio.create_task(_receive(ws, push, framing)),
            asyncio.create_task(revoked.wait()),
        ]
        try:
            await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in tasks:
                task.cancel()
            for task in tasks:
                await _ended(task, sid)
            await push.close()
        if revoked.is_set():  # deleted, on this broker or another: say so, then close
            # the client may be gone already: nothing more to tell it then
            with contextlib.suppress(WebSocketDisconnect, RuntimeError, OSError):
                await _refuse(ws, TidingsError(ErrorCode.SUBSCRIBER_NOT_FOUND, id=sid), framing)


async def _ended(task: asyncio.Task[Any], sid: str) -> None:
    """Wait for a cancelled half of the stream; its own end (the client leaving) is normal,
    anything else is logged with whose stream it was."""
    try:
        await task
    except (asyncio.CancelledError, WebSocketDisconnect, ConnectionError):
        pass
    except Exception:
        log.exception("the stream of subscriber %s failed", sid)


async def _send(ws: WebSocket, push: PushStream, framing: Framing) -> None:
    try:
        while True:  # one frame per leased batch: frames, not messages, cost the most
            await ws.send_bytes(framing.messages(await push.next_batch()))
    except TidingsError as exc:  # its queue is served elsewhere now: the client goes there
        await _refuse(ws, exc, framing)


async def _receive(ws: WebSocket, push: PushStream, framing: Framing) -> None:
    """Read frames, never waiting for a commit (the push stream settles beside)."""
    with contextlib.suppress(WebSocketDisconnect):
        while True:
            frame = await ws.receive()
            if frame["type"] == "websocket.disconnect":
                return
            settle = await _parsed(ws, framing, frame.get("bytes") or frame.get("text") or "")
            if settle is not None:
                await push.settle(*settle)


async def _parsed(ws: WebSocket, framing: Framing, raw: Any) -> tuple[Any, list[str]] | None:
    """An ack or nack frame's kind and receipts; a malformed one gets an error frame (None)
    and the stream goes on."""

    try:  # a large frame is read beside the event loop
        return await beside(len(raw), lambda: framing.frame(raw))
    except TidingsError as exc:
        await ws.send_bytes(framing.error(exc))
        return None


routes = [WebSocketRoute("/v1/subscribers/{subscriber_id}/stream", stream)]
