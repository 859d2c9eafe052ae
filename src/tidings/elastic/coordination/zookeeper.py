"""A standalone ZooKeeper of its own, for tests, benchmarks and `tidings serve --matching
elastic` without `--zookeeper`: Debian's `zookeeper` package run on a free port in a
temporary directory, stopped with its owner."""

from __future__ import annotations

import contextlib
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from tidings.errors import ErrorCode, TidingsError
from tidings.ports import free_port

JARS = Path("/usr/share/java")
MAIN = "org.apache.zookeeper.server.ZooKeeperServerMain"
INSTALL = "ZooKeeper is not installed: apt-get install -y zookeeper (Debian), or give --zookeeper"


def classpath() -> str | None:
    """The server's class path, or None when ZooKeeper or Java is missing."""
    jar = JARS / "zookeeper.jar"
    if not jar.exists() or shutil.which("java") is None:
        return None
    return f"/etc/zookeeper/conf:{jar}"


def _answers(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5) as s:
            s.sendall(b"srvr")
            return b"Zookeeper version" in s.recv(1024)
    except OSError:
        return False


def _config(port: int, data: Path) -> str:
    """Loopback only (given a port alone, ZooKeeper listens on every interface and anyone
    who reaches the machine could rewrite the deployment's configuration), no admin server,
    the two four-letter words the start-up check uses."""
    return "\n".join(
        [
            "tickTime=2000",
            f"dataDir={data}",
            f"clientPort={port}",
            "clientPortAddress=127.0.0.1",
            "admin.enableServer=false",
            "4lw.commands.whitelist=srvr,ruok",
            "",
        ]
    )


@contextlib.contextmanager
def local_zookeeper(timeout_s: float = 30.0) -> Iterator[str]:
    """Start a ZooKeeper; yields its `host:port`; stops it and removes its data after."""
    path = classpath()
    if path is None:
        raise TidingsError(ErrorCode.UNAVAILABLE, field="zookeeper", detail=INSTALL)
    port = free_port()
    with tempfile.TemporaryDirectory(prefix="tidings-zk-") as tmp:
        log = (Path(tmp) / "zookeeper.log").open("wb")
        config = Path(tmp) / "zoo.cfg"
        config.write_text(_config(port, Path(tmp) / "data"))
        cmd = ["java", "-Xmx256m", "-cp", path, MAIN, str(config)]
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
        try:
            deadline = time.monotonic() + timeout_s
            while not _answers(port):
                if proc.poll() is not None or time.monotonic() > deadline:
                    said = (Path(tmp) / "zookeeper.log").read_text(errors="replace")[-400:]
                    raise TidingsError(
                        ErrorCode.UNAVAILABLE,
                        field="zookeeper",
                        detail=f"ZooKeeper did not start: {said}",
                    )
                time.sleep(0.1)
            yield f"127.0.0.1:{port}"
        finally:
            proc.terminate()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            log.close()
