"""For the tests of the HTTP connection layer (`connections`, `onesend`, `lightcycle`): a
real embedded server, a raw socket to it, and a transport that records what it is asked."""

from __future__ import annotations

import contextlib
import dataclasses
import socket
from collections.abc import Iterator
from typing import Any

import pytest

from tidings.config import load_settings
from tidings.server import EmbeddedServer


@contextlib.contextmanager
def embedded(
    tmp_path_factory: pytest.TempPathFactory, name: str, **changes: Any
) -> Iterator[EmbeddedServer]:
    """A server on a data directory of its own, its settings' `changes` made."""
    settings = load_settings({"data_dir": tmp_path_factory.mktemp(name)}, env={})
    with EmbeddedServer(dataclasses.replace(settings, **changes)) as server:
        yield server


def connect(server: EmbeddedServer) -> socket.socket:
    host, port = server.url.removeprefix("http://").split(":")
    return socket.create_connection((host, int(port)), timeout=10)


class Recording:
    """What a transport was asked to do, in order (the event loop's transport is not ours)."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, Any]] = []
        self.closing = False

    def write(self, data: bytes) -> None:
        self.calls.append(("write", bytes(data)))

    def writelines(self, parts: Any) -> None:
        self.calls.append(("writelines", [bytes(p) for p in parts]))

    def close(self) -> None:
        self.calls.append(("close", None))
        self.closing = True

    def is_closing(self) -> bool:
        return self.closing

    def get_extra_info(self, name: str) -> str:
        return f"extra {name}"
