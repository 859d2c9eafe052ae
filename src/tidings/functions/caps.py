"""Input caps of the library's functions, checked before any work: an image's pixel count
from its header (before decoding: a 518 KB PNG can hold 13000x13000 pixels) and a text's
size. The worker sets them from the settings (`functions.max_image_pixels`,
`functions.max_text_bytes`)."""

from __future__ import annotations

CAPS = {"pixels": 40_000_000, "text_bytes": 100_000}
PREFIX = "InputTooLarge"  # how a refused call's error starts (the API answers 413)


class InputTooLarge(Exception):
    """An input past its cap; the call fails with this message."""


def set_caps(pixels: int, text_bytes: int) -> None:
    CAPS["pixels"], CAPS["text_bytes"] = pixels, text_bytes


def check_text(text: str) -> str:
    # a character is at most 4 bytes: counting them is enough for most texts
    if len(text) * 4 > CAPS["text_bytes"] and len(text.encode()) > CAPS["text_bytes"]:
        size = len(text.encode())
        raise InputTooLarge(f"the text is {size} bytes; the limit is {CAPS['text_bytes']}")
    return text


def check_pixels(width: int, height: int) -> None:
    if width * height > CAPS["pixels"]:
        raise InputTooLarge(
            f"the image is {width}x{height} pixels; the limit is {CAPS['pixels']} pixels"
        )
