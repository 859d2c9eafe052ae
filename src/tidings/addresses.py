"""Which addresses an outbound call (a URL function, a webhook) may reach: the URL checks
and the broker's own endpoint, on the networks of `tidings.networks` (re-exported here).
The HTTP client and the API's URL checks use it."""

from __future__ import annotations

import ipaddress
import re
import socket
from collections.abc import Sequence
from dataclasses import dataclass
from urllib.parse import urlsplit

from tidings.networks import (
    COMPATIBLE,
    DEFAULT_DENIED,
    LOOPBACK,
    NAT64,
    IPAddress,
    Network,
    denied,
    denied_by,
    deny_list,
    embedded_forms,
    networks,
)

__all__ = [
    "COMPATIBLE",
    "DEFAULT_DENIED",
    "LOOPBACK",
    "MAX_URL",
    "NAT64",
    "IPAddress",
    "Network",
    "Own",
    "denied",
    "denied_by",
    "deny_list",
    "networks",
    "url_problem",
]


@dataclass(frozen=True, slots=True)
class Own:
    """The broker's own listening endpoint: never a target of its webhooks or URL functions
    (a webhook pointed at its own /api/RegisterSubscriber registered subscribers)."""

    host: str  # as bound: an address, or 0.0.0.0 / :: for every one of this machine's
    port: int

    def is_self(self, address: str, port: int) -> bool:
        """Whether `address:port` reaches this endpoint, in any spelling of the address:
        every IPv4 address it embeds is checked, as the deny list checks it."""
        if port != self.port:
            return False
        name = address.lower().rstrip(".")  # `localhost.` is `localhost`, fully qualified
        if name in ("localhost", self.host.lower().rstrip(".")) or name.endswith(".localhost"):
            return True  # *.localhost is loopback too (RFC 6761), as resolvers answer it
        try:
            ip = ipaddress.ip_address(address.split("%", 1)[0])
        except ValueError:
            return False
        return any(self._is_own(one) for one in embedded_forms(ip))

    def _is_own(self, ip: IPAddress) -> bool:
        if ip.is_loopback or ip.is_unspecified:
            return True
        if self.host in ("0.0.0.0", "::", ""):
            return ip in _this_machine()
        return ip == _parsed(self.host)


def _parsed(host: str) -> IPAddress | None:
    try:
        return ipaddress.ip_address(host.split("%", 1)[0])
    except ValueError:
        return None


def _this_machine() -> set[IPAddress]:
    """This machine's addresses, as its name resolves."""
    try:
        found = socket.getaddrinfo(socket.gethostname(), None)
    except OSError:
        return set()
    return {ip for info in found if (ip := _parsed(str(info[4][0]))) is not None}


MAX_URL = 2048
LABEL = re.compile(r"(?!-)[a-z0-9-]{1,63}(?<!-)")


def url_problem(
    url: str, deny: Sequence[Network], own: Own | None = None, allow_setting: str = ""
) -> str | None:
    """What is wrong with a URL the broker is asked to call (a webhook, a URL function), or
    None. Strict: http(s), printable ASCII, no credentials, a host that is a DNS name or an
    address literal outside the denied networks (`localhost` names loopback). A name is
    checked again as resolved, at each connection (`tidings.http1`). `allow_setting`: the
    setting that exempts a network from the defaults, named when an address is denied."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:  # a port that is no number or out of range, a bad IPv6 host
        return f"not a usable URL: {exc}"
    host = parts.hostname or ""
    problems = [
        (len(url) > MAX_URL, f"at most {MAX_URL} characters"),
        (not all(0x21 <= ord(c) <= 0x7E for c in url), "printable ASCII only: percent-encode"),
        (parts.scheme not in ("http", "https"), "the scheme is http or https"),
        (not host, "the URL names no host"),
        (port == 0, "port 0 cannot be reached"),
        ("@" in parts.netloc, "no credentials in the URL: receivers verify the signature"),
        # the more telling reason first: the broker's own endpoint is on a denied network too
        (own is not None and bool(host) and own.is_self(host, _port(parts.scheme, port)),
         "the URL is this broker's own"),
        (bool(host) and _host_problem(host, deny, allow_setting) is not None,
         _host_problem(host, deny, allow_setting) or ""),
    ]  # fmt: skip
    return next((rule for wrong, rule in problems if wrong), None)


def _denied_problem(
    addresses: Sequence[str], deny: Sequence[Network], allow_setting: str
) -> str | None:
    """Why a host reached at `addresses` (any one of them) is refused, or None."""
    found = [denied_by(a, deny) for a in addresses]
    if not all(found):
        return None
    where = ", ".join(dict.fromkeys(str(n) for n in found))
    hint = (
        f" (an operator exempts a default-denied one with {allow_setting})" if allow_setting else ""
    )
    return f"the address is in a denied network, {where}{hint}"


def _port(scheme: str, port: int | None) -> int:
    return port if port is not None else 443 if scheme == "https" else 80


def _host_problem(host: str, deny: Sequence[Network], allow_setting: str) -> str | None:
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        pass
    else:
        return _denied_problem([str(address)], deny, allow_setting)
    labels = host.rstrip(".").split(".")
    if labels[-1] == "localhost":  # RFC 6761: loopback, whatever a resolver is told
        return _denied_problem(["127.0.0.1", "::1"], deny, allow_setting)
    if not all(LABEL.fullmatch(label) for label in labels) or len(host) > 253:
        return "the host is neither a DNS name nor an address"
    if labels[-1].isdigit() or re.fullmatch(r"0x[0-9a-f]*", labels[-1]):
        # 2852039166, 0xa9fe.0xa9fe, 0251.0376.0251.0376 and 169.254.43518 all reach
        # 169.254.169.254 through the resolver: only the dotted-decimal form is accepted
        return "an IPv4 address is written in dotted decimal (a.b.c.d)"
    return None
