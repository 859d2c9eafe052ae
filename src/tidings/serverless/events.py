"""The platforms' request payloads, built from an HTTP request: API Gateway's HTTP API
(payload format 2.0, also a function URL's), its REST API (1.0), and the Azure Functions
host's HTTP request. As the platforms document them, with the fields Mangum and the Azure
worker read; used by the local front door, the tests and the start-up benchmark.
"""

from __future__ import annotations

import base64
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal
from urllib.parse import parse_qsl

Format = Literal["v2", "v1"]


@dataclass(frozen=True, slots=True)
class Request:
    method: str
    path: str  # without the query
    query: str = ""
    headers: Mapping[str, str] = field(default_factory=dict)
    body: bytes = b""
    source_ip: str = "203.0.113.7"  # the caller as API Gateway saw it


def aws_event(request: Request, fmt: Format = "v2") -> dict[str, Any]:
    """The event API Gateway hands the function for `request`."""
    return _v2(request) if fmt == "v2" else _v1(request)


def _body(request: Request) -> tuple[str | None, bool]:
    if not request.body:
        return None, False
    return base64.b64encode(request.body).decode("ascii"), True


def _v2(request: Request) -> dict[str, Any]:
    body, encoded = _body(request)
    headers = {k.lower(): v for k, v in request.headers.items()}
    now = time.time()
    return {
        "version": "2.0",
        "routeKey": "$default",
        "rawPath": request.path,
        "rawQueryString": request.query,
        "cookies": [],
        "headers": headers,
        "queryStringParameters": dict(parse_qsl(request.query)) or None,
        "requestContext": {
            "accountId": "123456789012",
            "apiId": "tidings",
            "domainName": headers.get("host", "tidings.execute-api.localhost"),
            "domainPrefix": "tidings",
            "http": {
                "method": request.method,
                "path": request.path,
                "protocol": "HTTP/1.1",
                "sourceIp": request.source_ip,
                "userAgent": headers.get("user-agent", ""),
            },
            "requestId": f"r{now:.6f}",
            "routeKey": "$default",
            "stage": "$default",
            "time": time.strftime("%d/%b/%Y:%H:%M:%S +0000", time.gmtime(now)),
            "timeEpoch": int(now * 1000),
        },
        "body": body,
        "isBase64Encoded": encoded,
    }


def _v1(request: Request) -> dict[str, Any]:
    body, encoded = _body(request)
    pairs = parse_qsl(request.query)
    multi: dict[str, list[str]] = {}
    for key, value in pairs:
        multi.setdefault(key, []).append(value)
    return {
        "resource": "/{proxy+}",
        "path": request.path,
        "httpMethod": request.method,
        "headers": dict(request.headers),
        "multiValueHeaders": {k: [v] for k, v in request.headers.items()},
        "queryStringParameters": dict(pairs) or None,
        "multiValueQueryStringParameters": multi or None,
        "pathParameters": {"proxy": request.path.lstrip("/")},
        "stageVariables": None,
        "requestContext": {
            "resourcePath": "/{proxy+}",
            "httpMethod": request.method,
            "path": f"/Prod{request.path}",
            "stage": "Prod",
            "accountId": "123456789012",
            "apiId": "tidings",
            "requestId": f"r{time.time():.6f}",
            "identity": {"sourceIp": request.source_ip},
        },
        "body": body,
        "isBase64Encoded": encoded,
    }


def aws_response(answer: Mapping[str, Any]) -> tuple[int, dict[str, str], bytes]:
    """Status, headers and body of what the handler answered (either format)."""
    raw = answer.get("body") or ""
    body = base64.b64decode(raw) if answer.get("isBase64Encoded") else raw.encode()
    headers = {k.lower(): v for k, v in (answer.get("headers") or {}).items()}
    for key, values in (answer.get("multiValueHeaders") or {}).items():
        headers[key.lower()] = ", ".join(values)
    return int(answer["statusCode"]), headers, body


def azure_request(request: Request, host: str = "tidings.azurewebsites.localhost") -> Any:
    """The `azure.functions.HttpRequest` the Functions host hands the worker."""
    import azure.functions as func

    query = f"?{request.query}" if request.query else ""
    headers = {"host": host, **{k.lower(): v for k, v in request.headers.items()}}
    return func.HttpRequest(
        method=request.method,
        url=f"https://{headers['host']}{request.path}{query}",
        headers=headers,
        params=dict(parse_qsl(request.query)),
        route_params={"route": request.path.lstrip("/")},
        body=request.body,
    )
