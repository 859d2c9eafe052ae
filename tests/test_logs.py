"""The broker's logs: text or JSON lines, uvicorn's included, the access log on request."""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import httpx
import orjson
import pytest

from tidings.config import LogSettings
from tidings.logs import JSONFormatter, configure
from tidings.server import broker_process


@pytest.fixture
def restored_logging() -> Iterator[None]:
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    yield None
    root.handlers[:], root.level = handlers, level
    logging.getLogger("uvicorn.access").disabled = False


def test_a_json_line_carries_time_level_logger_message_and_the_traceback() -> None:
    try:
        raise ValueError("boom")
    except ValueError:
        record = logging.LogRecord(
            "tidings.broker", logging.ERROR, __file__, 1, "failed %s", ("here",), True
        )
        record.exc_info = sys.exc_info()
    line = orjson.loads(JSONFormatter().format(record))
    assert (line["level"], line["logger"]) == ("error", "tidings.broker")
    assert line["message"] == "failed here"
    assert "ValueError: boom" in line["error"]
    assert datetime.fromisoformat(line["at"]).tzinfo is not None


def test_configure_sets_the_level_and_silences_the_access_log_unless_asked(
    restored_logging: object,
) -> None:
    configure(LogSettings(level="warning", format="json"))
    assert logging.getLogger().level == logging.WARNING
    assert logging.getLogger("uvicorn.access").disabled
    configure(LogSettings(access_log=True))
    assert not logging.getLogger("uvicorn.access").disabled


def test_serve_writes_json_lines_and_an_access_line_per_request(tmp_path: Path) -> None:
    args = ("--log-format", "json", "--access-log")
    with broker_process(tmp_path, None, *args) as (proc, url):
        assert httpx.get(f"{url}/healthz").status_code == 200
        proc.terminate()
        proc.wait(10)
        assert proc.stderr is not None
        lines = [orjson.loads(line) for line in proc.stderr.read().splitlines()]
    access = [line for line in lines if line["logger"] == "uvicorn.access"]
    assert any(line["path"] == "/healthz" and line["status"] == 200 for line in access)
    assert {"at", "level", "logger", "message"} <= set(lines[0])
