"""A platform's invocation loop on this machine: one process is one function instance.

    python -m tidings.serverless.invoke aws     # stdin: Lambda events, one JSON per line
    python -m tidings.serverless.invoke azure   # stdin: the host's HTTP requests or timers

Each input line is one invocation, answered on stdout by one JSON line: the handler's answer,
how long it took (`duration_s`), the cold start's phases (`timings`, on the first), and the
module's import time (`import_s`, on the first). A new process for each request is the
platform's cold path; one process for many, the warm path (tests/serverless, the benchmark
and `tidings.serverless.local` drive it so).

AWS: an event with `"source": "aws.events"` (an EventBridge schedule) goes to `housekeeping`,
any other to `handler`. Azure: `{"timer": {}}` goes to `housekeeping`; `{"method", "url",
"headers", "body"}` (the body base64) is an HTTP request for the ASGI function.
"""

from __future__ import annotations

import asyncio
import base64
import os
import sys
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

import orjson


@dataclass
class LambdaContext:
    """What the Lambda runtime passes as `context` (the fields handlers read)."""

    function_name: str = "tidings"
    memory_limit_in_mb: int = 512
    aws_request_id: str = field(default_factory=lambda: str(uuid.uuid4()))
    invoked_function_arn: str = "arn:aws:lambda:local:000000000000:function:tidings"
    deadline: float = field(default_factory=lambda: time.time() + 30)

    def get_remaining_time_in_millis(self) -> int:
        return max(0, int((self.deadline - time.time()) * 1000))


@dataclass
class AzureContext:
    """What the Functions host passes as `context` (the fields the ASGI adapter reads)."""

    function_name: str = "http_app_func"
    function_directory: str = "."
    invocation_id: str = field(default_factory=lambda: str(uuid.uuid4()))
    thread_local_storage: Any = None
    trace_context: Any = None
    retry_context: Any = None


def run_aws(lines: Any, out: Any) -> None:
    os.environ.setdefault("AWS_LAMBDA_FUNCTION_NAME", "tidings-local")  # as Lambda sets it
    began = time.perf_counter()
    from tidings.serverless import aws

    imported = time.perf_counter() - began
    for n, line in enumerate(lines):
        event = orjson.loads(line)
        began = time.perf_counter()
        if event.get("source") == "aws.events":
            answer = aws.housekeeping(event, LambdaContext())
        else:
            answer = aws.handler(event, LambdaContext())
        _said(out, answer, time.perf_counter() - began, aws.runtime.timings, imported, n)


def run_azure(lines: Any, out: Any) -> None:
    os.environ.setdefault("FUNCTIONS_WORKER_RUNTIME", "python")  # as the host sets it
    began = time.perf_counter()
    import azure.functions as func
    from azure.functions.timer import TimerRequest

    from tidings.serverless import azure

    imported = time.perf_counter() - began
    functions = {f.get_function_name(): f.get_user_function() for f in azure.app.get_functions()}
    loop = asyncio.new_event_loop()  # the worker's one loop
    for n, line in enumerate(lines):
        call = orjson.loads(line)
        began = time.perf_counter()
        if "timer" in call:
            loop.run_until_complete(functions["housekeeping"](TimerRequest()))
            answer: dict[str, Any] = {"status": 0}
        else:
            request = func.HttpRequest(
                method=call["method"],
                url=call["url"],
                headers=call.get("headers") or {},
                body=base64.b64decode(call.get("body") or ""),
            )
            response = loop.run_until_complete(functions["http_app_func"](request, AzureContext()))
            answer = {
                "status": response.status_code,
                "headers": dict(response.headers),
                "body": base64.b64encode(response.get_body()).decode("ascii"),
            }
        _said(out, answer, time.perf_counter() - began, azure.runtime.timings, imported, n)
    if azure.app.startup_task_done:  # the instance recycled: its broker closed, on its loop
        loop.run_until_complete(azure.app.middleware.notify_shutdown())  # type: ignore[no-untyped-call]
        azure.app.startup_task_done = False  # else its __del__ waits on a loop of its own


def _said(
    out: Any, answer: Any, duration_s: float, timings: dict[str, float], import_s: float, n: int
) -> None:
    line: dict[str, Any] = {"answer": answer, "duration_s": duration_s}
    if n == 0:
        line["import_s"], line["timings"] = import_s, timings
    out.write(orjson.dumps(line, default=str) + b"\n")
    out.flush()


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args not in (["aws"], ["azure"]):
        print("usage: python -m tidings.serverless.invoke aws|azure", file=sys.stderr)
        return 2
    run = run_aws if args[0] == "aws" else run_azure
    run((line for line in sys.stdin.buffer if line.strip()), sys.stdout.buffer)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
