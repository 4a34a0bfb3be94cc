"""Blur corruptions: defocus, motion, zoom and Gaussian blur (C++ kernels in ``csrc/blur.cpp``).

Spatial parameters are given at 224 px in the tables and scale with
:attr:`~medmnistc_fast.corruptions._spec.Context.scale` (``min(H, W) / 224``), so at 224 px they
are the reference's values unchanged.

References: reference classes ``DefocusBlur`` (and ``disk``), ``MotionBlur``, ``ZoomBlur``
(and ``clipped_zoom``), ``GaussianBlur`` in ``medmnistc/corruptions/filter.py`` (medmnistc
0.1.0); ImageMagick 6 ``MotionBlurImage`` for the motion kernel's weights and offsets;
torchvision ``gaussian_blur`` for the Gaussian kernel.
"""
from __future__ import annotations

import math
from functools import lru_cache

import numba
import numpy as np

from .. import _native
from .._config import NJIT
from .._validation import check_int, check_positive
from ..rng import generator
from ._spec import Kind

__all__ = ["DEFOCUS_BLUR", "MOTION_BLUR", "ZOOM_BLUR", "GAUSSIAN_BLUR", "defocus_kernel",
           "scaled_defocus_kernel", "motion_taps", "gaussian_kernel1d",
           "scaled_gaussian_kernel1d", "motion_taps_scaled"]

#: Half width (pixels at 224 px) of the reference's defocus kernel grid when radius <= 8.
_DEFOCUS_HALF = 8


def _gauss1d(sigma: float, ksize: int) -> np.ndarray:
    """OpenCV ``getGaussianKernel(ksize, sigma)`` for odd ``ksize`` and ``sigma > 0``, float64.

    The arithmetic of OpenCV 4.x/5.x ``getGaussianKernelBitExact``: with odd ``x = 1 - ksize,
    3 - ksize, ..., -2`` (twice the tap offset), side taps ``t = exp(x * x * (-0.125 / sigma**2))``,
    ``s = 2 * sum(t) + 1``; taps ``t / s`` (mirrored) and ``1 / s`` at the centre, all in double.
    Cast to float32 this equals ``cv2.getGaussianKernel(ksize, sigma, cv2.CV_32F)`` (checked on
    600 sigmas in [0.01, 3] with OpenCV 5.0.0).
    """
    scale = -0.125 / (sigma * sigma)
    side = [math.exp(float(x * x) * scale) for x in range(1 - ksize, 0, 2)]
    total = 0.0
    for t in side:
        total += t
    inv = 1.0 / (total * 2.0 + 1.0)
    half = [t * inv for t in side]
    return np.array(half + [inv] + half[::-1])


@numba.njit(**NJIT)
def _fma32(a, b, c):  # pragma: no cover - compiled
    """``a * b + c`` rounded once to float32 (a fused multiply-add), for float32 scalars.

    ``a * b`` is exact in double (24 + 24 significant bits); the double sum ``s`` is then rounded
    to float32, which is the single rounding of the exact sum unless ``s`` fell exactly on a
    float32 halfway point; that case is settled by the sign of the sum's rounding error
    (Knuth's TwoSum).
    """
    p = np.float64(a) * np.float64(b)
    c64 = np.float64(c)
    s = p + c64
    bv = s - p
    err = (p - (s - bv)) + (c64 - bv)
    r = np.float32(s)
    r64 = np.float64(r)
    if r64 != s and err != 0.0:
        toward = np.float32(np.nextafter(r, np.float32(np.inf) if s > r64
                                         else np.float32(-np.inf)))
        if (r64 + np.float64(toward)) * 0.5 == s:
            r = max(r, toward) if err > 0.0 else min(r, toward)
    return r


@numba.njit(**NJIT)
def _reflect101(i, n):  # pragma: no cover - compiled
    """Index ``i`` of a length-``n`` axis with OpenCV's BORDER_REFLECT_101 (|i| < n)."""
    if i < 0:
        return -i
    if i >= n:
        return 2 * (n - 1) - i
    return i


@numba.njit(**NJIT)
def _gauss_blur32(grid, k, ksize):  # pragma: no cover - compiled
    """The loops of :func:`_opencv_gauss_blur` (``grid`` float32 2-D, ``k`` float32 taps)."""
    h, w = grid.shape
    half = ksize // 2
    k0, k1 = k[half], k[half + 1]
    k2 = k[half + 2] if ksize == 5 else np.float32(0.0)
    rows = np.empty((h, w), np.float32)
    for i in range(h):
        for j in range(w):
            x0 = grid[i, j]
            p1 = np.float32(grid[i, _reflect101(j - 1, w)] + grid[i, _reflect101(j + 1, w)])
            c0 = np.float32(x0 * k0)
            c1 = np.float32(p1 * k1)
            last = j == w - 1
            if ksize == 3:
                rows[i, j] = _fma32(p1, k1, c0) if last else _fma32(x0, k0, c1)
            else:
                p2 = np.float32(grid[i, _reflect101(j - 2, w)] + grid[i, _reflect101(j + 2, w)])
                if last:
                    rows[i, j] = np.float32(np.float32(c0 + c1) + np.float32(p2 * k2))
                else:
                    rows[i, j] = _fma32(p2, k2, _fma32(x0, k0, c1))
    out = np.empty((h, w), np.float32)
    split = 8 * (w // 8)
    for i in range(h):
        for j in range(w):
            x0 = rows[i, j]
            p1 = np.float32(rows[_reflect101(i - 1, h), j] + rows[_reflect101(i + 1, h), j])
            v = _fma32(p1, k1, np.float32(x0 * k0))
            if ksize == 5:
                p2 = np.float32(rows[_reflect101(i - 2, h), j] + rows[_reflect101(i + 2, h), j])
                if j < split:
                    v = _fma32(p2, k2, v)
                else:
                    v = np.float32(np.float32(np.float32(x0 * k0) + np.float32(p1 * k1))
                                   + np.float32(p2 * k2))
            out[i, j] = v
    return out


def _opencv_gauss_blur(grid: np.ndarray, sigma: float, ksize: int) -> np.ndarray:
    """``cv2.GaussianBlur(grid, (ksize, ksize), sigma)`` of a small odd-sized float32 array.

    OpenCV runs it as ``sepFilter2D`` with the float32 taps of :func:`_gauss1d` and
    BORDER_REFLECT_101, rows first. Its symmetric small-kernel filters add mirrored pairs first
    (``p1 = x[-1] + x[1]``, ``p2 = x[-2] + x[2]``, float32) and use fused multiply-adds
    (:func:`_fma32`); the order below was identified tap by tap against OpenCV 5.0.0 (the
    reference's cv2, x86-64 AVX2 build):

    - rows, 3 taps: ``fma(x0, k0, p1 * k1)``; the last column ``fma(p1, k1, x0 * k0)``;
    - rows, 5 taps: ``fma(p2, k2, fma(x0, k0, p1 * k1))``; the last column
      ``(x0 * k0 + p1 * k1) + p2 * k2`` (no fusing);
    - columns, 3 taps: ``fma(p1, k1, x0 * k0)``;
    - columns, 5 taps: ``fma(p2, k2, fma(p1, k1, x0 * k0))`` on the first ``8 * (width // 8)``
      columns, the unfused sum on the rest.

    Bit for bit equal to ``cv2.GaussianBlur`` (opencv-python 5.0.0) on the reference's
    ``disk()`` grids for 713 (radius, sigma) pairs, and, in this Numba form, for 1,500 random
    pairs (radius 0.3-14, sigma 0.01-3, both kernel sizes).
    """
    k = _gauss1d(sigma, ksize).astype(np.float32)
    return _gauss_blur32(np.ascontiguousarray(grid, dtype=np.float32), k, ksize)


@lru_cache(maxsize=256)
def _defocus_parts(radius: float, alias_sigma: float):
    """(kernel float32, binary disk uint8, 1-D anti-alias Gaussian float64) of ``disk()``."""
    small = radius <= _DEFOCUS_HALF
    half = _DEFOCUS_HALF if small else math.ceil(radius)
    ksize = 3 if small else 5
    sq = np.arange(-half, half + 1) ** 2
    mask = (sq[:, None] + sq[None, :] <= float(radius) ** 2).astype(np.uint8)
    # disk / sum(disk) in float32: 1 / count rounded once (count is exact in float32).
    disk = mask * np.float32(1.0 / np.count_nonzero(mask))
    # The float32 taps the kernel is made with: S = outer(g, g) (*) mask then matches K up to
    # the rounding of each float32 operation.
    g = _gauss1d(alias_sigma, ksize).astype(np.float32)
    k = _gauss_blur32(disk, g, ksize)
    parts = (k, mask, g.astype(np.float64))
    for a in parts:
        a.setflags(write=False)
    return parts


@lru_cache(maxsize=256)
def _defocus_native_args(radius: float, alias_sigma: float):
    """:func:`_defocus_parts` with the kernel as float64, the dtype ``_native.filter2d`` takes
    (the same values: float32 converts exactly), so that no call converts it again."""
    kernel, mask, gauss = _defocus_parts(radius, alias_sigma)
    k64 = kernel.astype(np.float64)
    k64.setflags(write=False)
    return k64, mask, gauss


def defocus_kernel(radius: float, alias_sigma: float) -> np.ndarray:
    """The reference's defocus kernel ``disk(radius, alias_blur)``.

    An aliased disk ``x**2 + y**2 <= radius**2`` on the integer grid -8..8 (radius <= 8) or
    ``-radius..radius`` (larger radii; ``ceil`` for non-integers), divided by its sum (float32),
    then blurred by a 3 x 3 (radius <= 8) or 5 x 5 Gaussian of standard deviation
    ``alias_sigma`` pixels with OpenCV's reflect-101 border, and NOT renormalised (it sums to
    about 1.013 at radius 8).

    Returns
    -------
    ndarray, shape (2 * half + 1, 2 * half + 1), float32, read-only
    """
    return _defocus_parts(radius, alias_sigma)[0]


@numba.njit(**NJIT)
def _pairwise_sum(a):  # pragma: no cover - compiled
    """``a.sum()`` of a 1-D C-contiguous float64 array in NumPy's order, bit for bit: its
    pairwise summation (``pairwise_sum`` in ``numpy/_core/src/umath/loops_utils.h.src``: below
    8 terms a plain loop, up to 128 eight interleaved partial sums, above that the sum of two
    halves, the first rounded down to a multiple of 8), added to 0.0; tests/test_scaling.py
    holds it to ``ndarray.sum`` on 0-5,000 terms. The halving runs on an explicit stack:
    Numba's cache could not load the recursive form (a segmentation fault in the next
    process)."""
    los = np.empty(64, np.int64)  # a range halves at most 58 times below 2**63
    ns = np.empty(64, np.int64)
    stage = np.zeros(64, np.int64)  # 1: first half pending, 2: second half pending
    left = np.empty(64)
    r = np.empty(8)
    sp = 0
    los[0], ns[0] = 0, a.shape[0]
    while True:
        lo, n = los[sp], ns[sp]
        if n > 128:
            half = n // 2 - (n // 2) % 8
            stage[sp] = 1
            los[sp + 1], ns[sp + 1] = lo, half
            sp += 1
            continue
        if n < 8:
            v = 0.0
            for i in range(n):
                v += a[lo + i]
        else:
            for j in range(8):
                r[j] = a[lo + j]
            i = 8
            while i < n - n % 8:
                for j in range(8):
                    r[j] += a[lo + i + j]
                i += 8
            v = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]))
            while i < n:
                v += a[lo + i]
                i += 1
        while True:  # hand v up to the frames waiting for it
            sp -= 1
            if sp < 0:
                return 0.0 + v
            if stage[sp] == 1:
                left[sp] = v
                stage[sp] = 2
                half = ns[sp] // 2 - (ns[sp] // 2) % 8
                los[sp + 1], ns[sp + 1] = los[sp] + half, ns[sp] - half
                sp += 1
                break
            v = left[sp] + v


@numba.njit(**NJIT)
def _product_2d(a, b):  # pragma: no cover - compiled
    """``a @ b`` for 2-D float64 arrays, each entry summed over t in order (no FMA)."""
    out = np.zeros((a.shape[0], b.shape[1]))
    for i in range(a.shape[0]):
        for t in range(a.shape[1]):
            for j in range(b.shape[1]):
                out[i, j] += a[i, t] * b[t, j]
    return out


def _product(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``a @ b`` (float64, 2-D @ 1-D or 2-D) summed term by term in a fixed order.

    NumPy hands ``@`` to BLAS, whose kernels (and so the rounding of the sums) depend on the
    CPU; the scaled kernels here decide truncations in the filtered images, so they must come
    out the same to the last bit on every machine of a cluster.
    """
    a = np.ascontiguousarray(a, dtype=np.float64)
    b2 = np.ascontiguousarray(b, dtype=np.float64)
    out = _product_2d(a, b2 if b2.ndim == 2 else b2[:, None])
    return out if b2.ndim == 2 else out[:, 0]


@numba.njit(**NJIT)
def _scaling_operator(profile, scale):  # pragma: no cover - compiled
    """(n_dst, n_src) matrix taking a symmetric 224 px kernel profile (float64, C-contiguous,
    odd length) to the scaled grid.

    First area resampling: the kernel as a piecewise-constant function on unit cells (centred
    on ``-h..h``), integrated over destination cells of width ``1 / scale`` centred on the
    destination grid (their overlap lengths). Where that leaves the profile's variance (second
    moment about the centre tap over the sum, pixels^2) below ``scale**2`` times the
    original's (kernels narrower than a pixel of the new grid collapse onto the centre tap),
    the result is convolved with the 3-tap kernel ``(a, 1 - 2a, a)``, ``2a`` being the
    shortfall in pixels^2, so that the blur keeps its second moment (its effect on low spatial
    frequencies) instead of vanishing. Columns sum to 1: the kernel's sum is kept.
    """
    n_src = profile.shape[0]
    h = (n_src - 1) // 2
    h_dst = max(0, math.ceil((h + 0.5) * scale - 0.5))
    n_dst = 2 * h_dst + 1
    m = np.empty((n_dst, n_src))
    for i in range(n_dst):
        d = float(i - h_dst)
        d_lo, d_hi = (d - 0.5) / scale, (d + 0.5) / scale
        for j in range(n_src):
            x = float(j - h)
            m[i, j] = max(min(d_hi, x + 0.5) - max(d_lo, x - 0.5), 0.0)
    moved = np.ascontiguousarray(_product_2d(m, profile.reshape((n_src, 1)))[:, 0])
    variances = np.empty(2)
    for v, w in enumerate((profile, moved)):
        c = (w.shape[0] - 1) // 2
        moment = np.empty(w.shape[0])
        for i in range(w.shape[0]):
            x = float(i - c)
            moment[i] = w[i] * x * x
        variances[v] = _pairwise_sum(moment) / _pairwise_sum(w)
    shortfall = scale * scale * variances[0] - variances[1]
    if shortfall <= 0.0:
        return m
    a = 0.5 * shortfall
    op = np.zeros((n_dst + 2, n_src))
    for i in range(n_dst):
        for j in range(n_src):
            op[i + 1, j] = (1.0 - 2.0 * a) * m[i, j]
    for i in range(n_dst):  # rows 0 .. n_dst - 1 first, then 2 .. n_dst + 1
        for j in range(n_src):
            op[i, j] += a * m[i, j]
    for i in range(n_dst):
        for j in range(n_src):
            op[i + 2, j] += a * m[i, j]
    return op


@numba.njit(**NJIT)
def _scaled_kernel2d(k, scale):  # pragma: no cover - compiled
    """The body of :func:`scaled_defocus_kernel` for a float32 square kernel ``k``."""
    k64 = k.astype(np.float64)
    n = k64.shape[0]
    profile = np.empty(n)  # the disk is symmetric: rows = columns
    for i in range(n):
        profile[i] = _pairwise_sum(k64[i])
    op = _scaling_operator(profile, scale)
    out = _product_2d(_product_2d(op, k64), np.ascontiguousarray(op.T))
    factor = _pairwise_sum(k64.ravel()) / _pairwise_sum(out.ravel())
    return (out * factor).astype(np.float32)


@lru_cache(maxsize=256)
def scaled_defocus_kernel(radius: float, alias_sigma: float, scale: float) -> np.ndarray:
    """:func:`defocus_kernel` at 224 px, carried to an image ``scale`` times as large.

    ``L K L^T`` with ``L`` from :func:`_scaling_operator`: the kernel integrated over the
    pixels of the scaled grid (area resampling), then, if that lost part of its variance
    (``scale**2`` times the reference kernel's along each axis), widened by the 3-tap kernel
    that restores it; rescaled to the reference kernel's sum. At ``scale == 1`` it is the
    reference kernel exactly; a disk of radius 0.3 px at 28 px still blurs, by the amount its
    variance gives, where a thresholded disk (or plain area resampling) would leave one pixel.
    The registry uses it below 224 px; above, the reference's ``disk()`` with radius and alias
    sigma scaled (area resampling would widen the kernel as a staircase).

    Parameters
    ----------
    radius, alias_sigma : float > 0
        The table's disk radius and anti-alias Gaussian sigma, pixels at 224 px.
    scale : float > 0
        ``min(H, W) / 224`` (:attr:`~._spec.Context.scale`).

    Returns
    -------
    ndarray, shape (n, n), n odd, float32, read-only
        Sum equal to :func:`defocus_kernel`'s (about 1.0-1.013).

    Raises
    ------
    TypeError, ValueError
        ``radius``, ``alias_sigma`` or ``scale`` not a finite real number > 0.
    """
    radius = check_positive(radius, "radius")
    alias_sigma = check_positive(alias_sigma, "alias_sigma")
    scale = check_positive(scale, "scale")
    k = defocus_kernel(radius, alias_sigma)
    if scale == 1.0:
        return k
    out = _scaled_kernel2d(k, float(scale))
    out.setflags(write=False)
    return out


def _sample_defocus(param, ctx) -> dict:
    radius, alias = param
    s = ctx.scale
    if s > 1.0:  # the reference's disk() with radius and alias sigma scaled
        return {"radius": float(radius) * s, "alias_sigma": float(alias) * s, "scale": 1.0}
    return {"radius": float(radius), "alias_sigma": float(alias), "scale": s}


def _defocus_kernel(image, *, radius, alias_sigma, scale=1.0):
    radius, alias_sigma, scale = float(radius), float(alias_sigma), float(scale)
    if scale == 1.0:
        # The reference's kernel, with the disk and the Gaussian it was made from: the C++ side
        # evaluates it as integer disk sums (row sums over the disk's rings, updated from row to
        # row) and their 3x3 Gaussian from integer neighbour sums, within one gray level (see
        # _native.filter2d); other kernels take the general plans.
        return _native.filter2d(image, *_defocus_native_args(radius, alias_sigma))
    return _native.filter2d(image, scaled_defocus_kernel(radius, alias_sigma, scale))


@lru_cache(maxsize=1024)
def motion_taps(radius: float, sigma: float, angle: float):
    """Weights and pixel offsets of ImageMagick 6's motion blur.

    ``n = 2 * ceil(radius) + 1`` taps (``GetOptimalKernelWidth1D``), weights
    ``exp(-k**2 / (2 sigma**2))``, k = 0..n-1, normalised to sum 1 (a one-sided half-Gaussian),
    offsets ``dx_k = ceil(k cos(angle) - 0.5)``, ``dy_k = ceil(k sin(angle) - 0.5)`` (x = column,
    y = row, pointing down).

    Returns
    -------
    (weights float64 (n,), dx int32 (n,), dy int32 (n,))
    """
    n = 2 * math.ceil(radius) + 1
    w = np.array([math.exp(-(i * i) / (2.0 * sigma * sigma)) for i in range(n)])
    w /= w.sum()
    # ImageMagick's float order (the direction vector (n sin t, n cos t) normalised by hypot):
    # exact half-integers such as k sin(-30 deg) must round as it rounds them.
    t = math.pi * angle / 180.0
    px, py = n * math.sin(t), n * math.cos(t)
    h = math.hypot(px, py)
    dx = np.array([math.ceil(i * py / h - 0.5) for i in range(n)], dtype=np.int32)
    dy = np.array([math.ceil(i * px / h - 0.5) for i in range(n)], dtype=np.int32)
    for a in (w, dx, dy):
        a.setflags(write=False)
    return w, dx, dy


def motion_taps_scaled(radius: float, sigma: float, angle: float, scale: float):
    """:func:`motion_taps` at 224 px, carried to an image ``scale`` (<= 1) times as large.

    Each tap's offset ``(dx, dy)`` is multiplied by ``scale`` and its weight spread bilinearly
    over the four pixels around the new position (``(1 - tx) (1 - ty)``, ``tx (1 - ty)``, ...,
    with ``tx``, ``ty`` the fractional parts); taps landing on the same pixel are added, in
    order of their first appearance. This keeps the streak's length, direction and shift (its
    weighted mean offset) exactly, where scaling the radius and sigma instead leaves a
    sub-pixel sigma's half-Gaussian on its first tap (octmnist's level 1 at 28 px kept under a
    quarter of the change the 224 px blur makes there). At ``scale == 1`` the taps are
    :func:`motion_taps` unchanged.

    Parameters
    ----------
    radius, sigma : float > 0
        The table's motion radius and sigma, pixels at 224 px.
    angle : float
        Degrees (the registry draws it from U(-45, 45)).
    scale : float in (0, 1]
        ``min(H, W) / 224``.

    Returns
    -------
    (weights float64 (m,), dx int32 (m,), dy int32 (m,)), m <= 4 n
        Weights sum to 1 (up to rounding); offsets in pixels of the scaled image.
    """
    w, dx, dy = motion_taps(radius, sigma, angle)
    if scale == 1.0:
        return w, dx, dy
    return _spread_taps(w, dx, dy, scale)


@numba.njit(**NJIT)
def _spread_taps(w, dx, dy, scale):  # pragma: no cover - compiled
    """The bilinear spreading of :func:`motion_taps_scaled` (corners (0, 0), (1, 0), (0, 1),
    (1, 1) of each tap in turn; a pixel keeps the place of its first weight)."""
    n = w.shape[0]
    px = np.empty(4 * n, np.int64)
    py = np.empty(4 * n, np.int64)
    weights = np.empty(4 * n)
    m = 0
    for k in range(n):
        x, y = dx[k] * scale, dy[k] * scale
        x0, y0 = math.floor(x), math.floor(y)
        tx, ty = x - x0, y - y0
        for c in range(4):
            cx, cy = c % 2, c // 2
            cw = (tx if cx else 1.0 - tx) * (ty if cy else 1.0 - ty)
            v = w[k] * cw
            if not v > 0.0:
                continue
            qx, qy = int(x0) + cx, int(y0) + cy
            slot = -1
            for q in range(m):
                if px[q] == qx and py[q] == qy:
                    slot = q
                    break
            if slot < 0:
                px[m], py[m], weights[m] = qx, qy, v
                m += 1
            else:
                weights[slot] += v
    return weights[:m].copy(), px[:m].astype(np.int32), py[:m].astype(np.int32)


def _sample_motion(param, ctx) -> dict:
    radius, sigma = param
    s = ctx.scale
    angle = float(generator(ctx.key).uniform(-45.0, 45.0))
    if s < 1.0:  # the 224 px streak, shrunk (motion_taps_scaled)
        return {"radius": float(radius), "sigma": float(sigma), "angle": angle, "scale": s}
    return {"radius": radius * s, "sigma": sigma * s, "angle": angle, "scale": 1.0}


def _motion_kernel(image, *, radius, sigma, angle, scale=1.0):
    w, dx, dy = motion_taps_scaled(float(radius), float(sigma), float(angle), float(scale))
    return _native.motion_blur(image, w, dx, dy)


def _sample_zoom(param, ctx) -> dict:
    return {"zooms": tuple(float(z) for z in param)}


def _zoom_kernel(image, *, zooms):
    return _native.zoom_blur(image, np.asarray(zooms, dtype=np.float64))


@lru_cache(maxsize=256)
def gaussian_kernel1d(kernel_size: int, sigma: float) -> np.ndarray:
    """torchvision's 1-D Gaussian: ``exp(-0.5 (x / sigma)**2)`` on ``x = -(k-1)/2..(k-1)/2``,
    normalised, in float32."""
    half = (kernel_size - 1) * 0.5
    x = np.linspace(-half, half, kernel_size, dtype=np.float32)
    pdf = np.exp(np.float32(-0.5) * (x / np.float32(sigma)) ** 2)
    k = (pdf / pdf.sum()).astype(np.float32)
    k.setflags(write=False)
    return k


@lru_cache(maxsize=256)
def scaled_gaussian_kernel1d(kernel_size: int, sigma: float, scale: float) -> np.ndarray:
    """:func:`gaussian_kernel1d` at 224 px, carried to an image ``scale`` times as large.

    The rule of :func:`scaled_defocus_kernel` on one axis (the blur is separable): area
    resampling, then the 3-tap widening that keeps ``scale**2`` times the kernel's variance.
    At ``scale == 1`` it is :func:`gaussian_kernel1d` exactly; at 28 px the table's kernels
    (sigma 0.8-2.0 px at 224) keep a blur of sigma 0.1-0.25 px instead of none.

    Parameters
    ----------
    kernel_size : int, odd, >= 1
        The table's kernel size, pixels at 224 px.
    sigma : float > 0
        Pixels at 224 px (torchvision's default for ``kernel_size`` in the registry).
    scale : float in (0, 1]
        ``min(H, W) / 224`` (the registry scales size and sigma themselves above 224 px).

    Returns
    -------
    ndarray, shape (n,), n odd, float32, read-only
        Normalised to sum 1.

    Raises
    ------
    TypeError, ValueError
        ``kernel_size`` not an odd int >= 1; ``sigma`` or ``scale`` not a finite real
        number > 0.
    """
    check_int(kernel_size, "kernel_size", 1, odd=True)
    sigma, scale = check_positive(sigma, "sigma"), check_positive(scale, "scale")
    k = gaussian_kernel1d(kernel_size, sigma)
    if scale == 1.0:
        return k
    k64 = k.astype(np.float64)
    out = _product(_scaling_operator(k64, scale), k64)
    out = (out / out.sum()).astype(np.float32)
    out.setflags(write=False)
    return out


def _sample_gaussian(param, ctx) -> dict:
    k = int(param)
    sigma = 0.3 * ((k - 1) * 0.5 - 1) + 0.8  # torchvision's default sigma for kernel size k
    s = ctx.scale
    if s > 1.0:  # a wider Gaussian: half width scaled and rounded half up, sigma scaled
        return {"kernel_size": 2 * math.floor((k - 1) / 2 * s + 0.5) + 1, "sigma": sigma * s,
                "scale": 1.0}
    return {"kernel_size": k, "sigma": sigma, "scale": s}  # carried (scaled_gaussian_kernel1d)


def _gaussian_kernel(image, *, kernel_size, sigma, scale=1.0):
    taps = scaled_gaussian_kernel1d(int(kernel_size), float(sigma), float(scale))
    return _native.gaussian_blur(image, taps)


#: The blurs (reference ``DefocusBlur``, ``MotionBlur``, ``ZoomBlur``, ``GaussianBlur`` in
#: ``corruptions/filter.py``): defocus (radius, alias sigma) and motion (radius, sigma) in pixels
#: at the reference size, scaled by ``ctx.scale``, motion's angle U(-45, 45) degrees from the
#: image key; zoom factors unscaled; Gaussian kernel size at the reference size, its half width
#: and torchvision's default sigma scaled.
DEFOCUS_BLUR = Kind("defocus_blur", _sample_defocus, _defocus_kernel, random=False)
MOTION_BLUR = Kind("motion_blur", _sample_motion, _motion_kernel, random=True)
ZOOM_BLUR = Kind("zoom_blur", _sample_zoom, _zoom_kernel, random=False)
GAUSSIAN_BLUR = Kind("gaussian_blur", _sample_gaussian, _gaussian_kernel, random=False)
