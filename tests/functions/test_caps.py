"""The library's input caps: an image past the pixel cap is refused from its header, before
anything is decoded; a text past the byte cap before any work."""

from __future__ import annotations

import base64
import tracemalloc

import pytest
from tests.functions.images import bomb_png

from tidings.functions.caps import CAPS, InputTooLarge
from tidings.functions.text import text_of
from tidings.functions.vision import image_of


def test_a_decompression_bomb_is_refused_before_it_is_decoded() -> None:
    data = {"image": base64.b64encode(bomb_png()).decode()}
    tracemalloc.start()
    try:
        with pytest.raises(InputTooLarge, match="13000x13000"):
            image_of(data)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 8 * 1024 * 1024  # the base64 and the header; 169 MB decoded


def test_a_text_past_the_cap_is_refused_and_one_at_it_is_read() -> None:
    at = "a" * CAPS["text_bytes"]
    assert text_of(at) == at
    with pytest.raises(InputTooLarge, match="bytes"):
        text_of({"text": at + "é"})
