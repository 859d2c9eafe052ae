from tidings.sim.perf.stats import Recorder


def test_a_second_repeated_delivery_counts_as_a_duplicate_not_a_receipt() -> None:
    recorder = Recorder()
    now = recorder.start_ns
    recorder.on_received(0, 0, 1, now, now + 2_000_000)
    recorder.on_received(0, 0, 1, now, now + 3_000_000)
    recorder.on_received(1, 0, 1, now, now + 4_000_000)  # another consumer: its own delivery
    assert recorder.received == 2
    assert recorder.duplicates == 1


def test_each_second_reports_its_sends_receipts_and_latency_percentiles() -> None:
    recorder = Recorder()
    start = recorder.start_ns
    for i in range(1, 101):
        recorder.on_sent(start + 1_000_000_000, wanted=1, routed=1)
        recorder.on_received(0, 0, i, start + 1_000_000_000, start + 1_000_000_000 + i * 10_000)
    second = recorder.second(1)
    assert (second.sent, second.received) == (100, 100)
    low, median, _, _, p99 = second.latency_ms
    assert low == 0.01
    assert 0.49 < median < 0.52
    assert 0.98 < p99 <= 1.0
    assert recorder.second(0).latency_ms == ()


def test_only_this_process_s_own_receipts_are_handed_on_not_merged_ones() -> None:
    recorder = Recorder()
    now = recorder.start_ns
    recorder.merge([(now + 1_000_000, 1.0)])  # from a consumer process: counted, not re-sent
    recorder.on_received(0, 0, 1, now, now + 2_000_000)
    assert recorder.received == 2
    assert recorder.take_fresh() == [(now + 2_000_000, 2.0)]
    assert recorder.take_fresh() == []
