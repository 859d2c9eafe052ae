"""Webhook signatures, in Stripe's scheme: `Tidings-Signature: t=<unix seconds>,v1=<hex>`,
where the hex is HMAC-SHA256 over `f"{t}."` and the body, keyed with the subscriber's
secret (its UTF-8 bytes). The timestamp is signed with the body, so a receiver that
refuses old timestamps refuses replays too (docs/api.md has a verifier in ten lines)."""

from __future__ import annotations

import hashlib
import hmac
import secrets

HEADER = "Tidings-Signature"
PREFIX = "whsec_"
TOLERANCE_S = 300  # how old a timestamp `verify` accepts by default


def new_secret() -> str:
    return PREFIX + secrets.token_urlsafe(32)


def _mac(secret: str, body: bytes, t: int) -> str:
    return hmac.new(secret.encode(), f"{t}.".encode() + body, hashlib.sha256).hexdigest()


def sign(secret: str, body: bytes, t: int) -> str:
    """The header's value for `body` sent at unix time `t`."""
    return f"t={t},v1={_mac(secret, body, t)}"


def verify(
    secret: str, body: bytes, header: str, now: float, tolerance_s: float = TOLERANCE_S
) -> bool:
    """True when `header` signs `body` with `secret` and its time is within `tolerance_s`
    of `now`. Any `v1` entry may match (a receiver may see several while rotating)."""
    fields = [part.split("=", 1) for part in header.split(",") if "=" in part]
    times = [v for k, v in fields if k.strip() == "t"]
    if len(times) != 1 or not (times[0].isascii() and times[0].isdigit()):
        return False
    if abs(now - int(times[0])) > tolerance_s:
        return False
    expected = _mac(secret, body, int(times[0])).encode()
    return any(hmac.compare_digest(expected, v.encode()) for k, v in fields if k.strip() == "v1")
