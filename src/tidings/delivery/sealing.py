"""Webhook secrets at rest: sealed (Fernet: AES-128-CBC with HMAC-SHA256, from the maintained
`cryptography` library) with a key file of the broker's, so the store, its backups and its
dumps hold no secret a receiver verifies signatures with. The broker opens a secret when it
signs a request or shows the webhook to its subscriber.

The key is `webhooks.secrets_key` (the key itself, for functions that share only their
environment), else `webhooks.secrets_key_file`, or `data_dir/secrets.key` made (0600) at the
first start; brokers sharing a store must be given the same key. A secret stored before sealing
(no `sealed:` prefix) is read as it is and sealed at its next write.

`cryptography` is imported at the first seal or open, not at start: a function instance's
cold start that signs nothing does not pay its 15 ms.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import hashlib
import hmac
import os
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING

from tidings.config import Settings
from tidings.errors import ErrorCode, TidingsError
from tidings.private import create_private

if TYPE_CHECKING:
    from cryptography.fernet import Fernet

PREFIX = "sealed:"
OPENED = 100_000  # sealed forms remembered opened


def sealer(settings: Settings) -> Sealer:
    """The key given in the settings (`webhooks.secrets_key`), else the key file's."""
    if settings.webhooks.secrets_key:
        return Sealer.from_key(settings.webhooks.secrets_key, "webhooks__secrets_key")
    return Sealer.from_file(settings.secrets_key_path)


def new_key() -> bytes:
    """A Fernet key: 32 random bytes, url-safe base64 (as `Fernet.generate_key`)."""
    return base64.urlsafe_b64encode(os.urandom(32))


def _checked(key: bytes) -> bytes:
    """`key` if it is one (ValueError if not), as `Fernet` checks it."""
    try:
        if len(base64.urlsafe_b64decode(key)) == 32:
            return key
    except binascii.Error:
        pass
    raise ValueError("not a Fernet key")


class Sealer:
    def __init__(self, key: bytes) -> None:
        self._key = _checked(key)
        # opened secrets by their sealed form: webhooks read every endpoint every few
        # seconds, and a sealed form never changes its meaning
        self._opened: dict[str, str] = {}

    @classmethod
    def from_key(cls, key: str, field: str) -> Sealer:
        try:
            return cls(key.strip().encode())
        except ValueError:
            detail = f"{field} is not a secrets key (32 url-safe base64 bytes)"
            raise TidingsError(ErrorCode.CONFIG_INVALID, field=field, detail=detail) from None

    @classmethod
    def from_file(cls, path: Path) -> Sealer:
        """The key in `path`, made there (0600) when there is none yet: written aside and
        linked into place, so brokers starting together on one file all read one key."""
        if not path.exists():
            path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            aside = path.with_name(f".{path.name}.{os.getpid()}")
            create_private(aside)
            aside.write_bytes(new_key())
            with contextlib.suppress(FileExistsError):  # another made it first: theirs
                os.link(aside, path)
            aside.unlink()
        try:
            return cls(path.read_bytes().strip())
        except ValueError:
            detail = f"{path} is not a secrets key (32 url-safe base64 bytes)"
            raise TidingsError(
                ErrorCode.CONFIG_INVALID, field="webhooks__secrets_key_file", detail=detail
            ) from None

    @cached_property
    def _fernet(self) -> Fernet:
        from cryptography.fernet import Fernet

        return Fernet(self._key)

    def derived(self, purpose: bytes) -> bytes:
        """A key for `purpose` alone (HMAC-SHA256 of it under this key): brokers given one
        secrets key derive the same, and it reveals nothing of this key or another purpose's."""
        return hmac.new(self._key, purpose, hashlib.sha256).digest()

    def seal(self, secret: str) -> str:
        return PREFIX + self._fernet.encrypt(secret.encode()).decode("ascii")

    def open(self, stored: str) -> str:
        """The secret; UNAVAILABLE when it was sealed with another key (a broker on a shared
        store given another key file)."""
        if not stored.startswith(PREFIX):
            return stored  # stored before sealing
        if (known := self._opened.get(stored)) is not None:
            return known
        from cryptography.fernet import InvalidToken

        try:
            secret = self._fernet.decrypt(stored[len(PREFIX) :].encode("ascii")).decode()
        except InvalidToken:
            detail = (
                "a webhook secret was sealed with another key: give every broker on this "
                "store the same webhooks.secrets_key_file"
            )
            raise TidingsError(ErrorCode.UNAVAILABLE, detail=detail) from None
        if len(self._opened) >= OPENED:
            self._opened.clear()  # replaced secrets' old forms go with it
        self._opened[stored] = secret
        return secret
