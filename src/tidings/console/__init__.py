"""The web console at /ui: plain ES modules, a stylesheet and sample files shipped in the
package (no build step, no CDN), served by the broker. It talks to the broker's own API only;
a Content-Security-Policy says so to the browser, which then refuses any other host."""

from __future__ import annotations

from pathlib import Path

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Message, Receive, Scope, Send

ASSETS = Path(__file__).parent / "assets"
POLICY = (
    "default-src 'self'; img-src 'self' data: blob:; connect-src 'self'; "
    "style-src 'self'; script-src 'self'; object-src 'none'; frame-ancestors 'none'"
)


class Guarded:
    """Adds the console's Content-Security-Policy to every answer of `app`."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        async def sent(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                headers.append((b"content-security-policy", POLICY.encode()))
                headers.append((b"x-content-type-options", b"nosniff"))
                message["headers"] = headers
            await send(message)

        await self.app(scope, receive, sent)


async def to_console(request: Request) -> Response:
    return RedirectResponse("/ui/", status_code=307)


def routes() -> list[BaseRoute]:
    return [
        Route("/", to_console, methods=["GET"]),
        Route("/ui", to_console, methods=["GET"]),
        Mount("/ui", app=Guarded(StaticFiles(directory=ASSETS, html=True)), name="console"),
    ]
