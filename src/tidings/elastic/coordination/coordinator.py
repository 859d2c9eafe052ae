"""The Distributed Coordinator: configuration, membership and the scaling barriers, kept in
ZooKeeper (through kazoo). What it keeps is `records`; the wait at a barrier, `barriers`.

Layout, under `/tidings/<cluster>`:

- `config`: the current views, `ClusterConfig` as JSON (matchers, exit points, access points);
- `members/<id>`: one ephemeral node per running operator (its role and inbox address),
  gone when its process or session dies;
- `scale`: the scale in progress or the last one (`ScaleState`: kind, phase, old and new
  members); operators watch it and act on each phase;
- `scaler`: an ephemeral node held by the session that runs the scale in progress, created
  with the scale and deleted with its last phase: gone while the scale is open, the scaler
  has died, and another process takes the scale over (`take_over`);
- `scales/<n>/<barrier>/<id>`: who has reached a barrier of scale n (`ready`, `switched`,
  `changed`, `done`, `drained`).

Kazoo's calls block and its watches fire on its own thread: every call here runs in a worker
thread, and every watch is handed to the caller's event loop.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import logging
import os
import socket
import threading
from collections.abc import Callable, Iterable
from typing import Any

import msgspec
from kazoo.client import KazooClient
from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError, RolledBackError
from kazoo.exceptions import CancelledError as KazooCancelledError
from kazoo.handlers.threading import KazooTimeoutError

from tidings.elastic.coordination.barriers import wait_barrier
from tidings.elastic.coordination.records import (
    ClusterConfig,
    Member,
    Phase,
    Role,
    ScaleKind,
    ScaleState,
)
from tidings.errors import ErrorCode, TidingsError

log = logging.getLogger("tidings.elastic")
# kazoo reports every lost connection at WARNING; with no logging set up (a CLI command) that
# went to stderr through logging's last resort. Configured logging still receives them.
logging.getLogger("kazoo").addHandler(logging.NullHandler())


def parse_hosts(text: str) -> str:
    """`HOST:PORT[,HOST:PORT...]`, checked; the error names the option."""
    parts = [p.strip() for p in text.split(",") if p.strip()]
    for part in parts:
        host, sep, port = part.rpartition(":")
        if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise TidingsError(
                ErrorCode.CONFIG_INVALID,
                field="zookeeper",
                detail=f"--zookeeper {text!r}: expected HOST:PORT[,HOST:PORT...]",
            )
    if not parts:
        raise TidingsError(
            ErrorCode.CONFIG_INVALID, field="zookeeper", detail="--zookeeper is empty"
        )
    return ",".join(parts)


class Coordinator:
    """One operator's (or tool's) session with the coordinator."""

    def __init__(self, hosts: str, cluster: str = "default", timeout_s: float = 10.0) -> None:
        self.hosts = parse_hosts(hosts)
        self.cluster = cluster
        self.root = f"/tidings/{cluster}"
        self._timeout_s = timeout_s
        self._zk = KazooClient(hosts=self.hosts, timeout=timeout_s)
        self._watches: list[Any] = []
        # scales this session runs (it holds their `scaler` node) -> the scale node's version
        # it last wrote: its next write is a compare-and-set, refused once another process
        # has taken the scale over
        self._running: dict[int, int] = {}
        self._leads: dict[str, Any] = {}  # role -> its kazoo Lock (see `lead`)

    # ------------------------------------------------------------ session

    async def start(self) -> None:
        """Connect, and make the layout's first nodes. A start cancelled or failed on the
        way still ends with the client stopped: kazoo's connecting thread cannot be
        interrupted, so the client is stopped once it is done (left running, a cancelled
        start's client kept its session and its threads, and a process at exit waited for
        them)."""
        started: concurrent.futures.Future[None] = concurrent.futures.Future()
        started.set_running_or_notify_cancel()  # (a cancelled wait cannot cancel it: it runs)
        threading.Thread(
            target=self._start_in_thread, args=(started,), name="tidings-zk-start", daemon=True
        ).start()
        try:
            await asyncio.wrap_future(started)
        except BaseException as exc:
            started.add_done_callback(lambda _: self._stop_in_thread())
            if isinstance(exc, KazooTimeoutError):
                raise TidingsError(
                    ErrorCode.UNAVAILABLE,
                    field="zookeeper",
                    detail=f"ZooKeeper does not answer at {self.hosts}",
                ) from None
            raise

    def _start_in_thread(self, started: concurrent.futures.Future[None]) -> None:
        try:
            self._zk.start(self._timeout_s)
            for path in ("members", "scales"):
                self._zk.ensure_path(f"{self.root}/{path}")
        except BaseException as exc:
            started.set_exception(exc)
        else:
            started.set_result(None)

    def _stop_in_thread(self) -> None:
        def stop() -> None:
            try:
                self._zk.stop()
                self._zk.close()
            except Exception:  # (a thread of its own: nobody else would hear of it)
                log.warning("elastic: the coordinator of %s did not stop", self.root, exc_info=True)

        threading.Thread(target=stop, name="tidings-zk-stop", daemon=True).start()

    async def close(self) -> None:
        await asyncio.to_thread(self._zk.stop)
        await asyncio.to_thread(self._zk.close)

    # ------------------------------------------------------------ membership

    async def register(self, member_id: str, role: Role, address: str) -> None:
        data = msgspec.json.encode(Member(role, address))
        path = f"{self.root}/members/{member_id}"
        try:
            await asyncio.to_thread(self._zk.create, path, data, ephemeral=True)
        except NodeExistsError:
            raise TidingsError(
                ErrorCode.CONFLICT, detail=f"an operator named {member_id!r} is already running"
            ) from None

    async def leave(self, member_id: str) -> None:
        with contextlib.suppress(NoNodeError):
            await asyncio.to_thread(self._zk.delete, f"{self.root}/members/{member_id}")

    async def members(self) -> dict[str, Member]:
        return {member: info for member, (info, _) in (await self.sessions()).items()}

    async def sessions(self) -> dict[str, tuple[Member, int]]:
        """Every running operator, and the coordinator session that holds its node."""
        base = f"{self.root}/members"
        out = {}
        for child in await asyncio.to_thread(self._zk.get_children, base):
            with contextlib.suppress(NoNodeError):
                data, stat = await asyncio.to_thread(self._zk.get, f"{base}/{child}")
                out[child] = (msgspec.json.decode(data, type=Member), stat.ephemeralOwner)
        return out

    async def evict(self, member_id: str, session: int) -> bool:
        """Remove an operator found unreachable from the membership, as its session's expiry
        would, but only the node of that session (not a namesake started since). The
        operator, if it still runs, leaves when it sees its node gone (`watch_member`)."""
        path = f"{self.root}/members/{member_id}"

        def remove() -> bool:
            try:
                _, stat = self._zk.get(path)
                if stat.ephemeralOwner != session:
                    return False
                self._zk.delete(path, version=stat.version)
            except (NoNodeError, BadVersionError):
                return False
            return True

        return await asyncio.to_thread(remove)

    def watch_member(self, member_id: str, on_gone: Callable[[], None]) -> None:
        """`on_gone()` on the caller's loop once this operator's node is gone: it left, or it
        was evicted, or its session expired."""
        loop = asyncio.get_running_loop()

        def changed(data: bytes | None, _stat: Any) -> bool | None:
            if data is None:
                loop.call_soon_threadsafe(on_gone)
                return False  # (kazoo: stop watching)
            return None

        self._watches.append(self._zk.DataWatch(f"{self.root}/members/{member_id}", changed))

    async def address_of(self, member_id: str) -> str:
        try:
            data, _ = await asyncio.to_thread(self._zk.get, f"{self.root}/members/{member_id}")
        except NoNodeError:
            raise TidingsError(
                ErrorCode.UNAVAILABLE, detail=f"operator {member_id!r} is not running"
            ) from None
        return msgspec.json.decode(data, type=Member).address

    def watch_members(self, on_change: Callable[[set[str]], None]) -> None:
        """`on_change(member ids)` on the caller's loop, now and at every change."""
        loop = asyncio.get_running_loop()

        def changed(children: list[str] | None) -> None:
            if children is not None:
                loop.call_soon_threadsafe(on_change, set(children))

        self._watches.append(self._zk.ChildrenWatch(f"{self.root}/members", changed))

    # ------------------------------------------------------------ configuration

    async def config(self) -> ClusterConfig | None:
        try:
            data, _ = await asyncio.to_thread(self._zk.get, f"{self.root}/config")
        except NoNodeError:
            return None
        return msgspec.json.decode(data, type=ClusterConfig)

    async def require_config(self) -> ClusterConfig:
        config = await self.config()
        if config is None:
            raise TidingsError(
                ErrorCode.UNAVAILABLE,
                detail=f"no elastic deployment {self.cluster!r} at {self.hosts}: "
                "start one with `tidings serve --matching elastic`",
            )
        return config

    async def create_config(self, config: ClusterConfig) -> bool:
        """Write the first configuration; False when the deployment already has one."""
        try:
            await asyncio.to_thread(
                self._zk.create, f"{self.root}/config", msgspec.json.encode(config)
            )
        except NodeExistsError:
            return False
        return True

    async def set_config(self, config: ClusterConfig) -> None:
        await asyncio.to_thread(self._zk.set, f"{self.root}/config", msgspec.json.encode(config))

    async def replace_config(self, old: ClusterConfig, new: ClusterConfig) -> bool:
        """Compare-and-set: write `new` if the configuration is still `old` (a deployment
        whose access points are all gone, taken over); False when it changed meanwhile."""
        path = f"{self.root}/config"
        try:
            data, stat = await asyncio.to_thread(self._zk.get, path)
        except NoNodeError:
            return False
        if msgspec.json.decode(data, type=ClusterConfig) != old:
            return False
        try:
            await asyncio.to_thread(self._zk.set, path, msgspec.json.encode(new), stat.version)
        except BadVersionError:
            return False
        return True

    # ------------------------------------------------------------ scales

    async def scale(self) -> ScaleState | None:
        try:
            data, _ = await asyncio.to_thread(self._zk.get, f"{self.root}/scale")
        except NoNodeError:
            return None
        return msgspec.json.decode(data, type=ScaleState)

    async def begin_scale(
        self,
        kind: ScaleKind,
        view: int,
        old: list[str],
        new: list[str],
        *,
        lost: list[str] | None = None,
        exit_points: list[str] | None = None,
        ep_view: int = 0,
        expect: ClusterConfig | None = None,
    ) -> ScaleState:
        """Record a new scale in phase `start`; `Busy` (CONFLICT) while another one runs.
        `expect`: the configuration the scale was planned on; `Busy` too when it has changed
        since (a scale that ran in between), checked in the same transaction."""
        path = f"{self.root}/scale"
        extra: dict[str, Any] = {"lost": lost or [], "exit_points": exit_points or []}
        extra["ep_view"] = ep_view
        config_version = -1
        if expect is not None:
            data, config_stat = await asyncio.to_thread(self._zk.get, f"{self.root}/config")
            if msgspec.json.decode(data, type=ClusterConfig) != expect:
                raise _busy("the configuration changed since the scale was planned")
            config_version = config_stat.version
        try:
            data, stat = await asyncio.to_thread(self._zk.get, path)
        except NoNodeError:
            state, version = ScaleState(1, kind, "start", view, old, new, **extra), None
        else:
            current = msgspec.json.decode(data, type=ScaleState)
            if not current.idle:
                raise _busy()
            state = ScaleState(current.id + 1, kind, "start", view, old, new, **extra)
            version = stat.version
        try:  # compare-and-set: a concurrent begin loses
            written = await asyncio.to_thread(self._write_scale, state, version, config_version)
        except (NodeExistsError, BadVersionError):
            raise _busy() from None
        self._running[state.id] = written
        return state

    def _write_scale(self, state: ScaleState, version: int | None, config_version: int) -> int:
        """Create (`version` None) or compare-and-set the scale node, and create this
        session's `scaler` node; with `config_version` at or above 0, only if the
        configuration is still at that version. Answers the scale node's new version."""
        path = f"{self.root}/scale"
        data = msgspec.json.encode(state)
        tx = self._zk.transaction()
        if config_version >= 0:
            tx.check(f"{self.root}/config", config_version)
        if version is None:
            tx.create(path, data)
        else:
            tx.set_data(path, data, version)
        tx.create(f"{self.root}/scaler", _holder(state.id), ephemeral=True)
        _raise_failed(tx.commit())
        return 0 if version is None else version + 1

    async def take_over(self) -> ScaleState | None:
        """The scale in progress, taken over by this session when its scaler has died (its
        `scaler` node is gone): None when no scale is open; `Busy` while its scaler lives or
        when another process took it over first. One transaction: the scale node, unchanged
        but compare-and-set (a later write of the old scaler, alive after all, is refused),
        and this session's `scaler` node."""
        path = f"{self.root}/scale"
        try:
            data, stat = await asyncio.to_thread(self._zk.get, path)
        except NoNodeError:
            return None
        state = msgspec.json.decode(data, type=ScaleState)
        if state.idle:
            return None

        def write() -> None:
            tx = self._zk.transaction()
            tx.set_data(path, data, stat.version)
            tx.create(f"{self.root}/scaler", _holder(state.id), ephemeral=True)
            _raise_failed(tx.commit())

        try:
            await asyncio.to_thread(write)
        except (NodeExistsError, BadVersionError):
            raise _busy("the scale has a running scaler") from None
        self._running[state.id] = stat.version + 1
        return state

    async def lead(self, role: str, blocking: bool = True) -> bool:
        """Lead `role`: one session of the cluster at a time (kazoo's `Lock` recipe under
        `leaders/<role>`), until this session ends. True once this session leads;
        `blocking=False`: False at once when another one does. Cancelled while waiting, it
        stops contending."""
        lock = self._leads.get(role)
        if lock is None:
            lock = self._leads[role] = self._zk.Lock(f"{self.root}/leaders/{role}", _who())
        if not blocking:
            return bool(await asyncio.to_thread(lock.acquire, False))
        # a thread of its own, not one of the loop's executor: it may wait for hours
        loop = asyncio.get_running_loop()
        attempt: asyncio.Future[bool] = loop.create_future()

        def wait() -> None:
            try:
                won = bool(lock.acquire())
            except BaseException as error:  # (kazoo's CancelledError, once cancelled)
                loop.call_soon_threadsafe(_settle, attempt, False, error)
            else:
                loop.call_soon_threadsafe(_settle, attempt, won, None)

        threading.Thread(target=wait, name=f"tidings-lead-{role}", daemon=True).start()
        try:
            return await asyncio.shield(attempt)
        except asyncio.CancelledError:
            lock.cancel()  # (the waiting thread returns)
            try:
                if await attempt:
                    await asyncio.to_thread(lock.release)
            except KazooCancelledError:
                pass  # the waiting thread's answer to `lock.cancel()`: it never led
            except Exception:
                log.warning("elastic: a cancelled lead of %s was not released", role, exc_info=True)
            raise

    async def scaler(self) -> str | None:
        """Who runs the scale in progress (`host:pid`); None when no session holds it."""
        try:
            data, _ = await asyncio.to_thread(self._zk.get, f"{self.root}/scaler")
        except NoNodeError:
            return None
        holder: bytes = data
        return holder.decode().partition(" ")[2]

    def watch_scaler(self, on_change: Callable[[bool], None]) -> None:
        """`on_change(held)` on the caller's loop, now and whenever the `scaler` node comes
        or goes (`held`: it exists)."""
        loop = asyncio.get_running_loop()

        def changed(_data: bytes | None, stat: Any) -> None:
            loop.call_soon_threadsafe(on_change, stat is not None)

        self._watches.append(self._zk.DataWatch(f"{self.root}/scaler", changed))

    async def set_phase(
        self,
        state: ScaleState,
        phase: Phase,
        config: ClusterConfig | None = None,
        reason: str = "",
        since: dict[str, list[int]] | None = None,
    ) -> ScaleState:
        """Move the scale to `phase`, writing the new configuration in the same transaction.
        A scale this session runs: compare-and-set (`Busy` once another process has taken it
        over), and its `scaler` node goes with its last phase."""
        moved = msgspec.structs.replace(state, phase=phase, reason=reason)
        if since is not None:
            moved = msgspec.structs.replace(moved, since=since)
        version = self._running.get(state.id, -1)
        tx = self._zk.transaction()
        tx.set_data(f"{self.root}/scale", msgspec.json.encode(moved), version)
        if config is not None:
            tx.set_data(f"{self.root}/config", msgspec.json.encode(config))
        if version >= 0 and moved.idle:
            tx.delete(f"{self.root}/scaler")
        # kazoo's asynchronous call, its answer handed to this loop when it comes (as in
        # `arrive`): no worker thread of the loop's executor to wake and wait for
        loop = asyncio.get_running_loop()
        answer: asyncio.Future[list[Any]] = loop.create_future()

        def settle(result: Any) -> None:
            if not answer.done():
                if result.exception is not None:
                    answer.set_exception(result.exception)
                else:
                    answer.set_result(result.value)

        tx.commit_async().rawlink(lambda result: loop.call_soon_threadsafe(settle, result))
        try:
            _raise_failed(await answer)
        except (BadVersionError, NoNodeError):  # (NoNode: its `scaler` node, expired)
            self._running.pop(state.id, None)
            raise _busy(f"scale {state.id} was taken over by another process") from None
        if moved.idle:
            self._running.pop(state.id, None)
        elif version >= 0:
            self._running[state.id] = version + 1
        return moved

    def watch_scale(self, on_change: Callable[[ScaleState | None], None]) -> None:
        """`on_change(state)` on the caller's loop, now and at every change of the scale."""
        loop = asyncio.get_running_loop()

        def changed(data: bytes | None, _stat: Any) -> None:
            state = None if not data else msgspec.json.decode(data, type=ScaleState)
            loop.call_soon_threadsafe(on_change, state)

        self._watches.append(self._zk.DataWatch(f"{self.root}/scale", changed))

    async def arrive(self, scale: int, barrier: str, member: str, data: bytes = b"") -> None:
        path = f"{self.root}/scales/{scale}/{barrier}/{member}"
        # kazoo's asynchronous call, its answer handed to this loop when it comes: no worker
        # thread of the loop's executor to wake and wait for (an operator waits for this in
        # the middle of its inbox loop)
        loop = asyncio.get_running_loop()
        answer: asyncio.Future[None] = loop.create_future()

        def settle(result: Any) -> None:
            if not answer.done():
                failure = result.exception
                if failure is None or isinstance(failure, NodeExistsError):
                    answer.set_result(None)
                else:
                    answer.set_exception(failure)

        created = self._zk.create_async(path, data, makepath=True)
        created.rawlink(lambda result: loop.call_soon_threadsafe(settle, result))
        await answer

    async def arrivals(self, scale: int, barrier: str) -> dict[str, bytes]:
        """Who reached a barrier, with what each said when it did."""
        base = f"{self.root}/scales/{scale}/{barrier}"
        out = {}
        for member in await self.arrived(scale, barrier):
            data, _ = await asyncio.to_thread(self._zk.get, f"{base}/{member}")
            out[member] = data
        return out

    async def arrived(self, scale: int, barrier: str) -> set[str]:
        try:
            return set(
                await asyncio.to_thread(
                    self._zk.get_children, f"{self.root}/scales/{scale}/{barrier}"
                )
            )
        except NoNodeError:
            return set()

    async def wait_barrier(
        self,
        scale: int,
        barrier: str,
        expected: set[str],
        watched: Iterable[str] = (),
        must_live: frozenset[str] = frozenset(),
    ) -> None:
        """Until every expected member has arrived at the barrier; `MemberLost` when a
        `watched` member that has not arrived, or any of `must_live`, is no longer running
        (`barriers.wait_barrier`)."""
        await wait_barrier(self._zk, self.root, scale, barrier, expected, set(watched), must_live)


class Busy(TidingsError):
    """CONFLICT: another scale runs (or ran since the configuration was read): wait for its
    end and try again."""


def _busy(detail: str = "a scale is already in progress") -> Busy:
    return Busy(ErrorCode.CONFLICT, detail=detail)


def _who() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


def _holder(scale: int) -> bytes:
    """The `scaler` node's data: the scale and who runs it."""
    return f"{scale} {_who()}".encode()


def _settle(future: asyncio.Future[bool], value: bool, error: BaseException | None) -> None:
    if not future.done():
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(value)


def _raise_failed(results: list[Any]) -> None:
    """A transaction's first real failure (the others only say they were rolled back)."""
    failed = [r for r in results if isinstance(r, Exception)]
    causes = [r for r in failed if not isinstance(r, RolledBackError)]
    if failed:
        raise (causes or failed)[0]
