"""The law of a gray pixel after L -> RGB -> per-channel noise -> L.

The reference's dataset generation turns a gray image into RGB (three equal channels), applies
the noise to each of the three channels independently and converts back with Pillow's luma
``L = (19595 R + 38470 G + 7471 B + 0x8000) >> 16`` (Pillow ``libImaging/Convert.c``, ITU-R 601
weights in 16-bit fixed point). If one channel's output law given input ``v`` is ``law[v]``
(256 values), the gray output is

    P(L = o | v) = sum over (a, b, d) of law[v, a] law[v, b] law[v, d]
                   [ (19595 a + 38470 b + 7471 d + 32768) >> 16 == o ].

This module computes that 256 x 256 table without the 256**3 sum: with ``x = 19595 a + 38470 b``
(65,536 values whose order does not depend on ``v``), ``L = o`` for a given ``d`` exactly when
``x`` lies in ``[65536 o - 7471 d - 32768, 65536 (o + 1) - 7471 d - 32768)``. So, per ``v``, the
probabilities of the pairs ``(a, b)`` are accumulated in the fixed order of ``x`` and each
``P(L = o | v, d)`` is a difference of two cumulative sums at precomputed positions; the ``d``
draw is then summed out with a matrix product. Float64 throughout: each entry is exact up to
rounding (absolute error below 1e-12), far finer than the 2**-24 resolution of the alias
tables that sample it.
"""
from __future__ import annotations

from functools import lru_cache

import numba
import numpy as np

from .._config import NJIT

__all__ = ["gray_law", "LUMA_WEIGHTS"]

#: Pillow's RGB -> L weights of R, G, B in 16-bit fixed point (sum 65536; Pillow
#: ``libImaging/Convert.c``, ITU-R 601-2 luma; rounding constant :data:`_HALF` = 0x8000).
LUMA_WEIGHTS = (19595, 38470, 7471)
_HALF = 0x8000


@lru_cache(maxsize=1)
def _plan():
    """The 65,536 pairs ``(a, b)`` in increasing order of ``x = 19595 a + 38470 b`` (two uint8
    arrays), and for every (o, d) the number of pairs with ``x < 65536 o - 7471 d - 32768``
    (int64 (257, 256), o = 0..256, d = 0..255)."""
    wr, wg, wb = LUMA_WEIGHTS
    levels = np.arange(256, dtype=np.int64)
    x = (wr * levels[:, None] + wg * levels[None, :]).ravel()
    order = np.argsort(x, kind="stable")
    xs = x[order]
    bounds = 65536 * np.arange(257, dtype=np.int64)[:, None] - wb * levels[None, :] - _HALF
    counts = np.searchsorted(xs, bounds, side="left")
    return ((order // 256).astype(np.uint8), (order % 256).astype(np.uint8),
            np.ascontiguousarray(counts, dtype=np.int64))


@numba.njit(**NJIT)
def _gray_rows(law, first, second, counts):  # pragma: no cover - compiled
    out = np.zeros((256, 256))
    cum = np.zeros(65537)
    for v in range(256):
        row = law[v]
        acc = 0.0
        for k in range(65536):
            acc += row[first[k]] * row[second[k]]
            cum[k + 1] = acc
        for o in range(256):
            total = 0.0
            for d in range(256):
                if row[d] != 0.0:
                    total += (cum[counts[o + 1, d]] - cum[counts[o, d]]) * row[d]
            out[v, o] = total
    return out


def gray_law(law: np.ndarray) -> np.ndarray:
    """Law of the gray output given the law of one channel's output.

    Parameters
    ----------
    law : ndarray, shape (256, 256), float64
        ``law[v, o] = P(channel out = o | in = v)``; rows sum to 1.

    Returns
    -------
    ndarray, shape (256, 256), float64
        ``P(L = o | gray in = v)`` for the three independent channel draws combined by Pillow's
        luma; rows sum to 1 (renormalised against rounding). About 30 ms (Numba).

    Raises
    ------
    ValueError
        ``law`` not of shape (256, 256).
    """
    law = np.ascontiguousarray(law, dtype=np.float64)
    if law.shape != (256, 256):
        raise ValueError(f"law must have shape (256, 256); got {law.shape}")
    out = _gray_rows(law, *_plan())
    np.clip(out, 0.0, None, out=out)
    out /= out.sum(axis=1, keepdims=True)
    return out
