"""Real photographs shipped with scikit-image, as the base64 PNGs publications carry."""

from __future__ import annotations

import base64
import io

import numpy as np
from PIL import Image
from skimage import data


def encoded(name: str, image_format: str = "JPEG") -> str:
    """The photo as base64 JPEG (PNG photos would pass the 256 KiB publication limit)."""
    pixels = getattr(data, name)()
    if pixels.ndim == 2:
        pixels = np.stack([pixels] * 3, axis=-1)
    buffer = io.BytesIO()
    Image.fromarray(pixels).save(buffer, format=image_format)
    return base64.b64encode(buffer.getvalue()).decode()


WITH_FACE = "astronaut"
WITHOUT_FACES = ("coffee", "rocket")
PRINTED_PAGE = "page"
