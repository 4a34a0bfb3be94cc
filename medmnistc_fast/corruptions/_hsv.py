"""One Numba kernel for the HSV corruptions: shift one channel of scikit-image's HSV.

Used by MedMNIST-C's ``saturate`` (S) and the pathology suite's ``brightness`` (V), ``saturate``
(S) and ``hue`` (H). It repeats scikit-image's ``rgb2hsv`` / ``hsv2rgb`` float64 operations in
their order per pixel, so ``x / 255 -> rgb2hsv -> shift -> hsv2rgb -> clip(0, 1) * 255 ->
truncate`` comes out bit for bit (reference ``Saturate`` in ``medmnistc/corruptions/enhance.py``;
Zhang et al., MICCAI 2022, arXiv:2206.14973, for the H and V shifts).
"""
from __future__ import annotations

import numba
import numpy as np

from .._config import NJIT

__all__ = ["HSV_CHANNELS", "hsv_shift_pixel", "hsv_shift_kernel"]

#: Channel index of each accepted name in :func:`hsv_shift` (scikit-image's HSV channel order).
HSV_CHANNELS = {"h": 0, "hue": 0, "s": 1, "saturation": 1, "v": 2, "value": 2}

# x / 255.0 for every uint8 x: the same correctly rounded float64 values as the division, read
# from a table (a float64 division per channel was the kernel's costliest step).
_UNIT = np.arange(256, dtype=np.float64) / 255.0


@numba.njit(inline="always")
def hsv_shift_pixel(r, g, b, channel, amount):  # pragma: no cover - compiled
    """Shift one HSV channel of one pixel; scikit-image's float64 operations in their order.

    A compiled kernel: nothing is checked (see :func:`hsv_shift_kernel`).

    Parameters
    ----------
    r, g, b : float
        RGB in [0, 1] (``uint8 / 255.0``).
    channel : int
        0 = hue, 1 = saturation, 2 = value.
    amount : float, in [-1, 1]
        Added to the channel. S and V are clipped to [0, 1]; H wraps: minus 1 when above 1, plus 1
        when below 0 (the original benchmark's rule, "subtract 1 when above 1", extended to
        negative shifts).

    Returns
    -------
    (float, float, float)
        The new RGB, not yet clipped or quantised.
    """
    # rgb2hsv: V = max, S = ptp / V (0 where ptp = 0), H from the LAST of R, G, B equal to the
    # max (scikit-image assigns the red, green, blue cases in that order, later ones winning).
    v = max(r, g, b)
    delta = v - min(r, g, b)
    if delta == 0.0:
        h = 0.0
        s = 0.0
    else:
        s = delta / v
        if b == v:
            h = 4.0 + (r - g) / delta
        elif g == v:
            h = 2.0 + (b - r) / delta
        else:
            h = (g - b) / delta
        # scikit-image: (h / 6) % 1.0. Here h / 6 lies in [-1/6, 5/6], and for x in (-1, 0)
        # NumPy's float remainder is fmod(x, 1) + 1 = x + 1 (fmod is exact), so this is the same
        # float64 value without the costly fmod.
        h = h / 6.0
        if h < 0.0:
            h += 1.0
    if channel == 0:
        h = h + amount
        if h > 1.0:
            h -= 1.0
        elif h < 0.0:
            h += 1.0
    elif channel == 1:
        s = min(max(s + amount, 0.0), 1.0)
    else:
        v = min(max(v + amount, 0.0), 1.0)
    # hsv2rgb: sector hi = floor(6 H) mod 6, then the six (p, q, t, v) permutations.
    hi6 = np.floor(h * 6)
    f = h * 6 - hi6
    p = v * (1 - s)
    q = v * (1 - f * s)
    t = v * (1 - (1 - f) * s)
    hi = int(hi6)  # H in [0, 1], so floor(6 H) in 0..6 and mod 6 maps only 6 to 0
    if hi == 0 or hi == 6:
        return v, t, p
    if hi == 1:
        return q, v, p
    if hi == 2:
        return p, v, t
    if hi == 3:
        return p, q, v
    if hi == 4:
        return t, p, v
    return v, p, q


@numba.njit(inline="always")
def _unit_to_u8(x):  # pragma: no cover - compiled
    # clip(x, 0, 1) * 255, then a truncating cast (the suite's ``astype(np.uint8)``).
    return np.uint8(min(max(x, 0.0), 1.0) * 255)


@numba.njit(**NJIT)
def hsv_shift_kernel(image, channel, amount):  # pragma: no cover - compiled
    """Shift one HSV channel of every pixel of a uint8 ``(H, W, C)`` image (C = 1 or 3).

    ``x / 255.0`` -> scikit-image ``rgb2hsv`` -> shift (:func:`hsv_shift_pixel`) -> ``hsv2rgb``
    -> ``clip(0, 1) * 255`` -> truncation to uint8, bit for bit. A 1-channel image is replicated
    to RGB and the result converted back with Pillow's L formula
    ``(19595 R + 38470 G + 7471 B + 0x8000) >> 16``. Returns a new array.

    A compiled kernel: nothing is checked (a ``channel`` other than 0, 1, 2 or an ``amount``
    outside [-1, 1] gives meaningless pixels, another dtype a Numba typing error);
    :func:`medmnistc_fast.functional.hsv_shift` checks its arguments and is the function to
    call.
    """
    h, w, c = image.shape
    out = np.empty_like(image)
    src = image.reshape(-1)
    dst = out.reshape(-1)
    for p in range(h * w):
        if c == 1:
            r = _UNIT[src[p]]
            g = r
            b = r
        else:
            r = _UNIT[src[3 * p]]
            g = _UNIT[src[3 * p + 1]]
            b = _UNIT[src[3 * p + 2]]
        ro, go, bo = hsv_shift_pixel(r, g, b, channel, amount)
        if c == 1:
            lum = (np.uint32(19595) * np.uint32(_unit_to_u8(ro))
                   + np.uint32(38470) * np.uint32(_unit_to_u8(go))
                   + np.uint32(7471) * np.uint32(_unit_to_u8(bo)) + np.uint32(0x8000)) >> 16
            dst[p] = np.uint8(lum)
        else:
            dst[3 * p] = _unit_to_u8(ro)
            dst[3 * p + 1] = _unit_to_u8(go)
            dst[3 * p + 2] = _unit_to_u8(bo)
    return out
