"""A platform's front door on this machine: an HTTP server on 127.0.0.1 that hands each
request to a function instance as the platform's event (API Gateway's v2 or v1, or the Azure
host's HTTP request), and answers with what the instance answered.

Instances are processes running `tidings.serverless.invoke`, each serving one invocation at
a time, as on the platforms: a request finding none idle starts another (a cold start) up to
`instances`; `cold` starts a fresh one for every request. Anything that speaks HTTP (the
thesis's scenarios, the client, curl) can so be run against the handlers themselves.
"""

from __future__ import annotations

import asyncio
import base64
import dataclasses
import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

import orjson
from starlette.types import Receive, Scope, Send

from tidings.serverless.events import Format, Request, aws_event, aws_response

Platform = Literal["aws", "azure"]
LINE_LIMIT = 64 * 1024 * 1024  # one answer per line: a 4 MiB body, base64, fits many times


@dataclass(frozen=True, slots=True)
class Answer:
    status: int
    headers: dict[str, str]
    body: bytes


class Instance:
    """One function instance: a process, one invocation at a time."""

    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self.proc = proc

    @classmethod
    async def start(cls, platform: Platform, env: Mapping[str, str]) -> Instance:
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "tidings.serverless.invoke", platform,
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
            env=dict(env), limit=LINE_LIMIT,
        )  # fmt: skip
        return cls(proc)

    async def invoke(self, payload: Mapping[str, Any]) -> dict[str, Any]:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(orjson.dumps(payload) + b"\n")
        await self.proc.stdin.drain()
        line = await self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"the function instance ended (exit {await self.proc.wait()})")
        said: dict[str, Any] = orjson.loads(line)
        return said

    async def stop(self) -> None:
        if self.proc.returncode is None:
            assert self.proc.stdin is not None
            self.proc.stdin.close()  # the invocation loop ends with its input
            try:
                await asyncio.wait_for(self.proc.wait(), 10)
            except TimeoutError:
                self.proc.kill()
                await self.proc.wait()


class FrontDoor:
    """The ASGI app of the front door (serve it with uvicorn on 127.0.0.1)."""

    def __init__(
        self,
        platform: Platform = "aws",
        fmt: Format = "v2",
        instances: int = 4,
        cold: bool = False,
        env: Mapping[str, str] | None = None,
    ) -> None:
        self.platform, self.fmt, self.cold = platform, fmt, cold
        self.env = dict(os.environ if env is None else env)
        self._room = asyncio.Semaphore(instances)
        self._idle: list[Instance] = []
        self.started = 0  # instances started: the cold starts

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            while (await receive())["type"] != "lifespan.shutdown":
                await send({"type": "lifespan.startup.complete"})
            await self.close()
            await send({"type": "lifespan.shutdown.complete"})
            return
        if scope["type"] != "http":  # WebSocket: the platforms' HTTP front doors have none
            await send({"type": "websocket.close", "code": 1008})
            return
        answer = await self.handle(await _request(scope, receive))
        headers = [(k.encode(), v.encode()) for k, v in answer.headers.items()]
        await send({"type": "http.response.start", "status": answer.status, "headers": headers})
        await send({"type": "http.response.body", "body": answer.body})

    async def handle(self, request: Request) -> Answer:
        async with self._room:
            instance = self._idle.pop() if self._idle and not self.cold else None
            if instance is None:
                instance = await Instance.start(self.platform, self.env)
                self.started += 1
            try:
                said = await instance.invoke(self._payload(request))
            except BaseException:
                await instance.stop()
                raise
            if self.cold:
                await instance.stop()
            else:
                self._idle.append(instance)
        return self._answer(said["answer"])

    def _payload(self, request: Request) -> dict[str, Any]:
        if self.platform == "aws":
            # as API Gateway says which scheme the caller used (this door's: plain HTTP)
            forwarded = {"x-forwarded-proto": "http", **request.headers}
            return aws_event(dataclasses.replace(request, headers=forwarded), self.fmt)
        query = f"?{request.query}" if request.query else ""
        host = dict(request.headers).get("host", "127.0.0.1")
        return {
            "method": request.method,
            "url": f"http://{host}{request.path}{query}",
            "headers": dict(request.headers),
            "body": base64.b64encode(request.body).decode("ascii"),
        }

    def _answer(self, answer: Mapping[str, Any]) -> Answer:
        if self.platform == "aws":
            return Answer(*aws_response(answer))
        headers = {k.lower(): v for k, v in answer["headers"].items()}
        return Answer(answer["status"], headers, base64.b64decode(answer["body"]))

    async def close(self) -> None:
        idle, self._idle = self._idle, []
        await asyncio.gather(*(instance.stop() for instance in idle))


async def _request(scope: Scope, receive: Receive) -> Request:
    body = bytearray()
    while True:
        message = await receive()
        body += message.get("body", b"")
        if not message.get("more_body"):
            break
    headers: dict[str, str] = {}
    for key, value in scope["headers"]:
        name = key.decode("latin-1").lower()
        text = value.decode("latin-1")
        headers[name] = f"{headers[name]}, {text}" if name in headers else text
    client = scope.get("client") or ("127.0.0.1", 0)
    return Request(
        scope["method"],
        scope["path"],
        scope["query_string"].decode("latin-1"),
        headers,
        bytes(body),
        source_ip=client[0],
    )
