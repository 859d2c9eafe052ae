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
from tidings.logs import TEXT, JSONFormatter, TextFormatter, configure
from tidings.server import LOG_FILE, broker_process


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
    said = (tmp_path / LOG_FILE).read_text().splitlines()
    lines = [orjson.loads(line) for line in said if line.startswith("{")]
    access = [line for line in lines if line["logger"] == "uvicorn.access"]
    assert any(line["path"] == "/healthz" and line["status"] == 200 for line in access)
    assert {"at", "level", "logger", "message"} <= set(lines[0])


def test_a_token_in_a_url_never_reaches_the_log() -> None:
    access = logging.LogRecord(
        "uvicorn.access", logging.INFO, __file__, 1, '%s - "%s %s HTTP/%s" %d',
        ("127.0.0.1:5", "GET", "/v1/subscribers/s/stream?token=SECRET&prefetch=5", "1.1", 101),
        None,
    )  # fmt: skip
    line = orjson.loads(JSONFormatter().format(access))
    assert "SECRET" not in line["message"] and "SECRET" not in line["path"]
    assert line["path"] == "/v1/subscribers/s/stream?token=***&prefetch=5"
    accepted = logging.LogRecord(
        "uvicorn.error", logging.INFO, __file__, 1, '"WebSocket %s" [accepted]',
        ("/v1/subscribers/s/stream?token=SECRET",), None,
    )  # fmt: skip
    assert "SECRET" not in TextFormatter(TEXT).format(accepted)


def test_untrusted_text_cannot_forge_a_line_of_its_own() -> None:
    error = "boom\n2026-11-27 03:00:00,000 ERROR tidings.broker forged\r\x1b[31m\u2028x"
    record = logging.LogRecord(
        "tidings.broker", logging.WARNING, __file__, 1, "suspended: %s", (error,), None
    )
    line = TextFormatter(TEXT).format(record)
    assert "\n" not in line and "\r" not in line and "\x1b" not in line and "\u2028" not in line
    assert "boom\\n2026-11-27" in line
    as_json = orjson.loads(JSONFormatter().format(record))
    assert as_json["message"] == f"suspended: {error}"  # JSON escapes it on its own


def test_a_traceback_still_follows_its_line() -> None:
    try:
        raise ValueError("inner")
    except ValueError:
        record = logging.LogRecord("t", logging.ERROR, __file__, 1, "failed", (), sys.exc_info())
    lines = TextFormatter(TEXT).format(record).splitlines()
    assert lines[0].endswith("failed") and lines[-1] == "ValueError: inner"
