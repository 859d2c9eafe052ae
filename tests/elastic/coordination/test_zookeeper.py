"""The ZooKeeper a deployment starts for itself listens on loopback only."""

from __future__ import annotations

from pathlib import Path

from tidings.elastic.coordination.zookeeper import _answers


def listening_addresses(port: int) -> set[str]:
    """The local addresses of the sockets listening on `port` (/proc/net/tcp and tcp6)."""
    found = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            local, state = line.split()[1], line.split()[3]
            address, hex_port = local.rsplit(":", 1)
            if state == "0A" and int(hex_port, 16) == port:  # 0A: LISTEN
                found.add(address)
    return found


def test_the_deployment_s_zookeeper_listens_on_loopback_only(zookeeper: str) -> None:
    port = int(zookeeper.rsplit(":", 1)[1])
    assert _answers(port)
    found = listening_addresses(port)
    # 127.0.0.1, as IPv4 or as Java's IPv4-mapped ::ffff:127.0.0.1; never :: or 0.0.0.0
    assert found and found <= {"0100007F", "0000000000000000FFFF00000100007F"}
