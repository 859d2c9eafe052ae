"""Per-address quotas as the broker counts them: an IPv6 client's /64 is one address."""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.broker.test_operations import settings_for, started

from tidings.config import Limits
from tidings.errors import TidingsError


async def test_registrations_count_an_ipv6_clients_64_as_one_address(tmp_path: Path) -> None:
    limits = Limits(registrations_per_minute=2, rate_limit_loopback=True)
    broker = await started(settings_for(tmp_path, limits=limits))
    try:
        await broker.register(client="2001:db8:0:1::1")
        await broker.register(client="2001:db8:0:1::2")  # another address, the same /64
        with pytest.raises(TidingsError) as refused:
            await broker.register(client="2001:db8:0:1:ffff::3")
        assert refused.value.code.value == "rate_limited"
        await broker.register(client="2001:db8:0:2::1")  # another /64: its own count
        await broker.register(client="192.0.2.1")
        await broker.register(client="192.0.2.2")  # IPv4 addresses count one by one
    finally:
        await broker.close()
        broker.store.sync.close()
