"""HAProxy in front of several brokers sharing one PostgreSQL store: the high-availability
set-up of the RabbitMQ study, in Tidings' terms (docs/operations.md).

The brokers are stateless over the store, so any broker can serve any request (on a store
cut into partitions, a subscriber's requests go to its partition's owner): the balancer
spreads requests round-robin, checks each broker's `/readyz` (it answers, and so does its
store) every half second, takes a broker out after two failed checks, and sends a request
whose connection failed to another broker. WebSocket streams pass through as tunnels.
"""

from __future__ import annotations

import contextlib
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

import httpx

from tidings.server import stop

MISSING = (
    "HAProxy is required for the balanced cluster: install it (Debian: apt-get install haproxy)."
)


def haproxy_config(
    port: int, brokers: Sequence[str], host: str = "127.0.0.1", partitions: int = 0
) -> str:
    """The configuration for `brokers` ("host:port" each) behind `host:port`. With
    `partitions` (the store's `partitions=N`), a subscriber's requests go to the broker
    owning its queue's partition: CRC-32 of the id in the path, modulo N, as the store
    hashes it; each partition's backend checks `/readyz?partition=k`, which only its owner
    answers 200, so a partition's requests follow its owner when it moves."""
    servers = "\n".join(
        f"    server broker{i} {address} check" for i, address in enumerate(brokers)
    )
    routes, backends = "", ""
    if partitions:
        routes = (
            "    acl subscriber path_reg ^/v1/subscribers/[^/]+\n"
            "    http-request set-var(txn.part) path,field(4,/),crc32,mod("
            f"{partitions}) if subscriber\n"
            "    use_backend partition%[var(txn.part)] if subscriber\n"
        )
        backends = "".join(
            f"""
backend partition{k}
    option httpchk GET /readyz?partition={k}
    http-check expect status 200
    default-server inter 500ms fall 2 rise 1
{servers}
"""
            for k in range(partitions)
        )
    return f"""global
    maxconn 4096

defaults
    mode http
    timeout connect 1s
    timeout client 60s
    timeout server 60s
    timeout tunnel 1h
    # a request that could not reach a broker, or got no answer at all, goes to another;
    # publishing twice is safe to retry (deduplicated by nobody, counted as a duplicate);
    # a 503 is a broker not ready, or one whose partition just moved
    retries 3
    retry-on conn-failure empty-response 503
    option redispatch 1

frontend tidings
    bind {host}:{port}
{routes}    default_backend brokers

backend brokers
    balance roundrobin
    option httpchk GET /readyz
    http-check expect status 200
    default-server inter 500ms fall 2 rise 2
{servers}
{backends}"""


def partitioned(url: str, partitions: int, broker: int, brokers: int) -> str:
    """The store URL of the `broker`-th of `brokers`: the queues in `partitions`
    partitions, of which it prefers every `brokers`-th from its own number."""
    own = ",".join(str(k) for k in range(broker, partitions, brokers)) or str(broker % partitions)
    sep = "&" if "?" in url else "?"
    return f"{url}{sep}layout=log&partitions={partitions}&own={own}"


@contextlib.contextmanager
def haproxy(port: int, brokers: Sequence[str], partitions: int = 0) -> Iterator[str]:
    """Run HAProxy (from the system) in front of `brokers` until the block ends; yields its
    URL once some broker answers through it."""
    binary = shutil.which("haproxy")
    if binary is None:
        raise RuntimeError(MISSING)
    with tempfile.TemporaryDirectory(prefix="tidings-haproxy-") as work:
        config = Path(work) / "haproxy.cfg"
        config.write_text(haproxy_config(port, brokers, partitions=partitions))
        check = subprocess.run([binary, "-c", "-q", "-f", str(config)], capture_output=True)
        if check.returncode != 0:
            raise RuntimeError(f"haproxy refused its configuration: {check.stderr.decode()}")
        log = Path(work) / "haproxy.log"  # a file: a pipe nobody reads would fill and block
        with log.open("wb") as sink:
            proc = subprocess.Popen(
                [binary, "-db", "-f", str(config)], stdout=subprocess.DEVNULL, stderr=sink
            )
        url = f"http://127.0.0.1:{port}"
        try:
            _wait_until_balanced(proc, url, log)
            yield url
        finally:
            stop(proc)


def _wait_until_balanced(
    proc: subprocess.Popen[bytes], url: str, log: Path, timeout_s: float = 15
) -> None:
    deadline = time.monotonic() + timeout_s
    while True:
        with contextlib.suppress(httpx.TransportError):
            if httpx.get(f"{url}/healthz", timeout=1).status_code == 200:
                return
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            raise RuntimeError(f"haproxy did not start: {log.read_text(errors='replace')[-500:]}")
        time.sleep(0.05)
