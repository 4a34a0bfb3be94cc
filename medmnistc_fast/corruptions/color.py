"""Colour corruptions: brightness, contrast, gamma correction and saturation.

brightness and contrast are Pillow's ``ImageEnhance`` (a blend with a black image, or with a
constant gray image of the picture's rounded mean luma), gamma is torchvision's PIL
``adjust_gamma`` (gain 1), saturation is scikit-image ``rgb2hsv`` / ``hsv2rgb`` with the S
channel shifted and clipped. All four act on each pixel alone, so they run as 256-entry lookup
tables (Pillow's blend and torchvision's gamma arithmetic repeated bit for bit, applied by the
C++ kernel of ``csrc/lut.cpp``) or as the per-pixel C++ HSV kernel of :mod:`._hsv`
(``csrc/hsv.cpp``) that repeats scikit-image's float64 operations in order.

References: reference classes ``Brightness``, ``Contrast``, ``GammaCorrection``, ``Saturate``
in ``medmnistc/corruptions/enhance.py`` (medmnistc 0.1.0).
"""
from __future__ import annotations

from functools import lru_cache

import numpy as np

from .. import _native
from ._hsv import hsv_shift_kernel
from ._spec import Kind

__all__ = ["BRIGHTNESS", "CONTRAST", "GAMMA", "SATURATE", "brightness_lut", "contrast_lut",
           "gamma_lut"]


def _blend_lut(base: int, factor: float) -> np.ndarray:
    """``lut[v]`` = Pillow ``Image.blend(constant base, v, factor)`` for one byte, read-only
    uint8 (256,).

    Pillow's 8-bit blend (``libImaging/Blend.c``) computes ``base + alpha * (v - base)`` in
    C ``float`` (alpha is a float32) and casts to uint8 by truncation; for ``alpha`` outside
    [0, 1] it first clips to [0, 255]. ``csrc/lut.cpp`` (``blend_table``) repeats those float32
    operations (checked against Pillow in tests/test_color_digital.py).
    """
    lut = _native.blend_lut(int(base), float(factor))
    lut.setflags(write=False)
    return lut


@lru_cache(maxsize=1024)
def brightness_lut(factor: float) -> np.ndarray:
    """``lut[v]`` = Pillow ``ImageEnhance.Brightness(...).enhance(factor)`` of value ``v``:
    Pillow's ``Image.blend`` of a black image with the image, per byte (:func:`_blend_lut`).
    Read-only uint8 (256,)."""
    return _blend_lut(0, float(factor))


@lru_cache(maxsize=4096)
def contrast_lut(factor: float, mean: int) -> np.ndarray:
    """``lut[v]`` = Pillow's contrast blend of ``v`` with the constant gray ``mean`` (0..255)
    (:func:`_blend_lut`). Read-only uint8 (256,)."""
    return _blend_lut(int(mean), float(factor))


@lru_cache(maxsize=1024)
def gamma_lut(gamma: float) -> np.ndarray:
    """``lut[v] = int((255 + 1 - 1e-3) * (v / 255) ** gamma)``: torchvision ``adjust_gamma``
    on a PIL image with gain 1 (``torchvision/transforms/_functional_pil.py``), which evaluates
    it with Python's float ``**``, i.e. C ``pow``; ``csrc/lut.cpp`` (``gamma_table``) calls the
    same ``pow``. Read-only uint8 (256,).
    """
    lut = _native.gamma_lut(float(gamma))
    lut.setflags(write=False)
    return lut


def _sample_factor(param, ctx) -> dict:
    return {"factor": float(param)}


def _brightness_kernel(image, *, factor, out=None):
    # One C++ call: the table of brightness_lut applied to every byte.
    return _native.brightness(image, float(factor), out=out)


def _contrast_kernel(image, *, factor, out=None):
    # One C++ call: contrast_lut(factor, int(mean luma + 0.5)) applied to every byte.
    return _native.contrast(image, float(factor), out=out)


def _sample_gamma(param, ctx) -> dict:
    return {"gamma": float(param)}


def _gamma_kernel(image, *, gamma, out=None):
    # One C++ call: the table of gamma_lut applied to every byte.
    return _native.gamma(image, float(gamma), out=out)


def _sample_shift(param, ctx) -> dict:
    return {"shift": float(param)}


def _saturate_kernel(image, *, shift, out=None):
    return hsv_shift_kernel(image, 1, float(shift), out=out)


#: The colour corruptions (reference ``Brightness``, ``Contrast``, ``GammaCorrection``,
#: ``Saturate`` in ``corruptions/enhance.py``; ``*_up`` / ``*_down`` share a kind): the table's
#: Pillow enhance factor, gamma exponent or saturation shift, unscaled.
BRIGHTNESS = Kind("brightness", _sample_factor, _brightness_kernel, random=False, into=True)
CONTRAST = Kind("contrast", _sample_factor, _contrast_kernel, random=False, into=True)
GAMMA = Kind("gamma", _sample_gamma, _gamma_kernel, random=False, into=True)
SATURATE = Kind("saturate", _sample_shift, _saturate_kernel, random=False, into=True)
