"""One kernel for the HSV corruptions: shift one channel of scikit-image's HSV.

Used by MedMNIST-C's ``saturate`` (S) and the pathology suite's ``brightness`` (V), ``saturate``
(S) and ``hue`` (H). The C++ kernel (``csrc/hsv.cpp``) repeats scikit-image's ``rgb2hsv`` /
``hsv2rgb`` float64 operations per pixel, so ``x / 255 -> rgb2hsv -> shift -> hsv2rgb ->
clip(0, 1) * 255 -> truncate`` comes out bit for bit (reference ``Saturate`` in
``medmnistc/corruptions/enhance.py``; Zhang et al., MICCAI 2022, arXiv:2206.14973, for the H and
V shifts).
"""
from __future__ import annotations

import numpy as np

from .. import _native

__all__ = ["HSV_CHANNELS", "hsv_shift_kernel"]

#: Channel index of each accepted name in :func:`hsv_shift` (scikit-image's HSV channel order).
HSV_CHANNELS = {"h": 0, "hue": 0, "s": 1, "saturation": 1, "v": 2, "value": 2}


def hsv_shift_kernel(image: np.ndarray, channel: int, amount: float, out=None) -> np.ndarray:
    """Shift one HSV channel of every pixel of a uint8 ``(H, W, C)`` image (C = 1 or 3).

    Per pixel: ``x / 255.0`` -> scikit-image ``rgb2hsv`` (V = max, S = (max - min) / V or 0, H
    from the last of R, G, B equal to the max, ``(h / 6) % 1``) -> the shift -> ``hsv2rgb``
    (sector ``floor(6 H) mod 6``) -> ``clip(0, 1) * 255`` -> truncation to uint8, bit for bit. S
    and V are clipped to [0, 1] after the shift; H wraps once (minus 1 above 1, plus 1 below 0:
    the original benchmark's "subtract 1 when above 1", extended to negative shifts). A
    1-channel image is replicated to RGB and the result converted back with Pillow's L formula
    ``(19595 R + 38470 G + 7471 B + 0x8000) >> 16``. Runs in C++ without the GIL, branch-free on
    8 float64 lanes with AVX-512 (4 with AVX2, 2 otherwise; every build gives the same bytes).

    A kernel: only the shape and ``channel`` are checked (ValueError); an ``amount`` outside
    [-1, 1] gives meaningless pixels. :func:`medmnistc_fast.functional.hsv_shift` checks its
    arguments and is the function to call.

    Parameters
    ----------
    image : ndarray, shape (H, W, C), uint8
        C = 1 or 3.
    channel : int
        0 = hue, 1 = saturation, 2 = value.
    amount : float in [-1, 1]
        Added to the channel (unitless, on the channel's [0, 1] scale).
    out : ndarray, optional
        Where to write: writeable, C-contiguous uint8 of the image's shape, sharing no memory
        with it (``Kind.into``).

    Returns
    -------
    ndarray, shape (H, W, C), uint8
        ``out``, or a new array.
    """
    return _native.hsv_shift(image, int(channel), float(amount), out=out)
