"""The AMQP 0-9-1 frames the lean client writes and reads, against bytes laid out as the
specification's grammar says (frame: type, channel, size, payload, 0xCE)."""

import struct

import pytest

from tidings.sim.perf.targets import amqp_wire as w


def test_the_protocol_header_is_amqp_0_9_1() -> None:
    assert w.PROTOCOL_HEADER == b"AMQP\x00\x00\x09\x01"


def test_a_multiple_ack_is_one_method_frame_with_the_tag_and_the_multiple_bit() -> None:
    frame = w.method(1, w.BASIC_ACK, struct.pack(">QB", 5, 1))
    assert frame == (
        b"\x01\x00\x01\x00\x00\x00\x0d"  # method, channel 1, 13 bytes
        b"\x00\x3c\x00\x50"  # basic.ack: class 60, method 80
        b"\x00\x00\x00\x00\x00\x00\x00\x05\x01"  # delivery-tag 5, multiple
        b"\xce"
    )
    (parsed,) = w.FrameReader().feed(frame)
    assert w.ack_of(parsed.payload) == (5, True)


def test_confirm_select_is_class_85_method_10_without_no_wait() -> None:
    assert w.method(1, w.CONFIRM_SELECT, w.bits(False)) == (
        b"\x01\x00\x01\x00\x00\x00\x05\x00\x55\x00\x0a\x00\xce"
    )


def test_a_persistent_content_header_carries_the_body_size_and_delivery_mode_2() -> None:
    assert w.content_header(1, 150, persistent=True) == (
        b"\x02\x00\x01\x00\x00\x00\x0f"  # header frame, channel 1, 15 bytes
        b"\x00\x3c\x00\x00"  # class 60, weight 0
        b"\x00\x00\x00\x00\x00\x00\x00\x96"  # body size 150
        b"\x10\x00\x02"  # property flags: delivery-mode only; 2 = persistent
        b"\xce"
    )
    assert w.content_header(1, 150, persistent=False)[-3:] == b"\x00\x00\xce"


def test_basic_publish_names_the_exchange_and_routing_key_as_shortstrs() -> None:
    frame = w.publish_prefix(1, "perf.x", "0")
    payload = frame[7:-1]
    assert payload == b"\x00\x3c\x00\x28\x00\x00\x06perf.x\x010\x00"


def test_a_body_larger_than_a_frame_is_split_into_body_frames() -> None:
    frames = w.FrameReader().feed(w.body_frames(1, b"a" * 25, frame_max=18))
    assert [f.kind for f in frames] == [w.BODY] * 3
    assert b"".join(f.payload for f in frames) == b"a" * 25


def test_frames_fed_a_byte_at_a_time_come_out_whole_and_in_order() -> None:
    stream = w.method(0, w.CLOSE_OK) + w.frame(w.HEARTBEAT, 0, b"") + w.content_header(1, 3, False)
    reader, frames = w.FrameReader(), []
    for i in range(len(stream)):
        frames += reader.feed(stream[i : i + 1])
    assert [(f.kind, f.channel) for f in frames] == [(w.METHOD, 0), (w.HEARTBEAT, 0), (w.HEADER, 1)]
    assert frames[1] == w.Frame(8, 0, b"")
    assert w.body_size(frames[2].payload) == 3


def test_a_frame_without_its_end_octet_is_refused() -> None:
    with pytest.raises(w.FrameError):
        w.FrameReader().feed(b"\x08\x00\x00\x00\x00\x00\x00\x00")


def test_basic_deliver_s_tag_follows_the_consumer_tag() -> None:
    payload = (
        struct.pack(">HH", *w.BASIC_DELIVER)
        + w.shortstr("amq.ctag-1")
        + struct.pack(">Q", 1234)
        + w.bits(False)
        + w.shortstr("perf.x")
        + w.shortstr("0")
    )
    assert w.deliver_tag(payload) == 1234


def test_a_close_names_its_code_text_and_the_method_that_failed() -> None:
    arguments = struct.pack(">H", 404) + w.shortstr("NOT_FOUND - no queue 'q'")
    payload = struct.pack(">HH", *w.CHANNEL_CLOSE) + arguments + struct.pack(">HH", 50, 10)
    assert w.close_reason(payload) == "404 NOT_FOUND - no queue 'q' (method 50.10)"


def test_start_ok_answers_plain_with_the_user_and_password_nul_separated() -> None:
    arguments = w.start_ok("p", "guest", "secret")
    table_size = struct.unpack_from(">I", arguments)[0]
    rest = arguments[4 + table_size :]
    assert rest == b"\x05PLAIN" + b"\x00\x00\x00\x0d\x00guest\x00secret" + b"\x05en_US"
    assert arguments[4 : 4 + table_size] == b"\x07productS\x00\x00\x00\x01p"


def test_queue_declare_ok_reports_the_messages_held() -> None:
    payload = struct.pack(">HH", *w.QUEUE_DECLARE_OK) + w.shortstr("q") + struct.pack(">II", 7, 0)
    assert w.declare_ok_count(payload) == 7
