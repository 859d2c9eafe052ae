"""A library call (/api/Detect*, builtins) is bounded by the CPU its worker and the worker's
children use (`functions.builtin_cpu_s`), read by the broker from outside the worker; the wall
clock only as a far last resort, so a busy machine slows a call down without ending it."""

from __future__ import annotations

import contextlib
import dataclasses
import os
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from tests.functions.images import PRINTED_PAGE, encoded

from tidings.config import FunctionSettings, load_settings
from tidings.server import EmbeddedServer

ENGLISH = "The weather in Munich is sunny and warm today, and everyone is happy."
STOPPED_S = 16.0  # longer than the 15 s of wall clock a library call had before


def serve(tmp_path: Path, functions: FunctionSettings) -> EmbeddedServer:
    settings = load_settings({"data_dir": tmp_path}, env={})
    return EmbeddedServer(dataclasses.replace(settings, functions=functions))


def call(url: str, route: str, data: object, **params: object) -> httpx.Response:
    body = {"publication": {"data": data}, "params": params}
    return httpx.post(f"{url}/api/{route}", json=body, timeout=120)


def descendants(pid: int) -> list[int]:
    found, todo = [], [pid]
    while todo:
        current = todo.pop()
        for tid in os.listdir(f"/proc/{current}/task"):
            try:
                children = Path(f"/proc/{current}/task/{tid}/children").read_text().split()
            except OSError:
                continue
            found += [int(c) for c in children]
            todo += [int(c) for c in children]
    return found


def library_workers() -> list[int]:
    """This test's library workers (bubblewrap and the Python inside it alike)."""
    found = []
    for pid in descendants(os.getpid()):
        try:
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"tidings.sandbox.worker" in argv and b"library" in argv:
            found.append(pid)
    return found


@pytest.fixture
def stopped() -> Iterator[list[int]]:
    """Processes the test stopped, continued whatever happens to the test."""
    held: list[int] = []
    yield held
    go_on(held)


def go_on(pids: list[int]) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):  # ended meanwhile
            os.kill(pid, signal.SIGCONT)


@pytest.mark.slow
def test_an_ocr_past_its_cpu_budget_is_ended_and_reported(tmp_path: Path) -> None:
    """The OCR's CPU is its tesseract child's: the worker's own timer never sees it."""
    page = {"image": encoded(PRINTED_PAGE, "PNG")}
    with serve(tmp_path, FunctionSettings(builtin_cpu_s=0.02)) as srv:
        refused = call(srv.url, "DetectPrintedText", page)
        still = call(srv.url, "DetectLanguages", ENGLISH, language="en")  # a fresh worker
    assert refused.status_code == 422, refused.text
    error = refused.json()["error"]
    assert error["code"] == "limit_exceeded"
    assert "cpu time limit exceeded" in error["message"]
    assert still.status_code == 200 and still.json()["match"] is True


@pytest.mark.slow
def test_a_call_held_up_by_a_busy_machine_is_not_ended(tmp_path: Path, stopped: list[int]) -> None:
    """The worker stopped (SIGSTOP) longer than the wall clock a call used to get, then
    continued: it used little CPU, so it answers."""
    with serve(tmp_path, FunctionSettings(workers=1)) as srv:
        warm = call(srv.url, "DetectLanguages", ENGLISH, language="en")  # the worker is up
        assert warm.status_code == 200
        stopped += library_workers()
        assert stopped
        for pid in stopped:
            os.kill(pid, signal.SIGSTOP)
        answers: list[httpx.Response] = []
        asking = threading.Thread(
            target=lambda: answers.append(call(srv.url, "DetectLanguages", ENGLISH, language="en"))
        )
        asking.start()
        time.sleep(STOPPED_S)
        go_on(stopped)
        asking.join()
    assert answers[0].status_code == 200, answers[0].text
    assert answers[0].json()["match"] is True
