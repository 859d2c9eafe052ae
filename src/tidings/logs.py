"""The broker's logs: one set-up for Tidings' own loggers and uvicorn's, as text lines or
JSON lines (one object per line: `at`, `level`, `logger`, `message`, and `error` with the
traceback when there is one), at the level the operator chose."""

from __future__ import annotations

import logging
import re
import sys
from datetime import UTC, datetime
from typing import Any

import orjson

from tidings.config import LogSettings

TEXT = "%(asctime)s %(levelname)s %(name)s %(message)s"
# a browser's stream passes its bearer token in the URL (`?token=`): never into a log
SECRET = re.compile(r"(token=)[^&\s\"']+")


def redacted(text: str) -> str:
    return SECRET.sub(r"\1***", text)


# control characters in a message (a function's error text, a URL a subscriber chose) would
# start a line of their own: a reader could not tell a forged line from the broker's
CONTROL = re.compile(r"[\x00-\x08\x0a-\x1f\x7f\u2028\u2029]")


def escaped(text: str) -> str:
    return CONTROL.sub(lambda m: m.group().encode("unicode_escape").decode("ascii"), text)


class TextFormatter(logging.Formatter):
    """One record, one line: the message's control characters escaped (`\\n`); a
    traceback's own lines follow it, as they always have."""

    def formatMessage(self, record: logging.LogRecord) -> str:
        return redacted(escaped(super().formatMessage(record)))

    def format(self, record: logging.LogRecord) -> str:
        return redacted(super().format(record))


# uvicorn's access lines carry their fields as positional arguments (client, method,
# path, version, status): kept as fields in JSON, so they can be filtered without parsing
ACCESS_FIELDS = ("client", "method", "path", "http_version", "status")


class JSONFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "at": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": redacted(record.getMessage()),
        }
        if record.name == "uvicorn.access" and isinstance(record.args, tuple):
            line.update(zip(ACCESS_FIELDS, record.args, strict=False))
            line["path"] = redacted(str(line.get("path", "")))
        if record.exc_info:
            line["error"] = self.formatException(record.exc_info)
        return orjson.dumps(line, default=str).decode()


def configure(settings: LogSettings) -> None:
    """Send every log line to stderr in the chosen format; uvicorn's loggers included (its
    own handlers removed), its access log only when asked for."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JSONFormatter() if settings.format == "json" else TextFormatter(TEXT))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(settings.level.upper())
    for name in ("uvicorn", "uvicorn.error", "uvicorn.access"):
        logger = logging.getLogger(name)
        logger.handlers.clear()
        logger.propagate = True
    logging.getLogger("uvicorn.access").disabled = not settings.access_log
