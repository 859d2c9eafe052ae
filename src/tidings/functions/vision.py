"""Vision functions on `{"image": "<base64 PNG or JPEG>"}` in the publication data.

Faces: scikit-image's LBP frontal-face cascade (shipped with the package). Printed text:
Tesseract OCR (the system's `tesseract`, through pytesseract). No downloads.
"""

from __future__ import annotations

import base64
import binascii
import io
import warnings
from collections.abc import Mapping
from functools import lru_cache
from typing import Any

import numpy as np
from PIL import Image, UnidentifiedImageError

from tidings.functions.caps import InputTooLarge, check_pixels

MAX_SIDE = 1024  # larger images are scaled down first: bounded work per call


def image_of(data: Any) -> np.ndarray | None:
    """The RGB pixels of the data's image, or None when there is no readable image;
    InputTooLarge past the pixel cap, known from the header before anything is decoded."""
    raw = data.get("image") if isinstance(data, Mapping) else None
    if not isinstance(raw, str):
        return None
    try:
        img = opened(base64.b64decode(raw, validate=True))
        check_pixels(*img.size)
        img.thumbnail((MAX_SIDE, MAX_SIDE))
        return np.asarray(img.convert("RGB"))
    except (binascii.Error, ValueError, UnidentifiedImageError, OSError):
        return None


def opened(raw: bytes) -> Image.Image:
    """The image, its header read and nothing decoded; Pillow's own bomb check (a warning
    past 89 megapixels, an error past twice that) speaks as our cap does."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", Image.DecompressionBombWarning)  # our cap says it
        try:
            return Image.open(io.BytesIO(raw))
        except Image.DecompressionBombError as exc:
            raise InputTooLarge(str(exc)) from None


@lru_cache(maxsize=1)
def _cascade() -> Any:
    from skimage import data
    from skimage.feature import Cascade

    return Cascade(data.lbp_frontal_face_cascade_filename())  # type: ignore[no-untyped-call]


def faces(pixels: np.ndarray) -> int:
    from skimage.color import rgb2gray

    gray = rgb2gray(pixels)
    side = min(gray.shape)
    found = _cascade().detect_multi_scale(
        img=gray,
        scale_factor=1.2,
        step_ratio=1,
        min_size=(max(24, side // 10),) * 2,
        max_size=(side, side),
    )
    return len(found)


def text_in(pixels: np.ndarray) -> str:
    import pytesseract

    return str(pytesseract.image_to_string(Image.fromarray(pixels))).strip()


def detect_faces(data: Any, params: Mapping[str, Any]) -> bool:
    """True when the image shows at least `min_faces` faces (default 1)."""
    pixels = image_of(data)
    return pixels is not None and faces(pixels) >= int(params.get("min_faces", 1))


def detect_printed_text(data: Any, params: Mapping[str, Any]) -> bool:
    """True when the image has printed text (containing `contains`, if given)."""
    pixels = image_of(data)
    if pixels is None:
        return False
    text = text_in(pixels).lower()
    return str(params["contains"]).lower() in text if "contains" in params else bool(text)


def dominant_colours(pixels: np.ndarray, n: int = 3) -> list[str]:
    """The most common coarse colours (each channel in 4 levels), as hex."""
    coarse = (pixels.reshape(-1, 3) // 64).astype(np.int64)
    codes, counts = np.unique(
        coarse[:, 0] * 16 + coarse[:, 1] * 4 + coarse[:, 2], return_counts=True
    )
    top = codes[np.argsort(counts)[::-1][:n]]
    return ["#" + "".join(f"{(int(c) >> s & 3) * 64 + 32:02x}" for s in (4, 2, 0)) for c in top]


def describe(pixels: np.ndarray) -> dict[str, Any]:
    return {
        "width": int(pixels.shape[1]),
        "height": int(pixels.shape[0]),
        "dominant_colours": dominant_colours(pixels),
        "faces": faces(pixels),
        "text": bool(text_in(pixels)),
    }


def analyze_image(data: Any, params: Mapping[str, Any]) -> bool:
    """True when the image has every feature in `has` ("faces", "text", "colour"...);
    with no `has`, when there is a readable image at all."""
    pixels = image_of(data)
    if pixels is None:
        return False
    wanted = set(params.get("has", []))
    if not wanted:
        return True
    facts = describe(pixels)
    present = {k for k in ("faces", "text") if facts[k]} | {"image"}
    return wanted <= present


def warm() -> None:
    """Load the face cascade once."""
    faces(np.zeros((64, 64, 3), np.uint8))
