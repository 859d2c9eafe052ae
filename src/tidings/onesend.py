"""An HTTP answer's head and body in one send.

uvicorn writes an answer's head (status line and headers) and then its body, two writes and
so two `send` system calls and two TCP segments for every answer (one send less took about
5% of the broker's CPU a message off one publish per request, issue #30). `OneSend` is the
transport one request's cycle writes through: it holds the first write (the head) and sends
it with the next (the body) in one `writelines`, or alone at the loop's next turn if none
comes in the same turn (a `HEAD` answer, one that streams), and before a close. An interim
answer (`100 Continue`, which the client waits for before it sends the body) goes at once.
"""

from __future__ import annotations

import asyncio
from typing import Any

INTERIM = b"HTTP/1.1 1"  # an interim answer, sent at once: the final one is still to come


class OneSend:
    __slots__ = ("_first", "_held", "_transport")

    def __init__(self, transport: asyncio.Transport) -> None:
        self._transport = transport
        self._held: bytes | None = None
        self._first = True

    def write(self, data: bytes | bytearray | memoryview) -> None:
        if self._first and not bytes(data[:10]).startswith(INTERIM):  # (a 100 Continue: now)
            self._first = False
            self._held = bytes(data)
            asyncio.get_running_loop().call_soon(self.flush)
            return
        held, self._held = self._held, None
        if held is None:
            self._transport.write(data)
        else:
            self._transport.writelines((held, data))

    def flush(self) -> None:
        """Send what is held, if anything (the connection open)."""
        held, self._held = self._held, None
        if held is not None and not self._transport.is_closing():
            self._transport.write(held)

    def close(self) -> None:
        self.flush()
        self._transport.close()

    def is_closing(self) -> bool:
        return self._transport.is_closing()

    def __getattr__(self, name: str) -> Any:  # the rest as the transport has it
        return getattr(self._transport, name)
