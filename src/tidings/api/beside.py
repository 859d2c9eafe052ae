"""Large bodies are decoded and checked beside the event loop, in a small pool of threads
(issue #28).

A body is read in time linear in its containers, but a Python step per container is still
seconds for the worst 4 MiB (1.9 M two-byte MessagePack arrays held `/healthz` 5.5 s). In a
thread, that work hands the interpreter back to the event loop every switch interval, so
every other client is still answered while it runs. Bodies under `BESIDE_BYTES` are read in
place: a thread's hand-off costs more than they do. At most `THREADS` bodies are read at
once; the rest wait their turn in the pool's queue, already read, so bounded by the
server's connections and body limits.

A decoder (orjson, msgspec) holds the interpreter for its whole call, and the cyclic
garbage collector it sets off as it builds millions of containers was 80% of that time,
each pass walking the whole heap. So it runs with the collector paused (`decoded`): only
it runs meanwhile, whatever the thread, and the collector is back on once it returns.
"""

from __future__ import annotations

import asyncio
import gc
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

T = TypeVar("T")
BESIDE_BYTES = 64 * 1024  # a body this large is read in the pool
THREADS = 2  # bodies read at once, at most

_pool: list[ThreadPoolExecutor] = []  # made at the first large body, kept for the process
_making = threading.Lock()
_paused = threading.Lock()  # one decoder at a time pauses the collector


def _executor() -> ThreadPoolExecutor:
    with _making:
        if not _pool:
            _pool.append(ThreadPoolExecutor(THREADS, thread_name_prefix="tidings-bodies"))
        return _pool[0]


async def beside(size: int, work: Callable[[], T]) -> T:
    """`work()`, reading a body of `size` bytes: in the pool when it is large."""
    if size < BESIDE_BYTES:
        return work()
    return await asyncio.get_running_loop().run_in_executor(_executor(), work)


def decoded(decode: Callable[[bytes], T], body: bytes) -> T:
    """`decode(body)`; for a large body, with the cyclic garbage collector paused."""
    if len(body) < BESIDE_BYTES:
        return decode(body)
    with _paused:
        was_on = gc.isenabled()
        gc.disable()
        try:
            return decode(body)
        finally:
            if was_on:
                gc.enable()
