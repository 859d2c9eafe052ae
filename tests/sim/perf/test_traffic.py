import pytest

from tidings.errors import ErrorCode, TidingsError
from tidings.sim.perf.traffic import X_DOMAIN, BodyHeader, Workload, decode, encode


def test_a_body_is_exactly_the_requested_size_and_decodes_to_its_header() -> None:
    header = BodyHeader(send_ns=1_700_000_000_123_456_789, producer=3, seq=42, x=9_999)
    body = encode(header, 150)
    assert len(body) == 150
    assert decode(body) == header
    assert decode(body.decode()) == header


@pytest.mark.parametrize(
    ("field", "overrides"),
    [
        ("--size", {"size": 10}),
        ("--producers", {"producers": 0}),
        ("--duration", {"duration": 0}),
        ("--settle", {"settle": -1}),
        ("--selectivity", {"selectivity": 1.5}),
        ("--topics", {"selectivity": 0.1, "topics": 2}),
        ("--rate", {"rate": -1}),
    ],
)
def test_a_workload_out_of_bounds_is_refused_naming_the_option(
    field: str, overrides: dict[str, float]
) -> None:
    with pytest.raises(TidingsError) as caught:
        Workload(**overrides)  # type: ignore[arg-type]
    assert caught.value.code is ErrorCode.INVALID_FIELD
    assert caught.value.field == field


def test_without_selectivity_every_consumer_wants_everything() -> None:
    assert Workload(consumers=3).wanted(2) == range(X_DOMAIN)


def test_with_selectivity_each_consumer_wants_a_window_of_that_share_of_the_domain() -> None:
    workload = Workload(consumers=50, selectivity=0.01)
    windows = [workload.wanted(c) for c in range(50)]
    assert all(len(w) == X_DOMAIN // 100 for w in windows)
    assert all(w.start >= 0 and w.stop <= X_DOMAIN for w in windows)
    assert len({w.start for w in windows}) > 1  # spread over the domain, not all alike


def test_consumers_are_spread_over_the_topics_round_robin() -> None:
    workload = Workload(consumers=5, topics=2)
    assert [workload.topic_of_consumer(c) for c in range(5)] == [0, 1, 0, 1, 0]


def test_the_header_has_fixed_widths_so_that_a_consumer_reads_it_by_position() -> None:
    body = encode(BodyHeader(send_ns=12, producer=3, seq=42, x=7), 48)
    assert body == b"0000000000000000012:00003:0000000042:00007:xxxxx"
    assert decode(body) == BodyHeader(12, 3, 42, 7)


def test_batches_and_message_counts_out_of_bounds_are_refused_naming_the_option() -> None:
    for field, overrides in (("--batch", {"batch": 0}), ("--messages", {"messages": -1})):
        with pytest.raises(TidingsError) as caught:
            Workload(**overrides)  # type: ignore[arg-type]
        assert caught.value.field == field
