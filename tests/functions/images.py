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


def bomb_png(side: int = 13000) -> bytes:
    """A valid grey PNG of side x side pixels, all zero: about half a megabyte that decodes
    to side**2 bytes. Written row by row, never held decoded."""
    import struct
    import zlib

    def chunk(kind: bytes, body: bytes) -> bytes:
        crc = zlib.crc32(kind + body) & 0xFFFFFFFF
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", crc)

    header = struct.pack(">IIBBBBB", side, side, 8, 0, 0, 0, 0)  # 8-bit greyscale
    squeeze, row, idat = zlib.compressobj(9), b"\0" * (side + 1), []
    for _ in range(side):
        idat.append(squeeze.compress(row))
    idat.append(squeeze.flush())
    png = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header)
    return png + chunk(b"IDAT", b"".join(idat)) + chunk(b"IEND", b"")
