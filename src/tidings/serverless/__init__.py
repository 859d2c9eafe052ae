"""Tidings as functions, as the seeds built it: the same ASGI application served by AWS
Lambda (`aws.py`, through Mangum) and Azure Functions (`azure.py`, the v2 programming model's
ASGI app), with the broker stateless between requests (`runtime.py`).

| module       | holds                                                                   |
|--------------|-------------------------------------------------------------------------|
| runtime.py   | one broker per function instance: settings, the cold start, each request |
| cold.py      | the cold start's imports and load without garbage collection            |
| aws.py       | `handler` (API Gateway v2 and v1, function URLs) and `housekeeping`     |
| azure.py     | `app`: the HTTP function and the timer-triggered housekeeping            |
| events.py    | the platforms' request payloads, built from an HTTP request             |
| invoke.py    | a platform's invocation loop on this machine (`python -m ...invoke`)    |
| local.py     | an HTTP front door that turns requests into invocations, as the platforms' |

docs/serverless.md says what works as a function and what does not.
"""
