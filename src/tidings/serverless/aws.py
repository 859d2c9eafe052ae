"""AWS Lambda: `handler` serves every route behind API Gateway (HTTP API, payload 2.0; REST
API, 1.0) or a function URL, through Mangum; `housekeeping` is the scheduled handler (an
EventBridge schedule). deploy/aws/template.yaml deploys both.

Mangum runs each invocation on one event loop it keeps for the process, so the broker, its
store connections and its index built by the first invocation serve the warm ones after.
"""

from __future__ import annotations

from tidings.serverless import cold

cold.begin()  # before the imports below: a cold start collects nothing (cold.py)

import asyncio  # noqa: E402
from typing import Any  # noqa: E402

from mangum import Mangum  # noqa: E402

from tidings import logs  # noqa: E402
from tidings.serverless.runtime import Runtime  # noqa: E402

runtime = Runtime()
_adapter: Mangum | None = None


def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    """An HTTP request, as API Gateway or a function URL hands it over."""
    return _mangum()(event, context)


def housekeeping(event: dict[str, Any], context: Any) -> dict[str, Any]:
    """The scheduled chores (an EventBridge schedule's event, whatever it holds)."""
    _mangum()  # the loop Mangum keeps, so the broker is the one the requests use
    return asyncio.get_event_loop().run_until_complete(runtime.housekeep())


def _mangum() -> Mangum:
    global _adapter
    if _adapter is None:
        logs.configure(runtime.settings.logs)
        # lifespan off: the broker is built by the first request, on Mangum's loop
        _adapter = Mangum(runtime, lifespan="off")
    return _adapter
