"""Networks an outbound call may not reach, parsed from settings, and the check of one
address against them. Pure (no sockets): the settings check their networks with it, and
`tidings.addresses` builds the URL checks on it."""

from __future__ import annotations

import functools
import ipaddress
from collections.abc import Sequence

Network = ipaddress.IPv4Network | ipaddress.IPv6Network
IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

# Never reached unless the operator says otherwise: the cloud metadata services (link-local,
# 100.100.100.200 in shared address space, and the IPv6 ones: AWS's fd00:ec2::254 and
# Google Cloud's fd20:ce::254, in unique-local space), "this network" and IPv6's unspecified address
# (both reach this machine), loopback (another broker, a database, any service listening on
# this machine), multicast, reserved. `allow_networks` exempts named networks from these,
# `deny_default_networks = false` drops them all.
DEFAULT_DENIED = (
    "169.254.0.0/16,100.64.0.0/10,0.0.0.0/8,127.0.0.0/8,224.0.0.0/4,240.0.0.0/4,"
    "::/128,::1/128,fe80::/10,ff00::/8,fd00:ec2::254/128,fd20:ce::254/128"
)
LOOPBACK = "127.0.0.0/8,::1/128"


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


def deny_list(extra: str, defaults: bool = True, allow: str = "") -> tuple[Network, ...]:
    """The networks to refuse: the defaults (unless told to drop them) less the `allow`ed
    ones, and the operator's `extra` ones, which add to the defaults rather than replace
    them. An allowed network exempts itself from the defaults alone: the rest of each
    default network stays denied, and so does whatever `extra` names."""
    exempt = networks(allow)
    kept = [
        part for net in networks(DEFAULT_DENIED if defaults else "") for part in _less(net, exempt)
    ]
    return tuple(kept) + networks(extra)


def _less(net: Network, exempt: Sequence[Network]) -> list[Network]:
    """`net` without the `exempt` networks: the parts of it they leave."""
    parts = [net]
    for gone in exempt:
        left: list[Network] = []
        for part in parts:
            if part.version != gone.version or not part.overlaps(gone):
                left.append(part)
            elif gone.supernet_of(part):  # type: ignore[arg-type]
                continue
            else:
                left.extend(part.address_exclude(gone))  # type: ignore[arg-type]
        parts = left
    return parts


def denied(address: str, deny: Sequence[Network]) -> bool:
    """Whether `address` is in a denied network, as itself or as any IPv4 address it embeds:
    an attacker writes 169.254.169.254 as ::ffff:a9fe:a9fe, ::a9fe:a9fe, 64:ff9b::a9fe:a9fe,
    2002:a9fe:a9fe:: or a Teredo address, and each of them reaches it (or may, through a
    translator)."""
    return denied_by(address, deny) is not None


def denied_by(address: str, deny: Sequence[Network]) -> Network | None:
    """The denied network `address` is in (`denied`), or None."""
    ip = ipaddress.ip_address(address.split("%", 1)[0])  # an IPv6 zone is not the address
    forms = embedded_forms(ip)
    return next((n for one in forms for n in deny if one.version == n.version and one in n), None)


NAT64 = (ipaddress.ip_network("64:ff9b::/96"), ipaddress.ip_network("64:ff9b:1::/48"))
COMPATIBLE = ipaddress.ip_network("::/96")  # IPv4-compatible (deprecated): ::a.b.c.d


def embedded_forms(ip: ipaddress.IPv4Address | ipaddress.IPv6Address) -> list[IPAddress]:
    """The address and every IPv4 address it embeds (mapped, compatible, NAT64, 6to4,
    Teredo): each is checked, by the deny list and by the broker's own-endpoint check."""
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


# The networks an IPv6 client's /64 sits in, each rate-limited as a whole with this many times
# its /64's rate and burst: a site's usual allocation (/48) holds 65,536 /64s, an ISP's (/32)
# 65,536 /48s, and a client walks its own at will.
WIDER_PREFIXES = ((48, 4), (32, 16))


def wider_keys(host: str) -> list[tuple[str, int]]:
    """The wider networks an IPv6 client's address counts against besides its /64 (its /48 and
    /32, by `WIDER_PREFIXES`), each with its factor; none for IPv4 (an address is one client)
    or what is not an address."""
    try:
        ip = ipaddress.ip_address(host.split("%", 1)[0])
    except ValueError:
        return []
    if not isinstance(ip, ipaddress.IPv6Address) or ip.ipv4_mapped is not None:
        return []
    return [
        (str(ipaddress.IPv6Network((ip, prefix), strict=False)), factor)
        for prefix, factor in WIDER_PREFIXES
    ]


@functools.lru_cache(maxsize=4096)  # parsed once a client, not once a request
def address_key(host: str) -> tuple[str, bool]:
    """Who a connection from `host` counts against, and whether it is loopback: the address
    itself, or an IPv6 client's /64 (one subscriber line's usual allocation, which a client
    walks through at will); an IPv4 client seen through a dual-stack socket as itself."""
    try:
        ip = ipaddress.ip_address(host.split("%", 1)[0])
    except ValueError:  # not an IP address (a Unix socket's path)
        return host, False
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped is None:
            return str(ipaddress.IPv6Network((ip, 64), strict=False)), ip.is_loopback
        ip = ip.ipv4_mapped
    return str(ip), ip.is_loopback
