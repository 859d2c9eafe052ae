"""Which addresses outbound calls may reach: every spelling of a denied address is denied,
the operator's networks add to the defaults, and URLs are checked strictly."""

from __future__ import annotations

import re

import pytest

from tidings.addresses import DEFAULT_DENIED, Own, denied, deny_list, networks, url_problem

METADATA = networks("169.254.0.0/16")


@pytest.mark.parametrize(
    "spelling",
    [
        "169.254.169.254",
        "::ffff:169.254.169.254",  # IPv4-mapped
        "::ffff:a9fe:a9fe",
        "::a9fe:a9fe",  # IPv4-compatible
        "64:ff9b::a9fe:a9fe",  # NAT64, the well-known prefix
        "64:ff9b:1::a9fe:a9fe",  # NAT64, local use, /96 layout
        "64:ff9b:1:a9fe:a9:fe00::",  # NAT64, local use, RFC 6052's /48 layout
        "2002:a9fe:a9fe::1",  # 6to4
        "2001:0:4136:e378:8000:63bf:5601:5601",  # Teredo: the client is 169.254.169.254
        "2001:0:a9fe:a9fe::1",  # Teredo: the server is
    ],
)
def test_every_spelling_of_a_denied_ipv4_address_is_denied(spelling: str) -> None:
    assert denied(spelling, METADATA)


def test_addresses_outside_the_denied_networks_are_allowed() -> None:
    for address in ("10.0.0.1", "::1", "2001:db8::1", "64:ff9b::a00:1", "2002:a00:1::1"):
        assert not denied(address, METADATA), address


def test_the_defaults_hold_this_machine_and_the_metadata_services() -> None:
    defaults = deny_list("")
    for address in (
        "::", "::1", "0.0.0.0", "fe80::1%eth0", "169.254.169.254", "100.100.100.200",
        "fd00:ec2::254", "fd20:ce::254",  # AWS's and Google Cloud's metadata over IPv6
        "127.0.0.1", "127.1.2.3", "::ffff:127.0.0.1",  # another broker, any local service
    ):  # fmt: skip
        assert denied(address, defaults), address


def test_an_allowed_network_is_exempted_from_the_defaults_alone() -> None:
    local = deny_list("10.0.0.0/8", allow="127.0.0.0/8")
    assert not denied("127.0.0.1", local) and not denied("::ffff:127.0.0.1", local)
    for address in ("::1", "169.254.169.254", "0.0.0.0", "10.1.2.3"):
        assert denied(address, local), address
    narrow = deny_list("", allow="169.254.169.0/24,10.0.0.0/8")  # a part of a default network
    assert not denied("169.254.169.254", narrow) and denied("169.254.1.1", narrow)
    assert deny_list("", allow="0.0.0.0/0,::/0") == ()


def test_the_operator_s_networks_add_to_the_defaults() -> None:
    both = deny_list("10.0.0.0/8")
    assert denied("10.1.2.3", both) and denied("169.254.169.254", both)


def test_the_defaults_go_only_when_the_operator_says_so() -> None:
    only = deny_list("10.0.0.0/8", defaults=False)
    assert denied("10.1.2.3", only) and not denied("169.254.169.254", only)
    assert deny_list("", defaults=False) == ()
    assert len(networks(DEFAULT_DENIED)) == len(deny_list(""))


def test_a_network_list_with_a_bad_entry_names_it() -> None:
    with pytest.raises(ValueError, match=re.escape("'10.0.0.300/8'")):
        networks("10.0.0.0/8, 10.0.0.300/8")


@pytest.mark.parametrize(
    ("url", "problem"),
    [
        ("ftp://example.com/", "the scheme is http or https"),
        ("http://user:pw@example.com/", "no credentials"),
        ("http://exämple.com/", "printable ASCII only"),
        ("http://[::]:8080/", "denied network"),
        ("http://[::1]/", "denied network"),
        ("http://[::ffff:169.254.169.254]/", "denied network"),
        ("http://169.254.169.254/latest/meta-data", "denied network"),
        ("http://127.0.0.1:9000/hook", "denied network, 127.0.0.0/8"),
        ("http://localhost:9000/hook", "denied network"),  # loopback by its name, too
        ("http://a.localhost/", "denied network"),
        ("http://2852039166/", "dotted decimal"),  # 169.254.169.254 as one number
        ("http://0xa9fe.0xa9fe/", "dotted decimal"),
        ("http://169.254.43518/", "dotted decimal"),
        ("http://exa_mple.com/", "neither a DNS name nor an address"),
        ("http://example.com:0/", "port 0"),
        ("http://example.com:99999/", "not a usable URL"),
        ("http:///path", "names no host"),
    ],
)
def test_a_url_is_checked_strictly(url: str, problem: str) -> None:
    found = url_problem(url, deny_list(""))
    assert found is not None and problem in found


@pytest.mark.parametrize(
    "url",
    ["http://10.0.0.1:9000/hook", "https://hooks.example.com/a?b=c", "http://[2001:db8::1]/"],
)
def test_a_plain_url_passes(url: str) -> None:
    assert url_problem(url, deny_list("")) is None


def test_a_denied_address_names_its_network_and_the_setting_that_allows_it() -> None:
    found = url_problem("http://127.0.0.1/", deny_list(""), None, "webhooks.allow_networks")
    assert found is not None and "127.0.0.0/8" in found and "webhooks.allow_networks" in found
    loopback = deny_list("", allow="127.0.0.0/8")
    assert url_problem("http://127.0.0.1:9000/hook", loopback) is None
    assert url_problem("http://localhost:9000/hook", loopback) is None  # one address will do


def test_the_broker_s_own_endpoint_is_known_in_every_spelling() -> None:
    own = Own("127.0.0.1", 8080)
    spellings = ("127.0.0.1", "127.0.0.2", "localhost", "::1", "::ffff:127.0.0.1", "0.0.0.0")
    for address in (*spellings, "localhost.", "LocalHost", "broker.localhost"):
        assert own.is_self(address, 8080), address
    assert not own.is_self("127.0.0.1", 8081)
    assert not own.is_self("10.0.0.1", 8080)
    assert url_problem("http://localhost:8080/api/RegisterSubscriber", (), own) is not None
    assert url_problem("http://localhost:8081/hook", (), own) is None


@pytest.mark.parametrize(
    "address",
    [
        "192.0.2.2",
        "::ffff:192.0.2.2",  # mapped
        "::c000:202",  # compatible
        "64:ff9b::c000:202",  # NAT64
        "2002:c000:202::",  # 6to4
        "2001:0:4136:e378:8000:63bf:3fff:fdfd",  # Teredo, the client 192.0.2.2 obfuscated
    ],
)
def test_the_broker_s_own_address_is_known_in_every_form_that_embeds_it(address: str) -> None:
    own = Own("192.0.2.2", 8080)
    assert own.is_self(address, 8080)
    host = f"[{address}]" if ":" in address else address
    assert url_problem(f"http://{host}:8080/hook", (), own) == "the URL is this broker's own"
    assert not own.is_self(address, 8081)
    assert not Own("192.0.2.3", 8080).is_self(address, 8080)
