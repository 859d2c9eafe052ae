"""Which addresses an outbound call (a URL function, a webhook) may reach: networks parsed
from settings, and the check of one address against them. Pure: the HTTP client, the
settings and the API's URL checks all use it."""

from __future__ import annotations

import ipaddress
import re
import socket
from collections.abc import Sequence
from dataclasses import dataclass
from urllib.parse import urlsplit

Network = ipaddress.IPv4Network | ipaddress.IPv6Network
IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

# Never reached unless the operator says otherwise (`deny_default_networks = false`): the cloud
# metadata services (link-local, and 100.100.100.200 in shared address space), "this network"
# and IPv6's unspecified address (both reach this machine), IPv6 loopback, multicast, reserved.
DEFAULT_DENIED = (
    "169.254.0.0/16,100.64.0.0/10,0.0.0.0/8,224.0.0.0/4,240.0.0.0/4,"
    "::/128,::1/128,fe80::/10,ff00::/8"
)


def networks(text: str) -> tuple[Network, ...]:
    """`"10.0.0.0/8, fe80::/10"` -> the networks; ValueError names the one that is not."""
    out = []
    for part in (p.strip() for p in text.split(",")):
        if part:
            try:
                out.append(ipaddress.ip_network(part, strict=False))
            except ValueError:
                raise ValueError(
                    f"{part!r} is not a network (as 10.0.0.0/8 or fe80::/10)"
                ) from None
    return tuple(out)


def deny_list(extra: str, defaults: bool = True) -> tuple[Network, ...]:
    """The networks to refuse: the defaults (unless told to drop them) and the operator's
    `extra` ones, which add to the defaults rather than replace them."""
    return networks(DEFAULT_DENIED if defaults else "") + networks(extra)


def denied(address: str, deny: Sequence[Network]) -> bool:
    """Whether `address` is in a denied network, as itself or as any IPv4 address it embeds:
    an attacker writes 169.254.169.254 as ::ffff:a9fe:a9fe, ::a9fe:a9fe, 64:ff9b::a9fe:a9fe,
    2002:a9fe:a9fe:: or a Teredo address, and each of them reaches it (or may, through a
    translator)."""
    ip = ipaddress.ip_address(address.split("%", 1)[0])  # an IPv6 zone is not the address
    return any(one.version == n.version and one in n for one in _forms(ip) for n in deny)


NAT64 = (ipaddress.ip_network("64:ff9b::/96"), ipaddress.ip_network("64:ff9b:1::/48"))
COMPATIBLE = ipaddress.ip_network("::/96")  # IPv4-compatible (deprecated): ::a.b.c.d


def _forms(ip: ipaddress.IPv4Address | ipaddress.IPv6Address) -> list[IPAddress]:
    """The address and every IPv4 address it embeds."""
    forms: list[IPAddress] = [ip]
    if isinstance(ip, ipaddress.IPv4Address):
        return forms
    low32 = ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    if ip.ipv4_mapped is not None:
        forms.append(ip.ipv4_mapped)
    if ip in COMPATIBLE and int(ip) > 1:  # not :: or ::1, which are IPv6's own
        forms.append(low32)
    if any(ip in prefix for prefix in NAT64):
        forms.append(low32)  # RFC 6052's /96 layout, also used inside the local-use prefix
    if ip in NAT64[1]:  # RFC 6052's /48 layout: bits 48-63 and 72-87 (octet 64-71 is u)
        value = int(ip)
        forms.append(ipaddress.IPv4Address(((value >> 64) & 0xFFFF) << 16 | (value >> 40) & 0xFFFF))
    if ip.sixtofour is not None:
        forms.append(ip.sixtofour)
    if ip.teredo is not None:
        forms.extend(ip.teredo)  # the server's and the (de-obfuscated) client's
    return forms


@dataclass(frozen=True, slots=True)
class Own:
    """The broker's own listening endpoint: never a target of its webhooks or URL functions
    (a webhook pointed at its own /api/RegisterSubscriber registered subscribers)."""

    host: str  # as bound: an address, or 0.0.0.0 / :: for every one of this machine's
    port: int

    def is_self(self, address: str, port: int) -> bool:
        if port != self.port:
            return False
        if address.lower() in ("localhost", self.host):
            return True
        try:
            ip = ipaddress.ip_address(address.split("%", 1)[0])
        except ValueError:
            return False
        mapped = ip.ipv4_mapped if isinstance(ip, ipaddress.IPv6Address) else None
        ip = mapped or ip
        return (
            ip.is_loopback
            or ip.is_unspecified
            or (self.host in ("0.0.0.0", "::", "") and address in _this_machine())
        )


def _this_machine() -> set[str]:
    """This machine's addresses, as its name resolves."""
    try:
        found = socket.getaddrinfo(socket.gethostname(), None)
    except OSError:
        return set()
    return {str(info[4][0]) for info in found}


MAX_URL = 2048
LABEL = re.compile(r"(?!-)[a-z0-9-]{1,63}(?<!-)")


def url_problem(url: str, deny: Sequence[Network], own: Own | None = None) -> str | None:
    """What is wrong with a URL the broker is asked to call (a webhook, a URL function), or
    None. Strict: http(s), printable ASCII, no credentials, a host that is a DNS name or an
    address literal outside the denied networks. A name is checked again as resolved, at
    each connection (`tidings.http1`)."""
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
        (bool(host) and _host_problem(host, deny) is not None, _host_problem(host, deny) or ""),
        (own is not None and bool(host) and own.is_self(host, _port(parts.scheme, port)),
         "the URL is this broker's own"),
    ]  # fmt: skip
    return next((rule for wrong, rule in problems if wrong), None)


def _port(scheme: str, port: int | None) -> int:
    return port if port is not None else 443 if scheme == "https" else 80


def _host_problem(host: str, deny: Sequence[Network]) -> str | None:
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        pass
    else:
        return "the address is in a denied network" if denied(str(address), deny) else None
    labels = host.rstrip(".").split(".")
    if not all(LABEL.fullmatch(label) for label in labels) or len(host) > 253:
        return "the host is neither a DNS name nor an address"
    if labels[-1].isdigit() or re.fullmatch(r"0x[0-9a-f]*", labels[-1]):
        # 2852039166, 0xa9fe.0xa9fe, 0251.0376.0251.0376 and 169.254.43518 all reach
        # 169.254.169.254 through the resolver: only the dotted-decimal form is accepted
        return "an IPv4 address is written in dotted decimal (a.b.c.d)"
    return None
