"""One embedded broker for the simulator tests."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tidings.config import load_settings
from tidings.server import EmbeddedServer


@pytest.fixture(scope="module")
def broker_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    data_dir: Path = tmp_path_factory.mktemp("broker")
    with EmbeddedServer(load_settings({"data_dir": data_dir, "event_log": False})) as server:
        yield server.url
