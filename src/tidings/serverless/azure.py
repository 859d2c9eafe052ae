"""Azure Functions (Python v2 programming model): `app` holds the HTTP function, every route
through the functions host's ASGI support (`AsgiFunctionApp`), and `housekeeping`, the chores
on a timer (`TIDINGS_HOUSEKEEPING_SCHEDULE`, an NCRONTAB app setting such as
"0 */1 * * * *"). deploy/azure/function_app.py is the project's entry point.

The host runs every invocation on the worker's one event loop: the broker built by the first
serves the later ones while the instance is warm.
"""

from __future__ import annotations

from tidings.serverless import cold

cold.begin()  # before the imports below: a cold start collects nothing (cold.py)

import logging  # noqa: E402

import azure.functions as func  # noqa: E402

from tidings.serverless.runtime import Runtime  # noqa: E402

runtime = Runtime()
# the worker's own handlers carry the lines to the host: only the level is Tidings'
logging.getLogger("tidings").setLevel(runtime.settings.logs.level.upper())
# anonymous at the platform: the broker checks its own tokens (subscribers', the admin's)
app = func.AsgiFunctionApp(app=runtime, http_auth_level=func.AuthLevel.ANONYMOUS)


@app.timer_trigger(
    schedule="%TIDINGS_HOUSEKEEPING_SCHEDULE%", arg_name="timer", run_on_startup=False
)
async def housekeeping(timer: func.TimerRequest) -> None:
    await runtime.housekeep()
