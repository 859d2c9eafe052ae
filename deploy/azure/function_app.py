"""Tidings on Azure Functions (Python v2 programming model).

The worker indexes this file's module-level function app: `app` carries the HTTP function
(every route, anonymous: the broker checks its own tokens) and the timer-triggered
`housekeeping` (schedule: the app setting TIDINGS_HOUSEKEEPING_SCHEDULE).

Run locally: copy local.settings.json.example to local.settings.json, fill it in, then
`pip install -r requirements.txt` and `func start`; deploy with
`func azure functionapp publish <app-name>`.
"""

from tidings.serverless.azure import app

__all__ = ["app"]
