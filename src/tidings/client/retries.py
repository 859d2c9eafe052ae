"""Publishes the product clients retry, made harmless by a dedup id (docs/client.md).

A publish whose answer is lost (a timeout, a dropped connection, a 503 from a proxy) may
have been committed. The clients give every publication a `dedup_id` of their own unless
the caller named it, and send the same body again: the broker answers a repeat within its
dedup window as it answered the first (`duplicate: true`) and delivers it once.
"""

from __future__ import annotations

import uuid
from typing import Any

from tidings.client import types as t

RETRIES = 3  # attempts after the first, with the reconnection backoff between them


def new_dedup_id() -> str:
    return uuid.uuid4().hex


def named(body: dict[str, Any]) -> dict[str, Any]:
    """The publication body with a dedup id (its own, or a new one)."""
    return body if body.get("dedup_id") else {**body, "dedup_id": new_dedup_id()}


def again(exc: t.TidingsClientError, attempt: int, retries: int) -> bool:
    """Whether a publish that failed so on its `attempt`-th retry (0: the first try) is
    sent again: its answer could not be had, and retries are left."""
    return attempt < retries and t.passing(exc)
