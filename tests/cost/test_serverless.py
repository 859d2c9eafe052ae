"""The thesis's serverless arithmetic (section 6.5.7, table 6.11) from its price table."""

from __future__ import annotations

import pytest

from tidings.cost.prices import load_serverless
from tidings.cost.serverless import Bill, Usage, bill
from tidings.errors import ErrorCode, TidingsError

# Table 6.11: 3 million executions of 512 MB for 1 s each.
THESIS = Usage(executions=3_000_000, memory_mb=512, duration_ms=1000)


def bill_at(provider: str, usage: Usage) -> Bill:
    return bill(usage, load_serverless().providers[provider])


@pytest.mark.parametrize(("provider", "resource_cost"), [("aws", 18.34), ("azure", 17.60)])
def test_the_thesis_table_6_11_follows_from_its_prices(provider: str, resource_cost: float) -> None:
    compute, runs, _, _ = bill_at(provider, THESIS).lines
    assert (compute.quantity, compute.free, compute.billable) == (1_500_000, 400_000, 1_100_000)
    assert round(compute.cost, 2) == resource_cost
    assert (runs.quantity, runs.free, runs.billable) == (3_000_000, 1_000_000, 2_000_000)
    assert round(runs.cost, 2) == 0.40


def test_the_thesis_totals_are_the_resource_and_execution_costs() -> None:
    assert round(bill_at("aws", THESIS).total, 2) == 18.74
    assert round(bill_at("azure", THESIS).total, 2) == 18.00


def test_executions_come_from_publications_and_matching_functions_unless_given() -> None:
    usage = Usage(
        publications_per_month=1_000_000, executions_per_publication=2, function_invocations=500_000
    )
    _, runs, _, _ = bill_at("aws", usage).lines
    assert runs.quantity == 2_500_000
    assert runs.cost == pytest.approx(1_500_000 / 1e6 * 0.20)


def test_usage_within_the_free_grants_costs_nothing() -> None:
    usage = Usage(publications_per_month=100_000, memory_mb=128, duration_ms=200, storage_gb=10)
    assert bill_at("aws", usage).total == 0


def test_sqs_bills_one_request_per_started_64_kb_of_payload_and_service_bus_one() -> None:
    usage = Usage(deliveries=2_000_000, requests_per_delivery=1, payload_kb=256)
    _, _, aws_queue, _ = bill_at("aws", usage).lines
    _, _, azure_queue, _ = bill_at("azure", usage).lines
    assert aws_queue.quantity == 8_000_000
    assert aws_queue.cost == pytest.approx(7_000_000 / 1e6 * 0.40)
    assert azure_queue.quantity == 2_000_000
    assert azure_queue.cost == pytest.approx(2 * 0.05)


def test_subscriber_polls_are_queue_requests_too() -> None:
    usage = Usage(deliveries=1000, subscribers=10, polls_per_subscriber=129_600)
    _, _, queue, _ = bill_at("azure", usage).lines
    assert queue.quantity == 1000 * 3 + 10 * 129_600


def test_storage_is_billed_above_its_free_grant() -> None:
    _, _, _, aws = bill_at("aws", Usage(storage_gb=125)).lines
    _, _, _, azure = bill_at("azure", Usage(storage_gb=125)).lines
    assert aws.cost == pytest.approx(100 * 0.306)
    assert azure.cost == pytest.approx(125 * 0.07)


def test_storage_beyond_the_priced_tier_is_refused_rather_than_guessed() -> None:
    with pytest.raises(TidingsError) as caught:
        bill_at("azure", Usage(storage_gb=2048))
    assert (caught.value.code, caught.value.field) == (ErrorCode.INVALID_FIELD, "storage")


@pytest.mark.parametrize(
    ("usage", "option"),
    [
        ({"publications_per_month": -1}, "--publications-per-month"),
        ({"memory_mb": 0}, "--memory-mb"),
        ({"duration_ms": float("nan")}, "--duration-ms"),
        ({"executions": -5}, "--executions"),
    ],
)
def test_negative_or_impossible_usage_is_refused_naming_the_option(
    usage: dict[str, float], option: str
) -> None:
    with pytest.raises(TidingsError) as caught:
        Usage(**usage)
    assert (caught.value.code, caught.value.field) == (ErrorCode.INVALID_FIELD, option)
