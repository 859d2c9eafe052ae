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

from tidings.api.io import JSONResponse, json_body
from tidings.errors import invalid
from tidings.functions import call_builtin, check_builtin

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
    async def handle(request: Request) -> Response:
        raw = await json_body(request, LIMIT)
        publication = raw.get("publication") if isinstance(raw, dict) else None
        params = raw.get("params", {}) if isinstance(raw, dict) else None
        if not isinstance(publication, dict):
            raise invalid("publication", "expected the publication as an object")
        if not isinstance(params, dict):
            raise invalid("params", "expected an object")
        check_builtin(name, params, field="$")
        matched = await asyncio.to_thread(call_builtin, name, publication, params)
        return JSONResponse({"match": matched})

    handle.__doc__ = f"The {name} function as a URL function."
    handle.__name__ = name
    return handle


routes = [Route(f"/api/{path}", endpoint(name), methods=["POST"]) for path, name in ROUTES.items()]
