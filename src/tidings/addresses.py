"""Which addresses an outbound call (a URL function, a webhook) may reach: networks parsed
from settings, and the check of one address against them. Pure: the HTTP client, the
settings and the API's URL checks all use it."""

from __future__ import annotations

import ipaddress
from collections.abc import Sequence

Network = ipaddress.IPv4Network | ipaddress.IPv6Network


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


def denied(address: str, deny: Sequence[Network]) -> bool:
    ip = ipaddress.ip_address(address.split("%", 1)[0])  # an IPv6 zone is not the address
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped  # ::ffff:169.254.169.254 is 169.254.169.254
    return any(ip.version == n.version and ip in n for n in deny)
