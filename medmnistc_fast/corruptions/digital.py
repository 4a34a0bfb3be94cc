"""Digital corruptions: pixelation (C++ reimplementation of Pillow's BOX resize) and JPEG
compression (Pillow); both bit-exact with the reference.

References: reference classes ``Pixelate`` and ``JPEGCompression`` in
``medmnistc/corruptions/compression.py`` (medmnistc 0.1.0).
"""
from __future__ import annotations

import io

import numpy as np
from PIL import Image

from .. import _native
from ._spec import Kind

__all__ = ["PIXELATE", "JPEG_COMPRESSION", "to_pil", "from_pil", "pil_from_buffer"]


def to_pil(image: np.ndarray) -> Image.Image:
    """(H, W, 1) -> Pillow "L", (H, W, 3) -> "RGB" (values unchanged; "L" maps ``image``'s
    memory read-only, see :func:`pil_from_buffer`)."""
    c = image.shape[2]
    if c == 1 and image.flags.c_contiguous:
        return pil_from_buffer(image, "L")
    return Image.fromarray(image[:, :, 0] if c == 1 else image)


def from_pil(pil: Image.Image, channels: int) -> np.ndarray:
    """Pillow image (8-bit "L" or "RGB") -> new C-contiguous uint8 (H, W, channels).

    Read through the image's Arrow export (``Image.__arrow_c_array__``, Pillow >= 11.2: one copy
    in C++, ``_native.pil_pixels``) when it has the expected layout, else with ``np.array``; both
    give the bytes of ``pil.tobytes()`` (``np.array`` goes through ``tobytes`` and copies again:
    6 us instead of 2.5 at 224 x 224 gray, 25 instead of 5.5 for RGB).
    """
    w, h = pil.size
    export = getattr(pil, "__arrow_c_array__", None)
    if export is not None and h > 0 and w > 0 and pil.mode in ("L", "RGB"):
        try:
            capsules = export()
        except (ValueError, TypeError, NotImplementedError):  # e.g. rows not contiguous
            capsules = None
        if capsules is not None:
            c = 1 if pil.mode == "L" else 3
            arr = _native.pil_pixels(capsules[0], capsules[1], h, w, c)
            if arr is not None:
                return arr if c == channels else arr.reshape(h, w, channels)
    arr = np.array(pil)  # a writable copy; the image is 8-bit L or RGB
    return arr.reshape(arr.shape[0], arr.shape[1], channels)


def pil_from_buffer(arr: np.ndarray, mode: str) -> Image.Image:
    """A read-only PIL image of mode "L" or "RGB" on the pixels of ``arr``.

    ``arr``: C-contiguous uint8, (H, W[, 1]) for "L" (the image maps its memory, no copy) or
    (H, W, 3) for "RGB" (copied: Pillow stores RGB in 4 bytes per pixel), through
    ``Image.frombuffer(mode, size, arr, "raw", mode, 0, 1)``. Writes to the image go to a
    private copy, never to ``arr``.
    """
    return Image.frombuffer(mode, (arr.shape[1], arr.shape[0]), arr, "raw", mode, 0, 1)


def _sample_pixelate(param, ctx) -> dict:
    return {"factor": float(param)}


def _pixelate_kernel(image, *, factor):
    """BOX-downsample to ``(max(1, int(W * factor)), max(1, int(H * factor)))`` and BOX-upsample
    back, as two Pillow ``Image.resize(..., Image.BOX)`` calls (the reference's ``Pixelate``).

    Computed by the C++ kernel ``_native.pixelate``, which reproduces Pillow's 8-bit BOX
    resampling bit for bit (tests/test_resample.py checks it against Pillow). The ``max(1, ...)``
    guard only acts where the reference would fail (a zero side)."""
    h, w, _ = image.shape
    return _native.pixelate(image, max(1, int(w * factor)), max(1, int(h * factor)))


def _sample_quality(param, ctx) -> dict:
    return {"quality": int(param)}


def _jpeg_kernel(image, *, quality):
    """Pillow JPEG encode at ``quality`` (Pillow defaults: 4:2:0 chroma subsampling for RGB),
    then decode.

    An RGB image is handed to Pillow as an "RGBX" image mapped on a padded copy
    (``_native.rgbx_pixels``, Pillow's own 4-byte layout): libjpeg receives the same R, G, B
    samples as from ``Image.fromarray`` and writes the same bytes (tests/test_color_digital.py),
    without ``Image.fromarray``'s array-interface round trip and unpacking (about 25 us at
    224 x 224). The decode goes straight to Pillow's JPEG decoder
    (``Image.frombytes(..., "jpeg", ...)``) instead of ``Image.open``, which would first parse the
    markers in Python; the pixels are the same libjpeg output.
    """
    h, w, c = image.shape
    if c == 3:
        pil = Image.frombuffer("RGBX", (w, h), _native.rgbx_pixels(image), "raw", "RGBX", 0, 1)
        mode = "RGB"
    else:
        pil = to_pil(image)
        mode = pil.mode
    buf = io.BytesIO()
    pil.save(buf, format="JPEG", quality=int(quality))
    decoded = Image.frombytes(mode, (w, h), buf.getbuffer(), "jpeg", mode, "")
    return from_pil(decoded, c)


PIXELATE = Kind("pixelate", _sample_pixelate, _pixelate_kernel, random=False)
JPEG_COMPRESSION = Kind("jpeg_compression", _sample_quality, _jpeg_kernel, random=False)
