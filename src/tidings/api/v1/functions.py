"""The function library under /v1: each builtin with the JSON Schema of its parameters, so a
client (the console's per-function form) can build the `params` a builtin subscription takes
without guessing, and whether this broker has the libraries it needs."""

from __future__ import annotations

from functools import cache
from typing import Any

import msgspec
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from tidings.api.answers import answer
from tidings.api.operations import Operation, described
from tidings.functions import BUILTINS, Params, missing_extra
from tidings.wire import v1 as w


@cache
def params_schema(shape: type[Params]) -> dict[str, Any]:
    """The JSON Schema of one builtin's parameters, inline (an object schema, no `$ref`)."""
    schema: dict[str, Any] = msgspec.json.schema(shape)
    inline: dict[str, Any] = schema["$defs"][shape.__name__]
    return inline


def builtin(name: str) -> w.Builtin:
    module, shape = BUILTINS[name]
    extra = missing_extra(module)
    return w.Builtin(name, module, extra is None, extra, params_schema(shape))


@described(Operation(answer=w.Builtins))
async def builtins(request: Request) -> Response:
    """The builtin functions, by name: each one's parameters (a JSON Schema: `properties`,
    `required`) and whether it can run here (else the extra that installs its libraries)."""
    return answer(w.Builtins([builtin(name) for name in sorted(BUILTINS)]))


routes = [Route("/v1/functions/builtins", builtins, methods=["GET"])]
