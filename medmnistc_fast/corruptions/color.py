"""Colour corruptions: brightness, contrast, gamma correction and saturation.

brightness and contrast are Pillow's ``ImageEnhance`` (a blend with a black image, or with a
constant gray image of the picture's rounded mean luma), gamma is torchvision's PIL
``adjust_gamma`` (gain 1), saturation is scikit-image ``rgb2hsv`` / ``hsv2rgb`` with the S
channel shifted and clipped. All four act on each pixel alone, so they run as 256-entry lookup
tables (built once per parameter by Pillow itself, so they are Pillow's arithmetic bit for bit)
or as the per-pixel Numba HSV kernel of :mod:`._hsv` that repeats scikit-image's float64
operations in order.

References: reference classes ``Brightness``, ``Contrast``, ``GammaCorrection``, ``Saturate``
in ``medmnistc/corruptions/enhance.py`` (medmnistc 0.1.0).
"""
from __future__ import annotations

from functools import lru_cache

import numba
import numpy as np
from PIL import Image

from .._config import NJIT
from ._hsv import hsv_shift_kernel
from ._spec import Kind

__all__ = ["BRIGHTNESS", "CONTRAST", "GAMMA", "SATURATE", "brightness_lut", "contrast_lut",
           "gamma_lut"]

_RAMP = Image.frombytes("L", (256, 1), bytes(range(256)))


@lru_cache(maxsize=1024)
def brightness_lut(factor: float) -> np.ndarray:
    """``lut[v]`` = Pillow ``ImageEnhance.Brightness(...).enhance(factor)`` of value ``v``.

    Pillow's ``Image.blend`` of a black image with the image, per byte.
    """
    black = Image.new("L", (256, 1), 0)
    lut = np.asarray(Image.blend(black, _RAMP, float(factor)), dtype=np.uint8).reshape(256).copy()
    lut.setflags(write=False)
    return lut


@lru_cache(maxsize=4096)
def contrast_lut(factor: float, mean: int) -> np.ndarray:
    """``lut[v]`` = Pillow's contrast blend of ``v`` with the constant gray ``mean`` (0..255)."""
    gray = Image.new("L", (256, 1), int(mean))
    lut = np.asarray(Image.blend(gray, _RAMP, float(factor)), dtype=np.uint8).reshape(256).copy()
    lut.setflags(write=False)
    return lut


@lru_cache(maxsize=1024)
def gamma_lut(gamma: float) -> np.ndarray:
    """``lut[v] = int((255 + 1 - 1e-3) * (v / 255) ** gamma)``: torchvision ``adjust_gamma``
    on a PIL image with gain 1 (``torchvision/transforms/_functional_pil.py``)."""
    lut = np.array([int((255 + 1 - 1e-3) * pow(v / 255.0, float(gamma))) for v in range(256)],
                   dtype=np.uint8)
    lut.setflags(write=False)
    return lut


@numba.njit(**NJIT)
def apply_lut(image, lut):
    """``lut[image]`` for a uint8 (H, W, C) image and a uint8 (256,) table; new array."""
    out = np.empty_like(image)
    src = image.reshape(-1)
    dst = out.reshape(-1)
    for i in range(src.size):
        dst[i] = lut[src[i]]
    return out


@numba.njit(**NJIT)
def _luma_sum(image):
    # Sum over pixels of Pillow's L value; for one channel the value itself.
    h, w, c = image.shape
    flat = image.reshape(-1)
    total = 0
    if c == 1:
        for i in range(flat.size):
            total += flat[i]
    else:
        for p in range(h * w):
            r = np.int64(flat[3 * p])
            g = np.int64(flat[3 * p + 1])
            b = np.int64(flat[3 * p + 2])
            total += (19595 * r + 38470 * g + 7471 * b + 0x8000) >> 16
    return total


def mean_luma(image: np.ndarray) -> int:
    """``int(mean(L) + 0.5)``, Pillow ``ImageEnhance.Contrast``'s gray level for ``image``."""
    h, w, _ = image.shape
    return int(_luma_sum(image) / (h * w) + 0.5)


def _sample_factor(param, ctx) -> dict:
    return {"factor": float(param)}


def _brightness_kernel(image, *, factor):
    return apply_lut(image, brightness_lut(factor))


def _contrast_kernel(image, *, factor):
    return apply_lut(image, contrast_lut(factor, mean_luma(image)))


def _sample_gamma(param, ctx) -> dict:
    return {"gamma": float(param)}


def _gamma_kernel(image, *, gamma):
    return apply_lut(image, gamma_lut(gamma))


def _sample_shift(param, ctx) -> dict:
    return {"shift": float(param)}


def _saturate_kernel(image, *, shift):
    return hsv_shift_kernel(image, 1, float(shift))


BRIGHTNESS = Kind("brightness", _sample_factor, _brightness_kernel, random=False)
CONTRAST = Kind("contrast", _sample_factor, _contrast_kernel, random=False)
GAMMA = Kind("gamma", _sample_gamma, _gamma_kernel, random=False)
SATURATE = Kind("saturate", _sample_shift, _saturate_kernel, random=False)
