"""Who may register and publish, when the operator says: by default anyone who reaches the
broker may (as the thesis's API does), and a broker open to the network can require a
registration key and publisher keys, each scoped to topic prefixes.

`access.registration_key`: registering needs it as the bearer token. `access.publish_keys`:
`KEY=PREFIX|PREFIX,...` (`*`: any topic, and publications without topics); publishing then
needs one of them, and every topic of every publication must begin with one of its
prefixes. Keys are compared in constant time, as tokens are.
"""

from __future__ import annotations

import hmac
from collections.abc import Iterable, Sequence

from tidings.config import AccessSettings
from tidings.errors import ErrorCode, TidingsError
from tidings.ids import hash_token
from tidings.keys import publisher_keys


class Access:
    def __init__(self, settings: AccessSettings) -> None:
        key = settings.registration_key
        self.registration = hash_token(key) if key else ""
        self.publishers = publisher_keys(settings.publish_keys)

    def check_register(self, key: str | None) -> None:
        """401 without the registration key (when one is required), 403 with another."""
        if self.registration:
            _check(key, [self.registration], "registering")

    def check_publish(self, key: str | None, topics: Iterable[Sequence[str]]) -> None:
        """401 without a publisher key (when they are required), 403 with another, or for a
        topic outside the key's prefixes."""
        if not self.publishers:
            return
        hashed = _check(key, [k.hashed for k in self.publishers], "publishing")
        [scope] = [k for k in self.publishers if hmac.compare_digest(k.hashed, hashed)]
        for each in topics:
            if not scope.allows(each):
                shown = ", ".join(each) or "no topic"
                raise TidingsError(ErrorCode.FORBIDDEN, resource=f"publishing to {shown}")


def _check(key: str | None, hashes: list[str], what: str) -> str:
    if not key:
        raise TidingsError(ErrorCode.UNAUTHORIZED)
    hashed = hash_token(key)
    if not any(hmac.compare_digest(h, hashed) for h in hashes):  # every one compared
        raise TidingsError(ErrorCode.FORBIDDEN, resource=what)
    return hashed
