"""What the HTTP layer costs a publish of one, on uvicorn's request cycle and on Tidings' own
(`tidings.lightcycle`), measured in the same run (issue #30).

    python benchmarks/http_cycle.py [--rounds R] [--requests N] [--connections C]

Each round starts a server process per cycle, side by side: uvicorn with the broker's
connection guards (`connections.guarded`) and the guard against web pages in front of an
application that reads the body as the publish endpoint does and answers 201 with a
publish answer's bytes. No broker: what is left is the HTTP layer's own work. The client
(a process per server, on uvloop) keeps C connections to it, each sending one
`POST /v1/publications` of 150 bytes at a time, N to each server in all after a warm-up,
both servers loaded at once: this machine's speed drifts by tens of percent within a
minute, and both see the same drift. Prints JSON lines: a header (machine, versions), a
line a round (each server's CPU a request from /proc, and requests/s), and a summary: each
cycle's medians and their ratio (below 1, the light cycle spends less).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import time
from typing import Any

import orjson
import uvloop
from common import emit, machine, versions

from tidings.ports import free_port
from tidings.sim.perf.cpu import cpu_seconds

PATH = b"/v1/publications"
ANSWER = orjson.dumps(
    {
        "id": "0194f3a2b1c4000a1b2c3d4e",
        "published_at": 1795887452.9351892,
        "deliveries": 1,
        "progress_token": "mw6qQbNWyV2x97zvW0_CXQ",
    }
)


def serve(port: int, light: bool) -> None:
    """The server (in a process of its own)."""
    import uvicorn

    from tidings.api.guards import WebGuard
    from tidings.api.io import receive_body
    from tidings.config import Settings
    from tidings.connections import guarded, seated

    async def app(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            while (await receive())["type"] != "lifespan.shutdown":
                await send({"type": "lifespan.startup.complete"})
            await send({"type": "lifespan.shutdown.complete"})
            return
        await receive_body(scope, receive, 1024 * 1024)
        headers = [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(ANSWER))]
        await send({"type": "http.response.start", "status": 201, "headers": headers})
        await send({"type": "http.response.body", "body": ANSWER})

    settings = Settings()
    limits = settings.http
    config = uvicorn.Config(
        WebGuard(app, settings),
        host="127.0.0.1",
        port=port,
        log_config=None,
        access_log=False,
        http=guarded(limits, None, frozenset({PATH}) if light else frozenset()),
        ws=seated(limits),
        limit_concurrency=limits.max_connections,
        timeout_keep_alive=limits.keep_alive_s,
        proxy_headers=False,
        lifespan="on",
    )
    uvicorn.Server(config).run()


async def load(port: int, requests: int, connections: int) -> float:
    """Send `requests` publishes over `connections` connections; the seconds it took."""
    body = b'{"topics":["bench"],"data":"' + b"x" * 120 + b'"}'
    request = (
        b"POST %b HTTP/1.1\r\nhost: 127.0.0.1:%d\r\ncontent-type: application/json\r\n"
        b"content-length: %d\r\n\r\n%b" % (PATH, port, len(body), body)
    )

    async def one(count: int) -> None:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        for _ in range(count):
            writer.write(request)
            head = await reader.readuntil(b"\r\n\r\n")
            assert head.startswith(b"HTTP/1.1 201"), head
            at = head.lower().index(b"content-length: ") + 16
            await reader.readexactly(int(head[at : head.index(b"\r\n", at)]))
        writer.close()

    started = time.perf_counter()
    await asyncio.gather(*(one(requests // connections) for _ in range(connections)))
    return time.perf_counter() - started


def started(light: bool) -> tuple[subprocess.Popen[bytes], int]:
    port = free_port()
    command = [sys.executable, __file__, "--serve", str(port), "--light", str(int(light))]
    return subprocess.Popen(command), port


def ready(port: int, connections: int) -> None:
    deadline = time.monotonic() + 30
    while True:
        try:
            uvloop.run(load(port, connections, connections))
            return
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


def both(ports: list[int], requests: int, connections: int) -> list[float]:
    """Each server loaded by a client process of its own, at once; the seconds each took."""
    clients = [
        subprocess.Popen(
            [sys.executable, __file__, "--client", str(port), "--requests", str(requests),
             "--connections", str(connections)],
            stdout=subprocess.PIPE,
        )
        for port in ports
    ]  # fmt: skip
    return [float(client.communicate()[0]) for client in clients]


def round_of(requests: int, connections: int) -> list[dict[str, Any]]:
    """Both cycles' servers, loaded at once: each one's CPU a request and requests/s."""
    servers = [started(light) for light in (False, True)]
    try:
        for _, port in servers:
            ready(port, connections)
        ports = [port for _, port in servers]
        both(ports, 20 * connections, connections)  # warm
        before = [cpu_seconds(server.pid) for server, _ in servers]
        seconds = both(ports, requests, connections)
        after = [cpu_seconds(server.pid) for server, _ in servers]
        spent = [(a or 0.0) - (b or 0.0) for a, b in zip(after, before, strict=True)]
    finally:
        for server, _ in servers:
            server.terminate()
            server.wait()
    done = requests // connections * connections
    return [
        {
            "cycle": cycle,
            "requests_per_s": round(done / took),
            "server_cpu_us_per_request": round(cpu * 1e6 / done, 1),
        }
        for cycle, took, cpu in zip(("uvicorn", "light"), seconds, spent, strict=True)
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--requests", type=int, default=64_000)
    parser.add_argument("--connections", type=int, default=64)
    parser.add_argument("--serve", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--client", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--light", type=int, default=1, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve(args.serve, bool(args.light))
        return
    if args.client:
        print(uvloop.run(load(args.client, args.requests, args.connections)))
        return
    emit({"benchmark": "http_cycle", "machine": machine(), "versions": versions("uvicorn")})
    runs: dict[str, list[dict[str, Any]]] = {"uvicorn": [], "light": []}
    for _ in range(args.rounds):
        results = round_of(args.requests, args.connections)
        for result in results:
            runs[result["cycle"]].append(result)
        emit(
            {
                "round": results,
                "requests": args.requests,
                "connections": args.connections,
                "load_average": [round(x, 2) for x in os.getloadavg()],
            }
        )
    medians = {
        cycle: {
            "requests_per_s": statistics.median(r["requests_per_s"] for r in results),
            "server_cpu_us_per_request": statistics.median(
                r["server_cpu_us_per_request"] for r in results
            ),
        }
        for cycle, results in runs.items()
    }
    light, heavy = medians["light"], medians["uvicorn"]
    emit(
        {
            "summary": medians,
            "light_over_uvicorn": {
                "server_cpu_us_per_request": round(
                    light["server_cpu_us_per_request"] / heavy["server_cpu_us_per_request"], 3
                ),
                "requests_per_s": round(light["requests_per_s"] / heavy["requests_per_s"], 3),
            },
            "load_average": [round(x, 2) for x in os.getloadavg()],
        }
    )


if __name__ == "__main__":
    main()
