"""A host's byte budget, shared by every webhook to it: a second's worth at once, then the
pace of the budget; each host its own."""

from __future__ import annotations

from tidings.delivery.hosts import HostBudgets


class Time:
    def __init__(self) -> None:
        self.now = 0.0
        self.slept: list[float] = []

    def clock(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


def budgets(rate: float, time: Time) -> HostBudgets:
    return HostBudgets(rate, time.clock, time.sleep)


async def test_a_second_s_worth_goes_at_once_then_the_budget_s_pace() -> None:
    time = Time()
    hosts = budgets(1000, time)
    await hosts.spend("http://a.example/hook", 600)
    await hosts.spend("http://a.example/other", 400)  # the same host: one budget
    assert time.slept == []
    await hosts.spend("http://a.example:80/hook", 500)
    assert time.slept == [0.5]


async def test_hosts_have_budgets_of_their_own() -> None:
    time = Time()
    hosts = budgets(1000, time)
    await hosts.spend("http://a.example/", 1000)
    await hosts.spend("http://b.example/", 1000)
    await hosts.spend("http://a.example:8080/", 1000)  # another port: another target
    assert time.slept == []


async def test_a_request_larger_than_the_burst_waits_for_a_whole_burst() -> None:
    time = Time()
    hosts = budgets(1000, time)
    await hosts.spend("http://a.example/", 1000)
    await hosts.spend("http://a.example/", 50_000)
    assert time.slept == [1.0]


async def test_no_budget_sends_at_once() -> None:
    time = Time()
    await budgets(0, time).spend("http://a.example/", 10**9)
    assert time.slept == []
