"""The push stream: one WebSocket per subscriber, acknowledgements on the same socket.

At most `prefetch` messages are unacknowledged at once, so a slow subscriber holds the
broker to a bounded amount of work and memory; the rest waits in its durable queue.
Messages still unacknowledged when the socket closes are released for redelivery.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import TYPE_CHECKING, Any

import orjson
from starlette.websockets import WebSocket, WebSocketDisconnect

from tidings.api.io import parse_json
from tidings.api.schemas import StreamFrame
from tidings.api.serve import servable
from tidings.errors import ErrorCode, TidingsError
from tidings.model import check_receipts, convert

if TYPE_CHECKING:
    from tidings.broker import Broker

CLOSE_CODES = {401: 4401, 403: 4403, 404: 4404}
SETTLING = 64  # acks and nacks of one stream being committed at once, at most
SETTLE_WAIT_S = 10.0  # at close, for the acks already read


class Flow:
    """Receipts in flight, and a wake-up when room frees."""

    def __init__(self, prefetch: int) -> None:
        self.prefetch = prefetch
        self.inflight: set[str] = set()
        self.room = asyncio.Event()
        self.settling: set[asyncio.Task[None]] = set()  # acks and nacks being committed

    def free(self) -> int:
        return self.prefetch - len(self.inflight)

    def settle(self, receipts: list[str]) -> None:
        self.inflight.difference_update(receipts)
        self.room.set()


def _token(ws: WebSocket) -> str | None:
    scheme, _, token = ws.headers.get("authorization", "").partition(" ")
    if scheme.lower() == "bearer" and token:
        return token.strip()
    return ws.query_params.get("token")


def _prefetch(ws: WebSocket, default: int) -> int:
    raw = ws.query_params.get("prefetch", "")
    return max(1, min(int(raw), 10_000)) if raw.isdigit() else default


async def stream(ws: WebSocket) -> None:
    broker: Broker = ws.app.state.broker
    sid = ws.path_params["subscriber_id"]
    await ws.accept()
    # watched before authenticating: a deletion told during the check still closes it
    with broker.revocations.watch(sid) as revoked:
        try:
            await broker.authenticate(sid, _token(ws))
        except TidingsError as exc:
            await ws.send_bytes(orjson.dumps({"type": "error", **exc.to_dict()}))
            await ws.close(CLOSE_CODES.get(exc.status, 4400))
            return
        flow = Flow(_prefetch(ws, broker.settings.queues.prefetch))
        tasks = [
            asyncio.create_task(_send(ws, broker, sid, flow)),
            asyncio.create_task(_receive(ws, broker, sid, flow)),
            asyncio.create_task(revoked.wait()),
        ]
        try:
            await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in tasks:
                task.cancel()
            for task in tasks:
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task
            if flow.settling:  # acks already read are committed before anything is released
                await asyncio.wait(set(flow.settling), timeout=SETTLE_WAIT_S)
            if flow.inflight:  # hand them back now rather than after the visibility timeout
                await broker.nack(sid, list(flow.inflight))
        if revoked.is_set():  # deleted, on this broker or another: say so, then close
            gone = TidingsError(ErrorCode.SUBSCRIBER_NOT_FOUND, id=sid)
            with contextlib.suppress(Exception):
                await ws.send_bytes(orjson.dumps({"type": "error", **gone.to_dict()}))
                await ws.close(CLOSE_CODES[gone.status])


async def _send(ws: WebSocket, broker: Broker, sid: str, flow: Flow) -> None:
    from tidings.api.v1 import message_json

    while True:
        if flow.free() <= 0:
            flow.room.clear()
            await flow.room.wait()
            continue
        batch = await broker.pull(sid, min(flow.free(), 500), wait_s=5.0)
        served = await servable(broker, sid, batch, message_json)
        if served:  # one frame per leased batch: frames, not messages, cost the most
            flow.inflight.update(served)
            frame = {"type": "messages", "messages": list(served.values())}
            await ws.send_bytes(orjson.dumps(frame))


async def _receive(ws: WebSocket, broker: Broker, sid: str, flow: Flow) -> None:
    """Read frames, never waiting for a commit: a reader held up by a slow commit stops
    reading the socket, the client's pongs go unanswered, and the stream is dropped (with
    its messages released: duplicates). Settling runs beside it, at most `SETTLING` at once."""
    with contextlib.suppress(WebSocketDisconnect):
        while True:
            frame = await ws.receive()
            if frame["type"] == "websocket.disconnect":
                return
            settle = await _parsed(ws, frame.get("bytes") or frame.get("text") or "")
            if settle is None:
                continue
            if len(flow.settling) >= SETTLING:
                await asyncio.wait(flow.settling, return_when=asyncio.FIRST_COMPLETED)
            task = asyncio.create_task(_settle(broker, sid, flow, *settle))
            flow.settling.add(task)
            task.add_done_callback(flow.settling.discard)


async def _parsed(ws: WebSocket, raw: Any) -> tuple[str, list[str]] | None:
    """An ack or nack frame's kind and receipts; a malformed one gets an error frame (None)
    and the stream goes on."""
    try:
        text = raw.encode() if isinstance(raw, str) else bytes(raw)
        frame = convert(parse_json(text), StreamFrame)
        return frame.type, check_receipts(frame.receipts)
    except TidingsError as exc:
        await ws.send_bytes(orjson.dumps({"type": "error", **exc.to_dict()}))
        return None


async def _settle(broker: Broker, sid: str, flow: Flow, kind: str, receipts: list[str]) -> None:
    if kind == "ack":
        await broker.ack(sid, receipts)
    else:
        await broker.nack(sid, receipts)
    flow.settle(receipts)
