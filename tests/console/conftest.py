"""A real browser (Debian's Chromium, driven by Playwright) against a real broker."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tidings.admin import admin_token
from tidings.config import load_settings
from tidings.server import EmbeddedServer

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
# as root, without a sandbox of its own; nothing in the background that would call out
FLAGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
]


def require_chromium() -> str:
    if not Path(CHROMIUM).exists():
        reason = "Chromium is not installed (apt-get install chromium)"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"{reason}: required under CI")
        pytest.skip(reason)
    return CHROMIUM


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedServer]:
    data = tmp_path_factory.mktemp("console")
    # a URL function of the tests fails against a closed port on this machine, which the
    # operator must let URL functions reach (loopback is denied by default)
    local = {"functions__url_allow_networks": "127.0.0.0/8"}
    settings = load_settings({"data_dir": data, **local}, env={})
    with EmbeddedServer(settings) as server:
        yield server


@pytest.fixture(scope="module")
def token(broker: EmbeddedServer) -> str:
    return admin_token("", broker.settings.data_dir)[0]


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    executable = require_chromium()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=executable, headless=True, args=FLAGS)
        yield launched
        launched.close()


@pytest.fixture
def context(browser: Any, broker: EmbeddedServer) -> Iterator[Any]:
    """A fresh browser profile whose every request outside the broker is refused and kept:
    the console must work with no internet access."""
    made = browser.new_context(base_url=broker.url, viewport={"width": 1280, "height": 900})
    outside: list[str] = []

    def only_the_broker(route: Any) -> None:
        if route.request.url.startswith(broker.url) or route.request.url.startswith("data:"):
            route.continue_()
        else:
            outside.append(route.request.url)
            route.abort()

    errors: list[str] = []
    made.route("**/*", only_the_broker)
    made.on("page", lambda page: page.on("pageerror", lambda e: errors.append(str(e))))
    yield made
    made.close()
    assert outside == [], f"the page called outside the broker: {outside}"
    assert errors == [], f"the page's scripts failed: {errors}"


@pytest.fixture(scope="session")
def screenshots(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Where the tests leave what they saw (under this run's temporary directory)."""
    return tmp_path_factory.mktemp("screenshots", numbered=False)


def admin_page(context: Any, view: str, token: str) -> Any:
    """A new page on `view` (`overview`, `simulator`) with the admin token given."""
    page = context.new_page()
    page.goto(f"/ui/#/{view}")
    page.fill("#admin-token", token)
    page.click("#admin-save")
    return page
