"""Noise corruptions: gaussian, speckle, impulse (salt and pepper) and shot (Poisson) noise.

Exact-in-distribution sampling
------------------------------
In the reference every noise is applied independently to each array element ``x = v / 255``
(``v`` the uint8 value) and the result is clipped to [0, 1], scaled by 255 and *truncated*
to uint8. So the output of one element is a discrete random variable on 0..255 whose law
depends only on ``v`` and the severity parameter. We compute that 256 x 256 table of
probabilities exactly (normal CDF, Poisson CDF, Bernoulli) and sample it with Walker's alias
method from a counter-based SplitMix64 stream: one 64-bit draw per element, no float noise
field, and the same law as the reference's pipeline:

- gaussian_noise(sigma): ``clip(x + N(0, sigma))`` (reference ``GaussianNoise``)
- speckle_noise(sigma): ``clip(x + x * N(0, sigma))`` (reference ``SpeckleNoise``)
- impulse_noise(amount): each element becomes 0 or 1 with probability amount / 2 each
  (scikit-image ``random_noise(mode='s&p', amount=a)``, independent Bernoulli draws)
- shot_noise(m): ``clip(Poisson(x * m) / m)`` (reference ``ShotNoise``)

Gray (1-channel) images follow the reference's dataset generation, L -> RGB -> noise -> L:
three independent draws per pixel combined by Pillow's integer luma formula, so the gray
output of key ``k`` equals ``to_gray`` of the RGB output of the replicated image with key ``k``.

References
----------
A. J. Walker, "An efficient method for generating discrete random variables with general
distributions", ACM TOMS 3(3), 1977; M. D. Vose, "A linear algorithm for generating random
numbers with a given distribution", IEEE TSE 17(9), 1991 (alias tables).
"""
from __future__ import annotations

from functools import lru_cache

import numba
import numpy as np

from .._config import NJIT
from ..rng import GAMMA
from ._spec import Kind

__all__ = ["GAUSSIAN_NOISE", "SPECKLE_NOISE", "IMPULSE_NOISE", "SHOT_NOISE", "output_law",
           "apply_law"]

_LEVELS = np.arange(256)
_UPPER = (_LEVELS[:255] + 1) / 255.0  # out <= o  <=>  noisy value < (o + 1) / 255, o < 255


def _law_from_cdf(cdf_lt: np.ndarray) -> np.ndarray:
    """Rows of P(out = o) from rows of P(noisy < (o + 1) / 255), o = 0..254."""
    cdf = np.concatenate([cdf_lt, np.ones((cdf_lt.shape[0], 1))], axis=1)
    cdf = np.maximum.accumulate(np.clip(cdf, 0.0, 1.0), axis=1)
    return np.diff(cdf, axis=1, prepend=0.0)


def _gaussian_law(sigma: float) -> np.ndarray:
    from scipy.special import ndtr

    x = _LEVELS[:, None] / 255.0
    return _law_from_cdf(ndtr((_UPPER[None, :] - x) / sigma))


def _speckle_law(sigma: float) -> np.ndarray:
    from scipy.special import ndtr

    x = np.maximum(_LEVELS[:, None] / 255.0, 1e-300)  # row 0 is fixed below
    law = _law_from_cdf(ndtr((_UPPER[None, :] / x - 1.0) / sigma))
    law[0] = 0.0
    law[0, 0] = 1.0  # x = 0: x + x * n = 0 exactly
    return law


def _impulse_law(amount: float) -> np.ndarray:
    law = np.eye(256) * (1.0 - amount)
    law[:, 0] += amount / 2.0
    law[:, 255] += amount / 2.0
    return law


def _shot_law(photons: float) -> np.ndarray:
    from scipy.special import pdtr

    k_max = int(np.floor(photons)) + 1  # k > photons clips to 1.0 -> 255
    k = np.arange(k_max + 1)
    # The reference's arithmetic on the Poisson count, element by element (float64):
    out_of_k = (np.clip(k / photons, 0.0, 1.0) * 255).astype(np.uint8)
    lam = _LEVELS[:, None] / 255.0 * photons
    cdf_k = pdtr(k[None, :], lam)  # P(K <= k)
    pmf_k = np.diff(cdf_k, axis=1, prepend=0.0)
    pmf_k[:, -1] += 1.0 - cdf_k[:, -1]  # P(K > k_max) also lands on 255
    law = np.zeros((256, 256))
    for j, o in enumerate(out_of_k):
        law[:, o] += pmf_k[:, j]
    return law


_LAWS = {"gaussian": _gaussian_law, "speckle": _speckle_law, "impulse": _impulse_law,
         "shot": _shot_law}


@lru_cache(maxsize=256)
def output_law(noise: str, param: float) -> np.ndarray:
    """The exact law of one output element given its input value.

    Parameters
    ----------
    noise : {"gaussian", "speckle", "impulse", "shot"}
    param : float
        sigma (gaussian, speckle; on the [0, 1] scale), amount (impulse, 0..1) or photons per
        unit intensity (shot, > 0).

    Returns
    -------
    ndarray, shape (256, 256), float64, read-only
        ``law[v, o] = P(out = o | in = v)``; rows sum to 1.
    """
    law = _LAWS[noise](float(param))
    law /= law.sum(axis=1, keepdims=True)
    law.setflags(write=False)
    return law


@numba.njit(**NJIT)
def _build_alias(law):
    """Vose's alias tables for each row of ``law`` (256 rows of 256 probabilities)."""
    n = law.shape[1]
    prob = np.ones(law.shape, np.float64)
    alias = np.zeros(law.shape, np.uint8)
    small = np.empty(n, np.int64)
    large = np.empty(n, np.int64)
    for r in range(law.shape[0]):
        scaled = law[r] * n
        ns = 0
        nl = 0
        for i in range(n):
            if scaled[i] < 1.0:
                small[ns] = i
                ns += 1
            else:
                large[nl] = i
                nl += 1
        while ns > 0 and nl > 0:
            ns -= 1
            s = small[ns]
            g = large[nl - 1]
            prob[r, s] = scaled[s]
            alias[r, s] = g
            scaled[g] = (scaled[g] + scaled[s]) - 1.0
            if scaled[g] < 1.0:
                nl -= 1
                small[ns] = g
                ns += 1
        # Leftovers have probability 1 up to rounding: prob stays 1.
    return prob, alias


@lru_cache(maxsize=256)
def alias_tables(noise: str, param: float):
    """Cached alias tables for :func:`output_law`.

    Returns ``(thresh, alias)``: uint32 (256, 256) acceptance thresholds on a 24-bit uniform
    integer (``floor(prob * 2**24)``, so every probability is represented to within 2**-32)
    and uint8 (256, 256) alias values.
    """
    prob, alias = _build_alias(np.ascontiguousarray(output_law(noise, param)))
    thresh = np.minimum(np.floor(prob * 2.0**24), 2.0**24).astype(np.uint32)
    return thresh, alias


@numba.njit(inline="always")
def _splitmix(key, j):
    z = key + (j + np.uint64(1)) * np.uint64(GAMMA)
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


@numba.njit(inline="always")
def _draw(thresh, alias, v, r32):
    # r32 holds 32 random bits: the top 8 pick a column, the low 24 are the uniform compared
    # with that column's threshold.
    col = r32 >> np.uint32(24)
    keep = np.uint32((r32 & np.uint32(0xFFFFFF)) < thresh[v, col])
    alt = np.uint32(alias[v, col])
    # Branch-free select (the accept/alias branch is unpredictable by design).
    return np.uint8(alt ^ ((col ^ alt) & (np.uint32(0) - keep)))


@numba.njit(inline="always")
def _element(thresh, alias, v, key, j):
    # Element j uses the high (j even) or low (j odd) half of splitmix64 number j // 2.
    r = _splitmix(key, j >> np.uint64(1))
    half = np.uint32((r >> ((np.uint64(1) - (j & np.uint64(1))) * np.uint64(32)))
                     & np.uint64(0xFFFFFFFF))
    return _draw(thresh, alias, v, half)


@numba.njit(**NJIT)
def _apply_alias(image, thresh, alias, key):
    h, w, c = image.shape
    out = np.empty_like(image)
    flat = image.reshape(-1)
    oflat = out.reshape(-1)
    k = np.uint64(key)
    if c == 1:
        lo32 = np.uint64(0xFFFFFFFF)
        for p in range(flat.size):
            v = flat[p]
            # Elements 3p, 3p+1, 3p+2 live in splitmix numbers 3p // 2 and 3p // 2 + 1: two
            # generator calls per pixel instead of three (same stream as _element).
            j = np.uint64(3 * p)
            r0 = _splitmix(k, j >> np.uint64(1))
            r1 = _splitmix(k, (j >> np.uint64(1)) + np.uint64(1))
            if p % 2 == 0:  # 3p even: high(r0), low(r0), high(r1)
                u0, u1, u2 = r0 >> np.uint64(32), r0 & lo32, r1 >> np.uint64(32)
            else:  # 3p odd: low(r0), high(r1), low(r1)
                u0, u1, u2 = r0 & lo32, r1 >> np.uint64(32), r1 & lo32
            a = np.uint32(_draw(thresh, alias, v, np.uint32(u0)))
            b = np.uint32(_draw(thresh, alias, v, np.uint32(u1)))
            d = np.uint32(_draw(thresh, alias, v, np.uint32(u2)))
            oflat[p] = np.uint8((np.uint32(19595) * a + np.uint32(38470) * b
                                 + np.uint32(7471) * d + np.uint32(0x8000)) >> np.uint32(16))
    else:
        n = flat.size
        for i in range(n // 2):
            r = _splitmix(k, np.uint64(i))
            oflat[2 * i] = _draw(thresh, alias, flat[2 * i], np.uint32(r >> np.uint64(32)))
            oflat[2 * i + 1] = _draw(thresh, alias, flat[2 * i + 1],
                                     np.uint32(r & np.uint64(0xFFFFFFFF)))
        if n % 2:
            oflat[n - 1] = _element(thresh, alias, flat[n - 1], k, np.uint64(n - 1))
    return out


def apply_law(image: np.ndarray, noise: str, param: float, key: int) -> np.ndarray:
    """Kernel shared by the four noises: sample each element from :func:`output_law`.

    Parameters
    ----------
    image : ndarray, shape (H, W, C), uint8, C-contiguous, C in {1, 3}
    noise : {"gaussian", "speckle", "impulse", "shot"}
    param : float
        See :func:`output_law`.
    key : int in [0, 2**64)
        Counter-stream key. Element ``j`` (``j = 3 p + c`` for pixel ``p`` and channel ``c``;
        for a gray pixel its three RGB draws) uses 32 bits of
        ``splitmix64(key + (j // 2 + 1) * 0x9E3779B97F4A7C15)``: the high half when ``j`` is
        even, the low half when odd.

    Returns
    -------
    ndarray, shape (H, W, C), uint8
    """
    thresh, alias = alias_tables(noise, float(param))
    return _apply_alias(image, thresh, alias, np.uint64(key))


def _sample_key(param, ctx) -> dict:
    return {"param": float(param), "key": int(ctx.key)}


def _kind(noise: str) -> Kind:
    def kernel(image, *, param, key):
        return apply_law(image, noise, param, key)

    kernel.__name__ = f"{noise}_noise_kernel"
    kernel.__doc__ = f"{noise} noise kernel: :func:`apply_law` with ``noise={noise!r}``."
    return Kind(f"{noise}_noise", _sample_key, kernel, random=True)


GAUSSIAN_NOISE = _kind("gaussian")
SPECKLE_NOISE = _kind("speckle")
IMPULSE_NOISE = _kind("impulse")
SHOT_NOISE = _kind("shot")
