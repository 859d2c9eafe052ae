"""The custom function library served as URL functions, under the thesis's names, so a
subscription may point at `http://<broker>/api/DetectFaces` exactly as its configuration did.

Each takes the URL-function body `{"publication": {...}, "params": {...}}` and answers
`{"match": bool}`. The work runs in a worker thread, off the event loop.
"""

from __future__ import annotations

import asyncio
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from tidings.api.answers import answer
from tidings.api.io import body_as
from tidings.api.operations import Operation, described
from tidings.functions import call_builtin, check_builtin
from tidings.model import check_depth
from tidings.wire import thesis as w

ROUTES = {
    "DetectLanguages": "detect_language",
    "DetectKeyPhrases": "key_phrases",
    "DetectSentiments": "sentiment",
    "DetectFaces": "detect_faces",
    "DetectPrintedText": "detect_printed_text",
    "AnalyzeImage": "analyze_image",
}
LIMIT = 8 * 1024 * 1024


def endpoint(name: str) -> Any:
    @described(Operation(w.FunctionCallBody, answer=w.Match))
    async def handle(request: Request) -> Response:
        raw, call = await body_as(request, w.FunctionCallBody, LIMIT)
        limits = request.app.state.broker.settings.limits
        check_depth(raw["publication"], "publication", limits)
        check_depth(call.params, "params", limits)
        check_builtin(name, call.params, field="$")
        matched = await asyncio.to_thread(call_builtin, name, call.publication, call.params)
        return answer(w.Match(matched))

    handle.__doc__ = f"The {name} function as a URL function."
    handle.__name__ = name
    return handle


routes = [Route(f"/api/{path}", endpoint(name), methods=["POST"]) for path, name in ROUTES.items()]
