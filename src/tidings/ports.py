"""A free TCP port on 127.0.0.1, for what must name a port before it binds it (a broker
process to start, a ZooKeeper, an experiment's regions). What can bind port 0 itself should:
a port only looked up may be taken before it is bound."""

from __future__ import annotations

import socket


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
