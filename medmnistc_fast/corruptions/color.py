"""Colour corruptions: brightness, contrast, gamma correction and saturation.

brightness and contrast are Pillow's ``ImageEnhance`` (a blend with a black image, or with a
constant gray image of the picture's rounded mean luma), gamma is torchvision's PIL
``adjust_gamma`` (gain 1), saturation is scikit-image ``rgb2hsv`` / ``hsv2rgb`` with the S
channel shifted and clipped. All four act on each pixel alone, so they run as 256-entry lookup
tables (Pillow's blend and torchvision's gamma arithmetic repeated bit for bit, applied by the
C++ kernel of ``csrc/lut.cpp``) or as the per-pixel Numba HSV kernel of :mod:`._hsv` that
repeats scikit-image's float64 operations in order.

References: reference classes ``Brightness``, ``Contrast``, ``GammaCorrection``, ``Saturate``
in ``medmnistc/corruptions/enhance.py`` (medmnistc 0.1.0).
"""
from __future__ import annotations

import math
from functools import lru_cache

import numpy as np

from .. import _native
from ._hsv import hsv_shift_kernel
from ._spec import Kind

__all__ = ["BRIGHTNESS", "CONTRAST", "GAMMA", "SATURATE", "brightness_lut", "contrast_lut",
           "gamma_lut"]

_RAMP32 = np.arange(256, dtype=np.float32)


def _blend_lut(base: int, factor: float) -> np.ndarray:
    """``lut[v]`` = Pillow ``Image.blend(constant base, v, factor)`` for one byte.

    Pillow's 8-bit blend (``libImaging/Blend.c``) computes ``base + alpha * (v - base)`` in
    C ``float`` (alpha is a float32) and casts to uint8 by truncation; for ``alpha`` outside
    [0, 1] it first clips to [0, 255]. The same float32 operations in NumPy give the same bytes
    (checked against Pillow in tests/test_color_digital.py) at a fifth of the cost of building
    Pillow images, which matters when augmentation draws a new factor per call.
    """
    a = np.float32(factor)
    b = np.float32(base)
    t = b + a * (_RAMP32 - b)
    if not 0.0 <= a <= 1.0:
        t = np.clip(t, np.float32(0), np.float32(255))
    lut = t.astype(np.uint8)
    lut.setflags(write=False)
    return lut


@lru_cache(maxsize=1024)
def brightness_lut(factor: float) -> np.ndarray:
    """``lut[v]`` = Pillow ``ImageEnhance.Brightness(...).enhance(factor)`` of value ``v``.

    Pillow's ``Image.blend`` of a black image with the image, per byte (:func:`_blend_lut`).
    """
    return _blend_lut(0, float(factor))


@lru_cache(maxsize=4096)
def contrast_lut(factor: float, mean: int) -> np.ndarray:
    """``lut[v]`` = Pillow's contrast blend of ``v`` with the constant gray ``mean`` (0..255)
    (:func:`_blend_lut`)."""
    return _blend_lut(int(mean), float(factor))


_GAMMA_GAIN = 255 + 1 - 1e-3  # torchvision's PIL adjust_gamma: 255 + 1 - 1e-3 (gain 1)
_UNIT = np.arange(256) / 255.0


@lru_cache(maxsize=1024)
def gamma_lut(gamma: float) -> np.ndarray:
    """``lut[v] = int((255 + 1 - 1e-3) * (v / 255) ** gamma)``: torchvision ``adjust_gamma``
    on a PIL image with gain 1 (``torchvision/transforms/_functional_pil.py``), which evaluates
    it with Python's float ``**`` (C ``pow``).

    Vectorised with NumPy's ``power``, whose last bits may differ from C ``pow``; truncation
    only sees that where the product is within about 1e-9 of an integer, and those entries are
    recomputed with :func:`math.pow`, so the table equals the Python loop's.
    """
    g = float(gamma)
    vals = _GAMMA_GAIN * np.power(_UNIT, g)
    near = np.abs(vals - np.rint(vals)) < 1e-9
    for v in np.flatnonzero(near):
        vals[v] = _GAMMA_GAIN * math.pow(v / 255.0, g)
    lut = vals.astype(np.int64).astype(np.uint8)
    lut.setflags(write=False)
    return lut


def apply_lut(image: np.ndarray, lut: np.ndarray) -> np.ndarray:
    """``lut[image]``: a uint8 (H, W, C) C-contiguous image through a uint8 (256,) table.

    Returns a new uint8 array of the same shape. C++ (``csrc/lut.cpp``): AVX-512 VBMI byte
    permutes where the CPU has them, else a plain loop; both give the same bytes.
    """
    return _native.apply_lut(image, lut)


def mean_luma(image: np.ndarray) -> int:
    """``int(mean(L) + 0.5)``, Pillow ``ImageEnhance.Contrast``'s gray level for ``image``.

    ``L = (19595 R + 38470 G + 7471 B + 0x8000) >> 16`` per pixel (Pillow's RGB -> L
    conversion) for 3 channels, the value itself for one; ``image`` is uint8 (H, W, 1 or 3).
    """
    h, w, _ = image.shape
    return int(_native.luma_sum(image) / (h * w) + 0.5)


def _sample_factor(param, ctx) -> dict:
    return {"factor": float(param)}


def _brightness_kernel(image, *, factor):
    # One C++ call: the table of brightness_lut (tested equal) and apply_lut.
    return _native.brightness(image, float(factor))


def _contrast_kernel(image, *, factor):
    # One C++ call: contrast_lut(factor, mean_luma(image)) (tested equal) and apply_lut.
    return _native.contrast(image, float(factor))


def _sample_gamma(param, ctx) -> dict:
    return {"gamma": float(param)}


def _gamma_kernel(image, *, gamma):
    # One C++ call: the table of gamma_lut (tested equal) and apply_lut.
    return _native.gamma(image, float(gamma))


def _sample_shift(param, ctx) -> dict:
    return {"shift": float(param)}


def _saturate_kernel(image, *, shift):
    return hsv_shift_kernel(image, 1, float(shift))


BRIGHTNESS = Kind("brightness", _sample_factor, _brightness_kernel, random=False)
CONTRAST = Kind("contrast", _sample_factor, _contrast_kernel, random=False)
GAMMA = Kind("gamma", _sample_gamma, _gamma_kernel, random=False)
SATURATE = Kind("saturate", _sample_shift, _saturate_kernel, random=False)
