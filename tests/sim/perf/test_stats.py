from array import array

from tidings.sim.perf.stats import Recorder


def test_a_second_repeated_delivery_counts_as_a_duplicate_not_a_receipt() -> None:
    recorder = Recorder()
    now = recorder.start_ns
    recorder.on_received(0, 0, 1, now, now + 2_000_000)
    recorder.on_received(0, 0, 1, now, now + 3_000_000)
    recorder.on_received(1, 0, 1, now, now + 4_000_000)  # another consumer: its own delivery
    recorder.on_received(0, 1, 1, now, now + 4_000_000)  # another producer's seq 1: another id
    assert recorder.received == 3
    assert recorder.duplicates == 1


def test_each_second_reports_its_sends_receipts_and_latency_percentiles() -> None:
    recorder = Recorder()
    start = recorder.start_ns
    recorder.on_sent(start + 1_000_000_000, count=100, wanted=100, routed=100)
    for i in range(1, 101):
        recorder.on_received(0, 0, i, start + 1_000_000_000, start + 1_000_000_000 + i * 10_000)
    second = recorder.second(1)
    assert (second.sent, second.received) == (100, 100)
    low, median, _, _, p99 = second.latency_ms
    assert low == 0.01
    assert 0.49 < median < 0.52
    assert 0.98 < p99 <= 1.0
    assert recorder.second(0).latency_ms == ()


def test_receipts_handed_on_by_a_consumer_process_merge_into_the_parent_s_count() -> None:
    child, parent = Recorder(), Recorder()
    now = child.start_ns
    child.on_received(0, 0, 1, now, now + 2_000_000)
    child.on_received(0, 0, 2, now, now + 5_000_000)
    parent.merge(child.take_fresh())
    assert child.take_fresh() == (b"", b"")  # each receipt is handed on once
    assert parent.received == 2
    assert parent.last_receive_ns == now + 5_000_000
    assert list(parent.latencies()) == [2.0, 5.0]
    assert array("q", child.take_fresh()[0]).tolist() == []
