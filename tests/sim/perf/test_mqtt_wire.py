"""The MQTT 3.1.1 packets the lean client writes and reads, against the specification's bytes
(remaining-length examples from its table 2.4)."""

import pytest

from tidings.sim.perf.targets import mqtt_wire as m


@pytest.mark.parametrize(
    ("size", "encoded"),
    [
        (0, b"\x00"),
        (127, b"\x7f"),
        (128, b"\x80\x01"),
        (16_383, b"\xff\x7f"),
        (16_384, b"\x80\x80\x01"),
        (2_097_151, b"\xff\xff\x7f"),
        (2_097_152, b"\x80\x80\x80\x01"),
        (268_435_455, b"\xff\xff\xff\x7f"),
    ],
)
def test_the_remaining_length_is_the_spec_s_variable_byte_integer(
    size: int, encoded: bytes
) -> None:
    assert m.remaining_length(size) == encoded
    body = b"x" * size if size < 20_000 else b""
    if body or size == 0:
        (parsed,) = m.PacketReader().feed(b"\x30" + encoded + body)
        assert len(parsed.body) == size


def test_a_length_beyond_four_bytes_is_refused() -> None:
    with pytest.raises(ValueError):
        m.remaining_length(268_435_456)
    with pytest.raises(m.PacketError):
        m.PacketReader().feed(b"\x30\xff\xff\xff\xff\x01")


def test_connect_is_mqtt_level_4_with_the_clean_session_flag_and_the_client_id() -> None:
    assert m.connect("c", clean_session=True) == (b"\x10\x0d\x00\x04MQTT\x04\x02\x00\x00\x00\x01c")
    assert m.connect("c", clean_session=False)[9] == 0x00


def test_subscribe_puback_and_disconnect_as_the_spec_lays_them_out() -> None:
    assert m.subscribe(10, "a/b", 1) == b"\x82\x08\x00\x0a\x00\x03a/b\x01"
    assert m.puback(10) == b"\x40\x02\x00\x0a"
    assert m.disconnect() == b"\xe0\x00"


def test_a_qos1_publish_round_trips_its_topic_packet_id_and_payload() -> None:
    raw = m.publish_qos1(m.string("perf/1/0"), 513, b"hello")
    assert raw[:2] == b"\x32\x11"  # PUBLISH, QoS 1; 2 + 8 + 2 + 5 bytes
    (packet,) = m.PacketReader().feed(raw)
    assert m.publish_of(packet) == m.PublishPacket("perf/1/0", 513, b"hello")


def test_packets_split_across_reads_come_out_whole_and_in_order() -> None:
    stream = m.publish_qos0("t", b"one") + m.puback(1) + m.publish_qos0("t", b"two" * 100)
    reader, packets = m.PacketReader(), []
    for i in range(0, len(stream), 7):
        packets += reader.feed(stream[i : i + 7])
    assert [p.kind for p in packets] == [m.PUBLISH, m.PUBACK, m.PUBLISH]
    assert m.publish_of(packets[2]).payload == b"two" * 100
    assert m.publish_of(packets[0]).packet_id == 0


def test_connack_zero_is_accepted_and_anything_else_a_refusal() -> None:
    (accepted,) = m.PacketReader().feed(b"\x20\x02\x00\x00")
    (refused,) = m.PacketReader().feed(b"\x20\x02\x00\x05")
    assert (m.connack_code(accepted), m.connack_code(refused)) == (0, 5)
