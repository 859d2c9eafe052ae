"""A store in a process of its own (`?process=1` on an SQLite URL): the broker's second core.

The broker is one Python process, and Python runs one thread at a time: the store's work
(applying a commit's operations to the queues, 35-45% of a busy broker's samples) and the
event loop's (HTTP, matching, framing, sending) took turns on one core. Here the store runs
in a child process: every `Store` call is sent over a pipe and answered, so while the
child applies one group commit the broker's loop parses, matches and sends the next.

The calls are the `Store` protocol's and nothing else (a test looking into a store's tables
needs the store itself). Arguments, answers and errors travel pickled; each caller thread
takes one of `PIPES` pipes for its call, and the child answers each pipe on a thread of its
own, so a slow read does not hold up a commit. Only a store no other process shares may be
moved (SQLite: its `watch` is a no-op; PostgreSQL's change feed calls back into the broker).
If the child dies, every call after raises `StoreGone`: the broker fails loudly rather than
answer from nothing. The child ends when the broker's end of its pipes closes (the broker
gone, even by kill -9), closing the store.
"""

from __future__ import annotations

import itertools
import multiprocessing
import pickle
import queue
import threading
from collections.abc import Callable, Iterator
from multiprocessing.connection import Connection
from typing import Any, cast

from tidings.store.base import Change, Store

PIPES = 8  # the committer's thread, the event loop's worker threads (min(32, cores + 4)), spare
STARTUP_S = 60.0
CALLS = frozenset(n for n in dir(Store) if not n.startswith("_")) - {"watch", "close"}
MORE = "_more"  # the next chunk of an iterator the child holds
CHUNK = 1_000


class StoreGone(RuntimeError):
    """The store's process ended: no call can be answered."""


class ProcessStore:
    """A `Store` whose calls run in a child process (`?process=1`)."""

    def __init__(self, url: str) -> None:
        context = multiprocessing.get_context("spawn")  # (fork would copy the broker's threads)
        ends = [context.Pipe() for _ in range(PIPES)]
        self._process = context.Process(
            target=serve, args=(url, [child for _, child in ends]), name="tidings-store"
        )
        self._process.daemon = True
        self._process.start()
        for _, child in ends:
            child.close()
        self._free: queue.SimpleQueue[Connection] = queue.SimpleQueue()
        self._all = [mine for mine, _ in ends]
        self._closed = False
        first = self._all[0]
        try:
            if not first.poll(STARTUP_S):
                raise StoreGone(f"the store's process did not open {url!r} in {STARTUP_S} s")
            status, value = first.recv()
        except (EOFError, OSError) as exc:
            self._stop()
            raise StoreGone(f"the store's process ended while opening it: {exc!r}") from exc
        except StoreGone:
            self._stop()
            raise
        if status != "ok":
            self._stop()
            raise cast(BaseException, value)
        for conn in self._all:
            self._free.put(conn)

    def __getattr__(self, name: str) -> Callable[..., Any]:
        if name not in CALLS:
            raise AttributeError(f"{name!r} is not a Store call")
        return lambda *args, **kwargs: self._call(name, args, kwargs)

    def _call(self, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        if self._closed:
            raise StoreGone("the store is closed")
        request = pickle.dumps((name, args, kwargs))  # (what does not pickle fails here)
        conn = self._free.get()
        try:
            conn.send_bytes(request)
            answer = conn.recv_bytes()
        except (EOFError, OSError) as exc:
            self._free.put(conn)  # (the next call through it learns the same at once)
            raise StoreGone(
                f"the store's process ended (exit code {self._process.exitcode})"
            ) from exc
        except BaseException:  # interrupted mid-call: its answer may still come, so this
            conn.close()  # pipe is never handed to another call
            raise
        self._free.put(conn)
        status, value = pickle.loads(answer)
        if status == "ok":
            return value
        if status == "more":  # an iterator, held by the child: its items a chunk at a time
            return self._iterate(*value)
        raise cast(BaseException, value)

    def _iterate(self, key: int, chunk: list[Any]) -> Iterator[Any]:
        while chunk:
            yield from chunk
            chunk = self._call(MORE, (key,), {})

    def watch(self, on_change: Callable[[Change], None]) -> Callable[[], None]:
        """No other process shares the store (only such stores are moved): nothing to watch."""
        return lambda: None

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._stop()

    def _stop(self) -> None:
        for conn in self._all:  # the child sees its pipes close, closes the store and ends
            conn.close()
        self._process.join(30)
        if self._process.is_alive():
            self._process.kill()
            self._process.join()

    @property
    def pid(self) -> int | None:
        return self._process.pid


def open_in_process(url: str) -> Store:
    return cast(Store, ProcessStore(url))


# ---------------------------------------------------------------------------- the child


def serve(url: str, conns: list[Connection]) -> None:
    """The child: open the store, answer each pipe on a thread of its own until the broker's
    ends close, then close the store."""
    from tidings.store import open_store

    try:
        store = open_store(url)
    except BaseException as exc:  # the broker raises it as its own
        conns[0].send(("error", _sendable(exc)))
        return
    conns[0].send(("ok", None))
    iterators = _Iterators()
    threads = [
        threading.Thread(target=_answer, args=(store, c, iterators), daemon=True) for c in conns
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    store.close()


class _Iterators:
    """Iterators the store answered with (`iter_subscriptions` streams a table), held
    here and sent a chunk at a time: never all of it in either process at once."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._held: dict[int, tuple[Iterator[Any], int]] = {}
        self._keys = itertools.count()

    def first(self, found: Iterator[Any], size: int) -> tuple[str, Any]:
        """`size`: the call's page (a chunk is a page, so a page is read when the caller
        reaches it, as in the store's own process)."""
        with self._lock:
            key = next(self._keys)
            self._held[key] = (found, max(1, size))
        return ("more", (key, self.next(key)))

    def next(self, key: int) -> list[Any]:
        with self._lock:
            found, size = self._held.get(key, (iter(()), 0))
        chunk = list(itertools.islice(found, size))
        if not chunk:
            with self._lock:
                self._held.pop(key, None)
        return chunk


def _answer(store: Store, conn: Connection, iterators: _Iterators) -> None:
    while True:
        try:
            name, args, kwargs = pickle.loads(conn.recv_bytes())
        except (EOFError, OSError):
            return
        answer: tuple[str, Any]
        try:
            if name == MORE:
                answer = ("ok", iterators.next(*args))
            else:
                found = getattr(store, name)(*args, **kwargs)
                if isinstance(found, Iterator):  # (`iter_subscriptions(page)`, the only one)
                    answer = iterators.first(
                        found, int(kwargs.get("page", args[0] if args else CHUNK))
                    )
                else:
                    answer = ("ok", found)
        except Exception as exc:  # the caller's to handle, as if the store were in its process
            answer = ("error", _sendable(exc))
        try:
            data = pickle.dumps(answer)
        except Exception:  # an answer that does not pickle: say so instead
            data = pickle.dumps(("error", RuntimeError(f"the answer to {name} does not travel")))
        try:
            conn.send_bytes(data)
        except OSError:
            return


def _sendable(exc: BaseException) -> BaseException:
    try:
        pickle.loads(pickle.dumps(exc))
    except Exception:
        return RuntimeError(f"{type(exc).__name__}: {exc}")
    return exc
