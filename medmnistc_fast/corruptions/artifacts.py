"""Task-specific artefacts of MedMNIST-C: stain_deposit, bubble, black_corner, characters.

Each corruption is a :class:`~medmnistc_fast.corruptions._spec.Kind`: ``sample(param, ctx) ->
dict`` draws every random value for one image from its 64-bit key ``ctx.key``, and
``kernel(image, **values)`` is a pure function of the pixels and those values.

The reference is ``medmnistc`` 0.1.0, file ``medmnistc/corruptions/microscopy.py`` (classes
``StainDeposit``, ``Bubble``, ``BlackCorner``, ``Characters``); its parameters are absolute pixel
sizes tuned for 224 x 224 images. Here every spatial constant is multiplied by
``s = ctx.scale = min(H, W) / ctx.reference_size`` (224 for MedMNIST-C) and rounded half up
(``_scaled``), so at 224 px the
reference's values are used unchanged and at other sizes the artefacts cover about the same
fraction of the image. Below 224 px, characters and bubbles are drawn at their 224 px size on a
grid ``ctx.supersample = 224 / min(H, W)`` times finer and averaged over the image's pixels
(text a few pixels high and a 2 px rim cannot shrink below a pixel). Ranges that would be empty
at small sizes are clamped (the reference raises ``ValueError`` from ``random.randint``
there).

Gray images (C = 1) give what the reference's dataset generation gives (L -> RGB -> corrupt ->
L): stain, bubble and black_corner change all channels alike, so they act on the single channel
directly (bit-identical); characters draws a random RGB colour, so it renders on the RGB version
of the pixels it touches and converts them back with Pillow's luma formula (as
:func:`~._spec.to_gray`; untouched pixels map back to themselves).

References
----------
F. Di Salvo, S. Doerrich, C. Ledig, "MedMNIST-C: Comprehensive benchmark and improved classifier
robustness by simulating realistic image corruptions", arXiv:2406.17536, 2024.
medmnistc 0.1.0 (Apache-2.0), ``medmnistc/corruptions/microscopy.py`` and ``base.py``.
"""
from __future__ import annotations

import math
import string
import threading
from functools import lru_cache
from importlib import resources
from types import MappingProxyType
from typing import NamedTuple

import numba
import numpy as np
from PIL import Image, ImageDraw, ImageFont

from .._config import NJIT
from ..rng import generator
from ._draws import RANGE_LIMIT, bounded, with_words
from ._spec import Context, Kind, to_gray, to_rgb

__all__ = [
    "STAIN_DEPOSIT", "BUBBLE", "BLACK_CORNER", "CHARACTERS",
    "stain_param", "INK_SIDES",
    "stain_deposit_sample", "stain_deposit_kernel",
    "bubble_sample", "bubble_kernel",
    "black_corner_sample", "black_corner_kernel",
    "characters_sample", "characters_kernel",
]


def _scaled(value: float, s: float) -> int:
    """``value * s`` rounded half up to an int (exactly ``value`` when ``s == 1``)."""
    return int(np.floor(value * s + 0.5))


#: Flags of the samplers' compiled draws (about 1 us each): they keep the GIL, since releasing
#: it on entry let another thread take it and made this one wait for it back.
_NJIT_GIL = {**NJIT, "nogil": False}

#: Supersampled drawing (characters and bubbles below 224 px) averages fine pixels over image
#: pixels with integer weights: overlap lengths in units of ``1 / AREA_UNITS`` of an image
#: pixel's side, from the fine-cell edges' positions in the pixel rounded to units (so a
#: pixel's weights add up to exactly AREA_UNITS at any factor). 40320 = 8! is divisible by
#: every integer factor up to 8 and by 14, 16, 28, 56, and 40320 / 224 = 180, so for every
#: factor ``224 / k`` the registry uses the edges fall on whole units, and block means for the
#: factors 2, 7, 8, 28 (112, 32, 28 and 8 px) and half-pixel offsets are exact; integer sums
#: make the result the same on every machine.
AREA_UNITS = 40320

#: Largest ``supersample`` factor of :func:`bubble_kernel` and :func:`characters_kernel`. The
#: registry uses at most 28 (224 / 8, the smallest image side); at 1024 one image pixel fills
#: a tile of the bubble layer (:data:`_BUBBLE_TILE_FINE`, about 1 MB) and an edge still moves
#: by 1 / 39 of a fine pixel per unit. Larger factors allocated ``f**2`` bytes per image pixel
#: (a MemoryError at 1e5).
MAX_SUPERSAMPLE = 1024.0


def _check_supersample(value) -> float:
    """``value`` as a float in [1, MAX_SUPERSAMPLE], else ValueError naming the range."""
    f = float(value)
    if not (math.isfinite(f) and 1.0 <= f <= MAX_SUPERSAMPLE):
        raise ValueError(f"supersample must be a finite number >= 1 and <= "
                         f"{MAX_SUPERSAMPLE:g}; got {value!r}")
    return f


@numba.njit(**NJIT)
def _units_below(t, lo, hi, unit):  # pragma: no cover - compiled
    """Position ``t`` in the cell ``[lo, hi)``, rounded half up to units of ``1 / unit``
    (0 at or before ``lo``, ``AREA_UNITS`` at or after ``hi``)."""
    if t <= lo:
        return 0
    if t >= hi:
        return AREA_UNITS
    return int(math.floor((t - lo) * unit + 0.5))


@numba.njit(**NJIT)
def _cell_weights(n_coarse, first, n_fine, f):  # pragma: no cover - compiled
    """Integer overlap weights between fine cells ``[first + r, first + r + 1)``,
    r = 0..n_fine-1, and the image's pixel cells ``[i f, (i + 1) f)`` they reach (clipped to
    0..n_coarse-1): ``AREA_UNITS * overlap / f``, each fine cell's edges placed in the pixel
    rounded to units, so the weights of consecutive fine cells add up to the rounded span they
    cover and a covered pixel's to ``AREA_UNITS`` exactly (rounding each overlap instead lost
    320 of 40320 per pixel at ``f = 1000``: a mean of 98.4 for a constant 100).

    Returns ``(i0, starts, band)``: image cells ``i0 .. i0 + n - 1``; cell ``i0 + i`` takes fine
    cells ``starts[i] + k`` with weight ``band[i, k]`` (int64 ``(n,)`` and ``(n, ceil(f) + 2)``;
    weights past the last fine cell are 0); n = 0 when no cell is in range.
    """
    i0 = max(0, int(math.floor(first / f)))
    i1 = min(n_coarse, int(math.ceil((first + n_fine) / f)))
    n = max(0, i1 - i0)
    width = int(math.ceil(f)) + 2
    starts = np.zeros(n, np.int64)
    band = np.zeros((n, width), np.int64)
    unit = AREA_UNITS / f
    for i in range(n):
        lo, hi = (i0 + i) * f, (i0 + i + 1) * f
        start = max(0, int(math.floor(lo - first)))
        starts[i] = start
        below = _units_below(first + start, lo, hi, unit)
        for k in range(width):
            r = start + k
            if r >= n_fine:
                break
            upto = _units_below(first + r + 1.0, lo, hi, unit)
            band[i, k] = upto - below
            below = upto
    return i0, starts, band


@numba.njit(**NJIT)
def _area_mean(values, r_starts, r_band, c_starts, c_band):  # pragma: no cover - compiled
    """Mean of ``values`` (2-D, 0..255) over image pixels: ``sum_{r,c} wr * wc * v / AREA_UNITS**2``
    rounded half up, with the banded weights of :func:`_cell_weights` for rows and columns,
    in exact integer arithmetic (the same on every machine). uint32 ``(n_rows, n_cols)``."""
    n_fine_r, n_fine_c = values.shape
    tmp = np.zeros((r_starts.shape[0], n_fine_c), np.int64)
    for i in range(r_starts.shape[0]):
        for k in range(r_band.shape[1]):
            w = r_band[i, k]
            r = r_starts[i] + k
            if w == 0 or r >= n_fine_r:
                continue
            for c in range(n_fine_c):
                tmp[i, c] += w * np.int64(values[r, c])
    unit = np.int64(AREA_UNITS) * np.int64(AREA_UNITS)
    out = np.empty((r_starts.shape[0], c_starts.shape[0]), np.uint32)
    for i in range(r_starts.shape[0]):
        for j in range(c_starts.shape[0]):
            total = np.int64(0)
            for k in range(c_band.shape[1]):
                c = c_starts[j] + k
                if c < n_fine_c:
                    total += c_band[j, k] * tmp[i, c]
            out[i, j] = np.uint32((2 * total + unit) // (2 * unit))
    return out


# ---------------------------------------------------------------------------------------------
# black_corner
# ---------------------------------------------------------------------------------------------

@lru_cache(maxsize=32)
def _circle_spans(height: int, width: int, radius: int):
    """Row spans of OpenCV's filled circle of ``radius`` centred at ``(W // 2, H // 2)``.

    ``cv2.circle(img, centre, R, colour, thickness=-1)`` with the default 8-connected line type
    and no sub-pixel shift walks the circle's first octant from (R, 0), stepping x down by one
    whenever ``x**2 + y**2 > R**2``, and fills the spans between the symmetric points. Since the
    octant's slope never exceeds 1, every row's span ends at the last integer x with
    ``x**2 + y**2 <= R**2``: the fill is exactly the set of pixels whose integer offset from the
    centre satisfies ``dx**2 + dy**2 <= R**2``, i.e. row ``cy +- d`` keeps the columns
    ``cx - isqrt(R**2 - d**2) .. cx + isqrt(R**2 - d**2)``. Checked bit-exact against
    ``cv2.circle`` (opencv-python 5.0.0.93, as used by the reference) for every radius 0..399,
    for 3,960 centred image shapes and multipliers, and in ``tests/test_artifacts.py`` against
    recorded reference masks (``tests/data/black_corner_cv2.json``).

    Returns
    -------
    lo, hi : ndarray, shape (H,), int64
        Kept columns ``lo <= col < hi`` of each row (``lo == hi`` for an empty row).
    """
    cx, cy = width // 2, height // 2
    lo = np.zeros(height, np.int64)
    hi = np.zeros(height, np.int64)
    for row in range(height):
        d = abs(row - cy)
        if d <= radius:
            half = math.isqrt(radius * radius - d * d)
            a, b = max(cx - half, 0), min(cx + half + 1, width)
            if a < b:
                lo[row], hi[row] = a, b
    lo.setflags(write=False)
    hi.setflags(write=False)
    return lo, hi


@lru_cache(maxsize=16)
def _circle_byte_mask(height: int, width: int, channels: int, radius: int) -> np.ndarray:
    """Read-only uint8 ``(H, W, C)`` mask: 255 inside the circle (:func:`_circle_spans`), else 0."""
    lo, hi = _circle_spans(height, width, radius)
    mask = np.zeros((height, width, channels), np.uint8)
    for row in range(height):
        mask[row, lo[row]:hi[row]] = 255
    mask.setflags(write=False)
    return mask


def black_corner_sample(param, ctx: Context) -> dict:
    """Radius of the kept disk (deterministic: ``ctx.key`` is ignored).

    Parameters
    ----------
    param : float
        Multiplier of the largest centred radius (the dermamnist table: 1.10, 1.05, 1.00,
        0.90, 0.95; level 4 is darker than level 5 in the reference and here).
    ctx : Context
        Only ``ctx.shape`` = ``(H, W, C)`` is used.

    Returns
    -------
    dict
        ``{"radius": int}``, in pixels: ``int(r0 * param)`` with
        ``r0 = min(W // 2, H // 2, W - W // 2, H - H // 2)`` (reference: ``BlackCorner.apply``).
        No size scaling is needed: ``r0`` is already proportional to the image.
    """
    height, width = int(ctx.shape[0]), int(ctx.shape[1])
    cx, cy = width // 2, height // 2
    r0 = min(cx, cy, width - cx, height - cy)
    return {"radius": int(r0 * float(param))}


def black_corner_kernel(image: np.ndarray, radius: int, out=None) -> np.ndarray:
    """Zero every pixel outside the filled circle centred at ``(W // 2, H // 2)``.

    Parameters
    ----------
    image : ndarray, shape (H, W, C), uint8
        C = 1 or 3, C-contiguous.
    radius : int, >= 0
        Circle radius in pixels; the circle is rasterised as OpenCV's filled ``cv2.circle``
        (see :func:`_circle_spans`) and may extend past the image.

    out : ndarray, optional
        Where to write: C-contiguous, writeable uint8 of the image's shape, sharing no memory
        with it.

    Returns
    -------
    ndarray, shape (H, W, C), uint8
        ``out`` if given, else a new array: ``image`` inside the circle, 0 outside (all
        channels).
    """
    mask = _circle_byte_mask(image.shape[0], image.shape[1], image.shape[2], int(radius))
    return np.bitwise_and(image, mask, out=out)


#: ``black_corner`` (reference ``BlackCorner``, ``corruptions/microscopy.py``): the table's
#: multiplier of the inscribed-circle radius (relative, so no scaling).
BLACK_CORNER = Kind("black_corner", black_corner_sample, black_corner_kernel, random=False,
                    into=True)


# ---------------------------------------------------------------------------------------------
# stain_deposit
# ---------------------------------------------------------------------------------------------

#: Side in pixels of the ink masks under each key of the reference's ``assets/inks.npz``
#: (and of ours, converted by ``tools/convert_inks.py``); 10 masks per key.
INK_SIDES = {"1": 12, "2": 16, "3": 24, "4": 32, "5": 42}
_INK_KEY_OF_SIDE = {side: key for key, side in INK_SIDES.items()}

#: Number of ink masks per size (reference: ``inks[random.randint(0, len(inks) - 1)]``).
N_INKS = 10

#: Margin in pixels at 224 px between a mark and the image border (reference:
#: ``random.randint(10, img_w - ink_width - 10)`` in ``StainDeposit.apply``).
STAIN_MARGIN = 10


def stain_param(max_marks: int, severity: int) -> tuple:
    """Effective stain_deposit parameter of one level: ``(max_marks, ink_side_px)``.

    :func:`stain_deposit_sample` calls it with ``ctx.severity``; it is public so that callers
    (documentation, the augmentation pipeline) can see which inks a level uses.

    The reference picks the ink set with the 0-based level index, not with the table entry:
    ``self.inks[str(max(3, severity))]`` in ``StainDeposit.apply``. So levels 1-4 use the 24 px
    inks (key ``'3'``) and level 5 the 32 px inks (key ``'4'``); keys ``'1'``, ``'2'`` and ``'5'``
    are never used. For bloodmnist (table 1, 2, 3, 3, 3) levels 3 and 4 are therefore equal in
    distribution and level 5 differs from them only by its larger inks.

    Parameters
    ----------
    max_marks : int, >= 1
        The table entry (maximum number of ink marks).
    severity : int, 1..5
        Public severity level.

    Returns
    -------
    tuple of (int, int)
        ``(max_marks, ink_side)`` with ink_side in pixels at 224 px (24 or 32).
    """
    key = str(max(3, int(severity) - 1))
    return (int(max_marks), INK_SIDES[key])


@lru_cache(maxsize=None)
def _inks(side: int) -> np.ndarray:
    """The 10 reference ink masks of one size: read-only bool ``(10, side, side)``."""
    ref = resources.files("medmnistc_fast").joinpath("assets", "inks.npz")
    with ref.open("rb") as fh, np.load(fh, allow_pickle=False) as z:
        masks = np.ascontiguousarray(z[_INK_KEY_OF_SIDE[side]], dtype=bool)
    masks.setflags(write=False)
    return masks


@lru_cache(maxsize=64)
def _scaled_inks(ink_side: int, side: int) -> np.ndarray:
    """Ink masks resized nearest-neighbour from ``ink_side`` to ``side`` pixels.

    Output pixel ``i`` takes source pixel ``floor((i + 0.5) * ink_side / side)``; at
    ``side == ink_side`` this is the identity.
    """
    masks = _inks(ink_side)
    if side == ink_side:
        return masks
    idx = np.minimum(((np.arange(side) + 0.5) * ink_side / side).astype(np.int64), ink_side - 1)
    out = np.ascontiguousarray(masks[:, idx][:, :, idx])
    out.setflags(write=False)
    return out


def _stain_range(size: int, extent: int, margin: int) -> tuple:
    """The closed range ``[margin, size - extent - margin]`` of top-left coordinates.

    Never empty for the scaled ink sides and margins: with ``s = min(H, W) / 224`` the largest
    ink (42 px) and both margins (10 px) take ``round(62 * s)`` of ``size >= 224 * s`` pixels
    (checked for every side 8..4096 in tests/test_artifacts.py).
    """
    return margin, size - extent - margin


def _stain_positions(g: np.random.Generator, size: int, extent: int, margin: int, n: int):
    """``n`` top-left coordinates drawn uniformly from :func:`_stain_range`."""
    lo, hi = _stain_range(size, extent, margin)
    return g.integers(lo, hi, size=n, endpoint=True).astype(np.int64)


def _stain_generator_draws(key, max_marks, width, height, side, margin):
    """The draws of :func:`stain_deposit_sample` as ``Generator`` calls (their definition):
    ``(ink, x, y)``, int64 arrays."""
    g = generator(key)
    n = int(g.integers(1, max_marks, endpoint=True)) if max_marks > 1 else max(0, max_marks)
    ink = g.integers(0, N_INKS, size=n).astype(np.int64)
    x = _stain_positions(g, width, side, margin, n)
    y = _stain_positions(g, height, side, margin, n)
    return ink, x, y


@numba.njit(**_NJIT_GIL)
def _stain_draws(words, max_marks, x_lo, x_hi, y_lo, y_hi):  # pragma: no cover - compiled
    """:func:`_stain_generator_draws` from raw words (:mod:`._draws`): ``(pos, ink, x, y)``;
    ``pos`` -1 when the words ran out. ``max_marks >= 0``."""
    pos = 0
    n = max_marks
    if max_marks > 1:
        n, pos = bounded(words, pos, 1, max_marks)
    draws = np.empty((3, n), np.int64)
    for row in range(3):
        lo = 0 if row == 0 else (x_lo if row == 1 else y_lo)
        hi = N_INKS - 1 if row == 0 else (x_hi if row == 1 else y_hi)
        for i in range(n):
            if pos < 0:
                return -1, draws[0], draws[1], draws[2]
            draws[row, i], pos = bounded(words, pos, lo, hi)
    return pos, draws[0].copy(), draws[1].copy(), draws[2].copy()


def stain_deposit_sample(param, ctx: Context) -> dict:
    """Draw the ink marks of one image.

    Parameters
    ----------
    param : int or tuple of (int, int)
        The table entry ``max_marks``; the ink set then follows the reference's rule from
        ``ctx.severity`` (:func:`stain_param`). An explicit ``(max_marks, ink_side)`` pair
        (ink_side in pixels at 224 px: one of 12, 16, 24, 32, 42) overrides that rule.
    ctx : Context
        ``ctx.shape`` = ``(H, W, C)``, ``ctx.key`` the image key (:mod:`medmnistc_fast.rng`),
        ``ctx.scale`` = ``min(H, W) / 224`` (s below), ``ctx.severity`` (1..5).

    Returns
    -------
    dict
        ``ink_side`` (int, the ink set), ``side`` (int, drawn side in pixels:
        ``max(1, round(ink_side * s))``), ``ink`` (int64 ``(n,)``, mask index 0..9),
        ``x``, ``y`` (int64 ``(n,)``, top-left column and row in pixels).
        n = ``randint(1, max_marks)`` (or ``max_marks`` when it is <= 1); each mark is a uniform
        choice of the 10 masks at ``x = randint(m, W - side - m)``, ``y = randint(m, H - side -
        m)`` with ``m = round(10 * s)`` (reference: ``StainDeposit.apply``).

    Raises
    ------
    ValueError
        If an explicit ink_side is not one of the stored sizes.
    """
    if isinstance(param, (tuple, list)):
        max_marks, ink_side = int(param[0]), int(param[1])
    else:
        max_marks, ink_side = stain_param(param, ctx.severity)
    if ink_side not in _INK_KEY_OF_SIDE:
        raise ValueError(f"ink_side must be one of {sorted(_INK_KEY_OF_SIDE)}, got {ink_side}")
    height, width = int(ctx.shape[0]), int(ctx.shape[1])
    s = ctx.scale
    side = max(1, _scaled(ink_side, s))
    margin = _scaled(STAIN_MARGIN, s)
    x_lo, x_hi = _stain_range(width, side, margin)
    y_lo, y_hi = _stain_range(height, side, margin)
    if (0 <= max_marks <= _FAST_MAX_COUNT and 0 <= x_lo and 0 <= y_lo
            and max(x_hi - x_lo, y_hi - y_lo, max_marks) < RANGE_LIMIT):
        ink, x, y = with_words(_stain_draws, ctx.key, 1 + 3 * max_marks, max_marks, x_lo,
                               x_hi, y_lo, y_hi)
    else:  # out of the fast path's ranges: the definition, one Generator call per quantity
        ink, x, y = _stain_generator_draws(ctx.key, max_marks, width, height, side, margin)
    return {"ink_side": ink_side, "side": side, "ink": ink, "x": x, "y": y}


def stain_deposit_kernel(image: np.ndarray, ink_side: int, side: int, ink, x, y,
                         out=None) -> np.ndarray:
    """Set to 0, in every channel, the pixels under each ink mark.

    Parameters
    ----------
    image : ndarray, shape (H, W, C), uint8
        C = 1 or 3, C-contiguous.
    ink_side : int
        Ink set (side in pixels of the stored masks: 12, 16, 24, 32 or 42).
    side : int, >= 1
        Side in pixels at which the masks are drawn (nearest-neighbour resize).
    ink, x, y : array_like of int, shape (n,)
        Mask index (0..9) and top-left column/row in pixels of each mark; a mark reaching past
        the image is cropped.
    out : ndarray, optional
        Where to write: C-contiguous, writeable uint8 of the image's shape, sharing no memory
        with it.

    Returns
    -------
    ndarray, shape (H, W, C), uint8
        ``out`` if given, else a new array (reference: ``x[...] *= (1 - ink)`` per channel in
        ``StainDeposit.apply``).
    """
    image = np.ascontiguousarray(image)
    return _zero_under_inks(image, _scaled_inks(int(ink_side), int(side)),
                            np.ascontiguousarray(ink, np.int64), np.ascontiguousarray(x, np.int64),
                            np.ascontiguousarray(y, np.int64),
                            np.empty_like(image) if out is None else out)


@numba.njit(**NJIT)
def _zero_under_inks(image, masks, ink, xs, ys, out):  # pragma: no cover - compiled
    # ``out`` = ``image`` with the marks' pixels set to 0 (copied here, without the GIL).
    src, dst = image.reshape(image.size), out.reshape(out.size)
    for i in range(src.size):
        dst[i] = src[i]
    height, width, channels = out.shape
    side = masks.shape[1]
    for k in range(ink.shape[0]):
        for i in range(side):
            row = ys[k] + i
            if row < 0 or row >= height:
                continue
            for j in range(side):
                col = xs[k] + j
                if col < 0 or col >= width or not masks[ink[k], i, j]:
                    continue
                for ch in range(channels):
                    out[row, col, ch] = 0
    return out


#: ``stain_deposit`` (reference ``StainDeposit``): the table's maximum number of marks; ink set
#: by severity (:data:`INK_SIDES`), inks and margins scaled from 224 px.
STAIN_DEPOSIT = Kind("stain_deposit", stain_deposit_sample, stain_deposit_kernel, random=True,
                     into=True)


# ---------------------------------------------------------------------------------------------
# bubble
# ---------------------------------------------------------------------------------------------

#: Bubble constants of the reference (``Bubble.apply``): at least 7 bubbles, radius at least
#: 3 px, a rim of 2 px drawn with alpha 130 under the body drawn with alpha 100, white (255).
BUBBLE_MIN_COUNT = 7
BUBBLE_MIN_RADIUS = 3
BUBBLE_BORDER = 2
BUBBLE_RIM_ALPHA = 130
BUBBLE_BODY_ALPHA = 100


@lru_cache(maxsize=None)
def _pillow_disk_halfwidths(radius: int) -> np.ndarray:
    """Half-widths, by row offset 0..radius, of Pillow's filled ``ellipse((x-R, y-R, x+R, y+R))``.

    Drawn once per radius with Pillow's own ``ImageDraw.ellipse`` (the reference's
    rasteriser). Pillow's disks with integer boxes are symmetric about both axes and convex along
    every row, so one half-width per row offset describes them; -1 marks an empty row (radius 0
    draws nothing in Pillow).
    """
    c = radius + 2
    im = Image.new("L", (2 * c + 1, 2 * c + 1), 0)
    ImageDraw.Draw(im).ellipse((c - radius, c - radius, c + radius, c + radius), fill=255)
    rows = np.asarray(im)[c:c + radius + 1] > 0
    count = rows.sum(axis=1)
    return np.where(count > 0, (count - 1) // 2, -1).astype(np.int64)


#: Radii up to this share one cached table (every MedMNIST-C bubble: at most 17 px at 224 px).
_TABLE_RADIUS = 64


@lru_cache(maxsize=1)
def _full_disk_table() -> np.ndarray:
    """``T[R, d]`` = half-width of row offset ``d`` of Pillow's disk of radius ``R`` (-1: none),
    for every ``R <= _TABLE_RADIUS``."""
    table = np.full((_TABLE_RADIUS + 1, _TABLE_RADIUS + 1), -1, np.int64)
    for r in range(_TABLE_RADIUS + 1):
        table[r, : r + 1] = _pillow_disk_halfwidths(r)
    table.setflags(write=False)
    return table


def _disk_table(radii: np.ndarray) -> np.ndarray:
    """A ``T[R, d]`` table (see :func:`_full_disk_table`) holding at least the rows of ``radii``
    (int64, >= 0). Radii above ``_TABLE_RADIUS`` get a table of their own with only the rows
    asked for: drawing every disk up to a radius of 2048 with Pillow took 13 s."""
    max_r = int(radii.max(initial=0))
    if max_r <= _TABLE_RADIUS:
        return _full_disk_table()
    table = np.full((max_r + 1, max_r + 1), -1, np.int64)
    for r in np.unique(radii):
        table[r, : r + 1] = _pillow_disk_halfwidths(int(r))
    return table


@numba.njit(**NJIT)
def _stamp_disk(alpha, width, channels, cx, cy, radius, table, value):  # pragma: no cover
    """Write ``value`` into the flat ``(H * W * C)`` alpha layer over one Pillow disk."""
    height = alpha.shape[0] // (width * channels)
    for d in range(-radius, radius + 1):
        row = cy + d
        if row < 0 or row >= height:
            continue
        hw = table[radius, abs(d)]
        if hw < 0:
            continue
        x0 = max(cx - hw, 0)
        x1 = min(cx + hw, width - 1)
        base = row * width * channels
        for i in range(base + x0 * channels, base + (x1 + 1) * channels):
            alpha[i] = value


@numba.njit(**NJIT)
def _bubble_layer(height, width, channels, xs, ys, inner, outer, table, rim_alpha,
                  body_alpha):  # pragma: no cover - compiled
    """The alpha layer (flat ``H * W * C`` uint8): per bubble in turn, the rim disk then the
    body disk, each overwriting what lies under it."""
    alpha = np.zeros(height * width * channels, np.uint8)
    for i in range(xs.shape[0]):
        _stamp_disk(alpha, width, channels, xs[i], ys[i], outer[i], table, rim_alpha)
        _stamp_disk(alpha, width, channels, xs[i], ys[i], inner[i], table, body_alpha)
    return alpha


@numba.njit(**NJIT)
def _paste_white(image, alpha, out):  # pragma: no cover - compiled
    """Pillow's paste of white through ``alpha`` (same shape as ``image``, uint8):
    ``DIV255(v * (255 - a) + 255 * a)``, rounded; a = 0 keeps v. Written into ``out``
    (C-contiguous, the image's shape), which is returned."""
    src = image.reshape(image.size)
    a_flat = alpha.reshape(alpha.size)
    dst = out.reshape(out.size)
    for i in range(image.size):
        a = np.uint32(a_flat[i])
        t = np.uint32(src[i]) * (np.uint32(255) - a) + np.uint32(255) * a + np.uint32(128)
        dst[i] = np.uint8(((t >> np.uint32(8)) + t) >> np.uint32(8))
    return out


@numba.njit(**NJIT)
def _bubbles_pasted(image, xs, ys, inner, outer, table, out):  # pragma: no cover - compiled
    """Whether every radius has a row in ``table`` (a negative radius draws nothing); if so,
    ``out`` = the layer of :func:`_bubble_layer` pasted onto ``image`` (:func:`_paste_white`),
    in one call."""
    limit = table.shape[0]
    for i in range(inner.shape[0]):
        if inner[i] >= limit or outer[i] >= limit:
            return False
    height, width, channels = image.shape
    alpha = _bubble_layer(height, width, channels, xs, ys, inner, outer, table,
                          BUBBLE_RIM_ALPHA, BUBBLE_BODY_ALPHA)
    _paste_white(image, alpha.reshape(image.shape), out)
    return True


def bubble_sample(param, ctx: Context) -> dict:
    """Draw the bubbles of one image.

    Parameters
    ----------
    param : tuple of (int, int)
        ``(max_radius, max_bubbles)``: maximum radius in pixels at 224 px, maximum count.
    ctx : Context
        ``ctx.shape`` = ``(H, W, C)``, ``ctx.key`` the image key (:mod:`medmnistc_fast.rng`),
        ``ctx.scale`` = ``min(H, W) / 224`` (s below).

    Returns
    -------
    dict
        ``x``, ``y`` (int64 ``(n,)``: centre column and row, pixels), ``inner`` (int64 ``(n,)``:
        body radius, pixels), ``outer`` (int64 ``(n,)``: rim radius, pixels), ``supersample``
        (float). n = ``randint(7, max_bubbles)``; r = ``randint(3, max_radius)`` at 224 px;
        ``x = randint(round(r * s), W - round(r * s))``, ``y`` likewise over H (reference:
        ``Bubble.apply``, whose ``height, width = img.size`` swaps the axes: here x runs over
        the width and y over the height; when the range is empty the centre is the image
        centre). From 224 px up, ``inner = round(r * s)``, ``outer = max(1, round((r + 2) *
        s))`` and ``supersample = 1``. Below 224 px the bubbles keep their 224 px radii
        ``inner = r``, ``outer = r + 2`` on a grid ``1 / s`` times finer (``supersample =
        ctx.supersample = 224 / min(H, W)``): a 2 px rim scaled to a fraction of a pixel
        cannot be drawn, and rounding it up to 1 px gave 28 and 64 px images 1.4-1.8 times
        the 224 px share of bubble.
    """
    max_radius, max_bubbles = int(param[0]), int(param[1])
    height, width = int(ctx.shape[0]), int(ctx.shape[1])
    s = ctx.scale
    r_hi = max(BUBBLE_MIN_RADIUS, max_radius)
    if (0 <= max_bubbles <= _FAST_MAX_COUNT and r_hi - BUBBLE_MIN_RADIUS < RANGE_LIMIT
            and max(height, width) < RANGE_LIMIT // 2 and math.isfinite(s)):
        r, fine_outer, inner, outer, x, y = with_words(
            _bubble_draws, ctx.key, 1 + 3 * max_bubbles, min(BUBBLE_MIN_COUNT, max_bubbles),
            max_bubbles, r_hi, s, width, height)
    else:  # out of the fast path's ranges: the definition, one Generator call per quantity
        r, fine_outer, inner, outer, x, y = _bubble_generator_draws(
            ctx.key, max_bubbles, r_hi, s, width, height)
    if ctx.supersample > 1.0:  # drawn at 224 px size on a finer grid (see bubble_kernel)
        return {"x": x, "y": y, "inner": r, "outer": fine_outer, "supersample": ctx.supersample}
    return {"x": x, "y": y, "inner": inner, "outer": outer, "supersample": 1.0}


#: Largest bubble count the compiled draws take (any table entry; larger ones go through the
#: Generator calls).
_FAST_MAX_COUNT = 1 << 20


def _bubble_generator_draws(key, max_bubbles, r_hi, s, width, height):
    """The draws of :func:`bubble_sample` as ``Generator`` calls (their definition): ``(r,
    r + 2, inner, outer, x, y)``, int64 arrays."""
    g = generator(key)
    n = int(g.integers(min(BUBBLE_MIN_COUNT, max_bubbles), max_bubbles, endpoint=True))
    r = g.integers(BUBBLE_MIN_RADIUS, r_hi, size=n, endpoint=True)
    inner = np.floor(r * s + 0.5).astype(np.int64)
    outer = np.maximum(1, np.floor((r + BUBBLE_BORDER) * s + 0.5)).astype(np.int64)

    def centre(size):
        lo, hi = inner, size - inner
        empty = hi < lo
        lo = np.where(empty, size // 2, lo)
        hi = np.where(empty, size // 2, hi)
        return g.integers(lo, hi, endpoint=True).astype(np.int64)

    x = centre(width)
    y = centre(height)
    r = r.astype(np.int64)
    return r, r + BUBBLE_BORDER, inner, outer, x, y


@numba.njit(**_NJIT_GIL)
def _bubble_draws(words, n_lo, n_hi, r_hi, s, width, height):  # pragma: no cover - compiled
    """:func:`_bubble_generator_draws` from raw words (:mod:`._draws`): ``(pos, r, r + 2,
    inner, outer, x, y)``; ``pos`` -1 when the words ran out."""
    empty = np.zeros(0, np.int64)
    n, pos = bounded(words, 0, n_lo, n_hi)
    if pos < 0:
        return -1, empty, empty, empty, empty, empty, empty
    r = np.empty(n, np.int64)
    for i in range(n):
        r[i], pos = bounded(words, pos, BUBBLE_MIN_RADIUS, r_hi)
        if pos < 0:
            return -1, empty, empty, empty, empty, empty, empty
    fine_outer = np.empty(n, np.int64)
    inner = np.empty(n, np.int64)
    outer = np.empty(n, np.int64)
    for i in range(n):
        # NumPy's float64 operations of the definition, element by element
        fine_outer[i] = r[i] + BUBBLE_BORDER
        inner[i] = np.int64(np.floor(r[i] * s + 0.5))
        outer[i] = np.int64(max(1.0, np.floor((r[i] + BUBBLE_BORDER) * s + 0.5)))
    centres = np.empty((2, n), np.int64)
    for axis in range(2):
        size = width if axis == 0 else height
        for i in range(n):
            lo, hi = inner[i], size - inner[i]
            if hi < lo:
                lo = hi = size // 2
            centres[axis, i], pos = bounded(words, pos, lo, hi)
            if pos < 0:
                return -1, empty, empty, empty, empty, empty, empty
    return pos, r, fine_outer, inner, outer, centres[0].copy(), centres[1].copy()


#: Fine pixels per side of one tile of the supersampled bubble layer: the layer is built tile
#: by tile (about 1 MB each), so a long thin image (8 x 100,000 px: 28 times finer) never
#: holds its whole fine layer (627 MB) at once. The result does not depend on it.
_BUBBLE_TILE_FINE = 1024


def bubble_kernel(image: np.ndarray, x, y, inner, outer, supersample: float = 1.0,
                  out=None) -> np.ndarray:
    """Composite white translucent bubbles onto the image.

    On a transparent alpha layer, each bubble in turn draws a disk of radius ``outer`` with
    alpha 130, then a disk of radius ``inner`` with alpha 100 (overwriting, as Pillow's
    ``ImageDraw.ellipse`` on the RGBA layer does; disks rasterised exactly as Pillow's). The
    layer is pasted as Pillow's ``Image.paste(layer, (0, 0), layer)``:
    ``out = (v * (255 - a) + 255 * a + 128 + ((v * (255 - a) + 255 * a + 128) >> 8)) >> 8``.

    Parameters
    ----------
    image : ndarray, shape (H, W, C), uint8
        C = 1 or 3, C-contiguous.
    x, y : array_like of int, shape (n,)
        Centre column and row of each bubble, pixels of the image (may lie outside it).
    inner, outer : array_like of int, shape (n,)
        Body and rim radius of each bubble, pixels (of the fine grid when ``supersample > 1``;
        >= 0; radius 0 draws nothing).
    supersample : float in [1, MAX_SUPERSAMPLE] (1024), default 1
        1: the layer is drawn on the image's pixels. ``f > 1``: it is drawn on a grid ``f``
        times finer, ``ceil(H f) x ceil(W f)`` (tile by tile), each disk centred on the fine
        pixel holding the centre of image pixel ``(x, y)``, ``floor((x + 0.5) f)``; each
        image pixel takes the mean alpha over its ``f x f`` area (:func:`_area_mean`, rounded
        half up), and the paste above. The registry uses ``224 / min(H, W)`` below 224 px.
    out : ndarray, optional
        Where to write: C-contiguous, writeable uint8 of the image's shape, sharing no memory
        with it.

    Returns
    -------
    ndarray, shape (H, W, C), uint8
        ``out`` if given, else a new array (with ``supersample`` 1, bit-exact with the reference's Pillow drawing and
        paste for the same bubbles).

    Raises
    ------
    ValueError
        If ``supersample`` is not a finite number in [1, 1024] (:data:`MAX_SUPERSAMPLE`).
    """
    f = _check_supersample(supersample)
    image = np.ascontiguousarray(image)
    height, width, channels = image.shape
    xs = np.ascontiguousarray(x, dtype=np.int64)
    ys = np.ascontiguousarray(y, dtype=np.int64)
    inner = np.ascontiguousarray(inner, dtype=np.int64)
    outer = np.ascontiguousarray(outer, dtype=np.int64)
    if out is None:
        out = np.empty_like(image)
    if f == 1.0:
        if not _bubbles_pasted(image, xs, ys, inner, outer, _full_disk_table(), out):
            _bubbles_pasted(image, xs, ys, inner, outer,
                            _disk_table(np.concatenate([inner, outer])), out)
        return out
    table = _disk_table(np.concatenate([inner, outer]))
    fine_x = np.floor((xs + 0.5) * f).astype(np.int64)
    fine_y = np.floor((ys + 0.5) * f).astype(np.int64)
    tile = max(1, int(_BUBBLE_TILE_FINE // f))

    def cells(t0, t1):  # fine range of image pixels t0..t1-1 and their weights
        lo, hi = math.floor(t0 * f), math.ceil(t1 * f)
        i0, starts, band = _cell_weights(t1, float(lo), hi - lo, f)
        return lo, hi, starts[t0 - i0:], band[t0 - i0:]

    alpha = np.empty((height, width), np.uint8)
    for ty0 in range(0, height, tile):
        ty1 = min(height, ty0 + tile)
        fy0, fy1, r_starts, r_band = cells(ty0, ty1)
        for tx0 in range(0, width, tile):
            tx1 = min(width, tx0 + tile)
            fx0, fx1, c_starts, c_band = cells(tx0, tx1)
            layer = _bubble_layer(fy1 - fy0, fx1 - fx0, 1, fine_x - fx0, fine_y - fy0, inner,
                                  outer, table, BUBBLE_RIM_ALPHA, BUBBLE_BODY_ALPHA)
            alpha[ty0:ty1, tx0:tx1] = _area_mean(layer.reshape(fy1 - fy0, fx1 - fx0), r_starts,
                                                 r_band, c_starts, c_band)
    return _paste_white(image, np.ascontiguousarray(
        np.broadcast_to(alpha[:, :, None], image.shape)), out)


#: ``bubble`` (reference ``Bubble``): the table's (maximum radius in pixels at 224 px, maximum
#: number of bubbles); constants :data:`BUBBLE_MIN_COUNT` ... :data:`BUBBLE_BODY_ALPHA`.
BUBBLE = Kind("bubble", bubble_sample, bubble_kernel, random=True, into=True)


# ---------------------------------------------------------------------------------------------
# characters
# ---------------------------------------------------------------------------------------------

#: Reference constants (``Characters.apply``): at least 3 letters per word, font scale drawn as
#: ``randint(14, int(max_scale * 100)) / 100``, x in ``[10, W - 8 * n_letters]``, y in
#: ``[10, H - 10]`` (pixels at 224 px).
CHAR_MIN_LETTERS = 3
CHAR_MIN_SCALE_PCT = 14
CHAR_MARGIN = 10
CHAR_ADVANCE = 8

#: OpenCV 5.0's ``putText`` draws HERSHEY_DUPLEX text at an integer pixel height
#: ``h = round(27 * font_scale)`` (``cv2.getTextSize`` height and the rendered glyphs change
#: exactly at font scales ``(h - 0.5) / 27``; measured with opencv-python 5.0.0.93).
CV2_HEIGHT_PER_SCALE = 27

#: Pillow font size (``ImageFont.load_default(size=...)``, the Aileron Regular font Pillow
#: ships) whose lowercase text best matches, per letter, the number of changed pixels and the
#: summed antialiasing coverage of cv2's HERSHEY_DUPLEX text of pixel height ``h`` (thickness 1,
#: LINE_AA), over 300 random lowercase words; measured with opencv-python 5.0.0.93 against
#: Pillow 13.0.0 / FreeType 2.14.3 (fitted sizes 0.1 px apart). Heights above 12 (font scales
#: above 0.46 at 224 px, outside MedMNIST-C's tables) use ``1.3 * h``.
#: At the reference's levels (h = 4 for font scales 0.14-0.16, h = 5 for 0.17-0.18):
#: h = 4: cv2 7.11 px and 2.97 px of coverage per letter, Pillow 4.7: 7.49 and 2.92;
#: h = 5: cv2 9.99 and 4.92, Pillow 6.3: 11.56 and 5.16.
PIL_SIZE_FOR_HEIGHT = {1: 1.0, 2: 2.6, 3: 3.6, 4: 4.7, 5: 6.3, 6: 8.0, 7: 8.9, 8: 10.0,
                       9: 11.7, 10: 12.6, 11: 13.9, 12: 15.9}

#: Pillow's ``anchor="ls"`` puts the baseline one row above the row cv2 uses as ``org.y``.
_BASELINE_SHIFT = 1

_LETTERS = string.ascii_lowercase


def _pillow_font_size(font_scale: float, s: float) -> float:
    """Pillow font size (pixels) for a cv2 font scale at size factor ``s``."""
    h = max(1, int(math.floor(CV2_HEIGHT_PER_SCALE * font_scale * s + 0.5)))
    return PIL_SIZE_FOR_HEIGHT.get(h, 1.3 * h)


#: First and last character code of the glyph atlas (printable ASCII, space included).
_FIRST_CODE, _LAST_CODE = 32, 126

#: Columns of the glyph table: offset of the mask in the pixel buffer, mask height and width
#: (pixels), left and top edge of the mask relative to the pen position on the baseline
#: (pixels, x right, y down), advance (26.6 fixed point: 1/64 pixel).
_G_START, _G_HEIGHT, _G_WIDTH, _G_LEFT, _G_TOP, _G_ADVANCE = range(6)


class _Atlas(NamedTuple):
    """Immutable glyph cache: every size's masks in one buffer (one Numba call per image).

    ``first[size]`` is the glyph row of character code 32 at that Pillow font size; the row
    of code ``c`` is ``first[size] + c - 32``.
    """

    first: MappingProxyType  # size -> int
    pixels: np.ndarray  # uint8 (total,): trimmed coverage masks, row-major, back to back
    glyphs: np.ndarray  # int64 (rows, 6): columns _G_*


_ATLAS = _Atlas(MappingProxyType({}), np.zeros(0, np.uint8), np.zeros((0, 6), np.int64))
_ATLAS_LOCK = threading.Lock()


def _render_glyph(font, char: str, em: int):
    """``char`` drawn alone by ``ImageDraw.text`` with ``anchor="ls"`` on a ``3 em`` square
    canvas, pen start at ``(em, 2 em)``; None if its ink touches the canvas border."""
    canvas = Image.new("L", (3 * em, 3 * em), 0)
    ImageDraw.Draw(canvas).text((em, 2 * em), char, fill=255, font=font, anchor="ls")
    a = np.asarray(canvas)
    r = np.flatnonzero(a.any(axis=1))
    c = np.flatnonzero(a.any(axis=0))
    if not r.size:
        return np.zeros((0, 0), np.uint8), 0, 0
    if r[0] == 0 or c[0] == 0 or r[-1] == 3 * em - 1 or c[-1] == 3 * em - 1:
        return None
    return (np.ascontiguousarray(a[r[0]:r[-1] + 1, c[0]:c[-1] + 1]), int(c[0]) - em,
            int(r[0]) - 2 * em)


def _render_glyphs(size: float):
    """Coverage masks (0..255) and metrics of characters 32..126 at one Pillow font size.

    Each character is drawn alone by Pillow (:func:`_render_glyph`, on a canvas grown until
    nothing touches its border) and trimmed to its nonzero rows and columns (empty for the
    space); its advance is ``font.getlength`` in 26.6 fixed point. Pillow's basic layout of
    this font has no kerning (checked in ``tests/test_artifacts.py``), so a word is these masks
    at the pen positions the advances give, combined as Pillow's FreeType renderer combines
    overlapping glyphs (:func:`_draw_words`).

    Returns
    -------
    masks : list of ndarray, uint8, 1-D
        Row-major trimmed masks.
    metrics : list of (int, int, int, int, int)
        Height, width, left, top, advance (columns ``_G_HEIGHT`` .. ``_G_ADVANCE``).
    """
    font = ImageFont.load_default(size=size)
    masks, metrics = [], []
    for code in range(_FIRST_CODE, _LAST_CODE + 1):
        char = chr(code)
        em = int(math.ceil(size)) + 2
        glyph = _render_glyph(font, char, em)
        while glyph is None:
            em *= 2
            glyph = _render_glyph(font, char, em)
        mask, left, top = glyph
        masks.append(mask.ravel())
        metrics.append((mask.shape[0], mask.shape[1], left, top,
                        int(round(font.getlength(char) * 64))))
    return masks, metrics


def _atlas(sizes) -> _Atlas:
    """The glyph cache holding every size in ``sizes`` (built once per size, under a lock).

    A new size publishes a new, larger :class:`_Atlas` (the old one stays valid for threads
    using it); nothing is ever mutated in place.
    """
    global _ATLAS
    atlas = _ATLAS
    if all(s in atlas.first for s in sizes):
        return atlas
    with _ATLAS_LOCK:
        atlas = _ATLAS
        if all(s in atlas.first for s in sizes):  # built meanwhile by another thread
            return atlas
        first = dict(atlas.first)
        pixels, glyphs = [atlas.pixels], [atlas.glyphs]
        start, row = atlas.pixels.size, atlas.glyphs.shape[0]
        for size in sizes:
            if size in first:
                continue
            masks, metrics = _render_glyphs(size)
            table = np.zeros((len(masks), 6), np.int64)
            for i, (mask, m) in enumerate(zip(masks, metrics)):
                table[i] = (start,) + m
                start += mask.size
            first[size] = row
            row += len(masks)
            pixels += masks
            glyphs.append(table)
        atlas = _Atlas(MappingProxyType(first), np.concatenate(pixels), np.concatenate(glyphs))
        atlas.pixels.setflags(write=False)
        atlas.glyphs.setflags(write=False)
        _ATLAS = atlas
        return atlas


@numba.njit(**NJIT)
def _word_mask(pixels, glyphs, codes, k0, count, first):  # pragma: no cover - compiled
    """Coverage mask of one word, as Pillow's FreeType renderer (``_imagingft.c``,
    ``font_render``) builds it, and its offset from the pen start on the baseline.

    Characters ``codes[k0:k0 + count]``, glyph row ``first + code``. Glyph ``k`` is placed at
    column ``PIXEL(sum of the previous advances) + left``, row ``top``, with
    ``PIXEL(v) = (v + 32) >> 6`` (26.6 fixed point to the nearest pixel); coverages ``s``
    combine as ``m = s`` where ``m`` is still 0, else ``m = min(255, s + MULDIV255(m, 255 -
    s))`` with ``MULDIV255(a, b) = DIV255(a * b)`` and
    ``DIV255(t) = (((t + 128) >> 8) + t + 128) >> 8`` (t / 255 rounded to nearest).

    Returns ``(mask, x_lo, y_lo)``: uint32 ``(h, w)`` (empty for an inkless word) and the
    column and row of its top-left corner relative to the pen start on the baseline.
    """
    x_lo, x_hi, y_lo, y_hi = 1 << 30, -(1 << 30), 1 << 30, -(1 << 30)
    pen = 0
    for k in range(k0, k0 + count):
        g = first + codes[k]
        if glyphs[g, _G_HEIGHT] > 0 and glyphs[g, _G_WIDTH] > 0:
            gx = ((pen + 32) >> 6) + glyphs[g, _G_LEFT]
            gy = glyphs[g, _G_TOP]
            x_lo = min(x_lo, gx)
            x_hi = max(x_hi, gx + glyphs[g, _G_WIDTH])
            y_lo = min(y_lo, gy)
            y_hi = max(y_hi, gy + glyphs[g, _G_HEIGHT])
        pen += glyphs[g, _G_ADVANCE]
    if x_hi <= x_lo:
        return np.zeros((0, 0), np.uint32), 0, 0
    word = np.zeros((y_hi - y_lo, x_hi - x_lo), np.uint32)
    pen = 0
    for k in range(k0, k0 + count):
        g = first + codes[k]
        start, gh, gw = glyphs[g, _G_START], glyphs[g, _G_HEIGHT], glyphs[g, _G_WIDTH]
        ox = ((pen + 32) >> 6) + glyphs[g, _G_LEFT] - x_lo
        oy = glyphs[g, _G_TOP] - y_lo
        for i in range(gh):
            for j in range(gw):
                s = np.uint32(pixels[start + i * gw + j])
                if s == 0:
                    continue
                t = word[oy + i, ox + j]
                if t == 0:
                    word[oy + i, ox + j] = s
                else:
                    t = t * (np.uint32(255) - s) + np.uint32(128)
                    t = s + (((t >> np.uint32(8)) + t) >> np.uint32(8))
                    word[oy + i, ox + j] = min(t, np.uint32(255))
        pen += glyphs[g, _G_ADVANCE]
    return word, x_lo, y_lo


@numba.njit(**NJIT)
def _placed_word(pixels, glyphs, codes, k0, first, count, x, y):  # pragma: no cover - compiled
    """:func:`_word_mask` of the word starting at code ``k0`` and the image column and row of
    its mask's top-left corner, for a pen start ``x`` and baseline row ``y``."""
    word, x_lo, y_lo = _word_mask(pixels, glyphs, codes, k0, count, first)
    return word, x + x_lo, y + y_lo


@numba.njit(**NJIT)
def _blend255(v, ink, m):  # pragma: no cover - compiled
    """Pillow's ink through a mask: ``DIV255(v * (255 - m) + ink * m)`` (uint32 in, uint32 out)."""
    t = v * (np.uint32(255) - m) + ink * m + np.uint32(128)
    return ((t >> np.uint32(8)) + t) >> np.uint32(8)


@numba.njit(**NJIT)
def _draw_words(out, pixels, glyphs, codes, firsts, lengths, x, y, colors):  # pragma: no cover
    """Draw words into ``out`` (H, W, C) uint8, in place, as Pillow's ``ImageDraw.text`` does.

    ``pixels``, ``glyphs``: an :class:`_Atlas`'s buffers. ``codes`` (uint8): character codes of
    all words, back to back; per word ``w`` (arrays of length n): ``firsts[w]`` its glyph-table
    row of code 0 (glyph row = ``firsts[w] + code``), ``lengths[w]`` its number of characters,
    ``x[w]``, ``y[w]`` the image column of the pen's start and the image row of the baseline,
    ``colors[w]`` the ink (C values). Each word's mask (:func:`_word_mask`) blends the ink
    into the image, clipped to it, as ``ImageDraw.draw_bitmap`` does:
    ``v = DIV255(v * (255 - m) + ink * m)``. Words are drawn in order.
    """
    height, width, channels = out.shape
    k0 = 0
    for w in range(lengths.shape[0]):
        word, x0, y0 = _placed_word(pixels, glyphs, codes, k0, firsts[w], lengths[w], x[w], y[w])
        k0 += lengths[w]
        for i in range(max(0, -y0), min(word.shape[0], height - y0)):
            for j in range(max(0, -x0), min(word.shape[1], width - x0)):
                m = word[i, j]
                if m == 0:
                    continue
                for ch in range(channels):
                    out[y0 + i, x0 + j, ch] = np.uint8(_blend255(
                        np.uint32(out[y0 + i, x0 + j, ch]), np.uint32(colors[w, ch]), m))


@numba.njit(**NJIT)
def _draw_words_gray(out, pixels, glyphs, codes, firsts, lengths, x, y, colors):  # pragma: no cover
    """:func:`_draw_words` on the RGB version of a gray image ``out`` (H, W, 1), converted back
    with Pillow's RGB -> L formula ``(19595 R + 38470 G + 7471 B + 32768) >> 16``; in place.

    Equal to ``to_gray(draw(to_rgb(out)))`` (untouched pixels, R = G = B = v, map back to v
    exactly), at the cost of the touched pixels only: their RGB values live in a scratch image
    written on first touch. ``colors`` (n, 3): RGB inks.
    """
    height, width = out.shape[0], out.shape[1]
    touched = np.zeros((height, width), np.bool_)
    rgb = np.empty((height, width, 3), np.uint8)
    k0 = 0
    for w in range(lengths.shape[0]):
        word, x0, y0 = _placed_word(pixels, glyphs, codes, k0, firsts[w], lengths[w], x[w], y[w])
        k0 += lengths[w]
        for i in range(max(0, -y0), min(word.shape[0], height - y0)):
            row = y0 + i
            for j in range(max(0, -x0), min(word.shape[1], width - x0)):
                m = word[i, j]
                if m == 0:
                    continue
                col = x0 + j
                if not touched[row, col]:
                    touched[row, col] = True
                    for ch in range(3):
                        rgb[row, col, ch] = out[row, col, 0]
                for ch in range(3):
                    rgb[row, col, ch] = np.uint8(_blend255(
                        np.uint32(rgb[row, col, ch]), np.uint32(colors[w, ch]), m))
                lum = (np.uint32(19595) * np.uint32(rgb[row, col, 0])
                       + np.uint32(38470) * np.uint32(rgb[row, col, 1])
                       + np.uint32(7471) * np.uint32(rgb[row, col, 2])
                       + np.uint32(0x8000)) >> np.uint32(16)
                out[row, col, 0] = np.uint8(lum)


@lru_cache(maxsize=256)
def _characters_layout(max_letters: int, top: int, height: int, width: int, s: float):
    """Per-(table entry, image size) constants of :func:`characters_sample`.

    Returns ``(sizes, x_ranges, y_range)``: the Pillow size of each font-scale percentage
    14..top (at ``max(s, 1)``: smaller images draw the 224 px text supersampled); per letter
    count k (0..max_letters) the x range ``(lo, number of values)`` of
    ``randint(round(10 s), W - round(8 s k))``; the y range likewise. An empty range becomes
    ``(lo clipped to the image, 0)``.
    """
    margin = _scaled(CHAR_MARGIN, s)

    def span(lo, hi, size):
        return (lo, hi - lo + 1) if hi >= lo else (max(0, min(lo, size - 1)), 0)

    sizes = tuple(_pillow_font_size(pct / 100.0, max(s, 1.0))
                  for pct in range(CHAR_MIN_SCALE_PCT, top + 1))
    x_ranges = tuple(span(margin, width - int(math.floor(CHAR_ADVANCE * k * s + 0.5)), width)
                     for k in range(max_letters + 1))
    return sizes, x_ranges, span(margin, height - margin, height)


def characters_sample(param, ctx: Context) -> dict:
    """Draw the random words of one image.

    Parameters
    ----------
    param : tuple of (int, int, float)
        ``(max_words, max_letters, max_font_scale)`` (the dermamnist table).
    ctx : Context
        ``ctx.shape`` = ``(H, W, C)``, ``ctx.key`` the image key (:mod:`medmnistc_fast.rng`),
        ``ctx.scale`` = ``min(H, W) / 224`` (s below).

    Returns
    -------
    dict
        ``texts`` (tuple of str), ``sizes`` (tuple of float: Pillow font size in pixels),
        ``x``, ``y`` (int64 ``(n,)``: left end and baseline row of each word, pixels, cv2's
        ``org`` convention), ``colors`` (uint8 ``(n, 3)``: RGB), ``supersample`` (float:
        ``ctx.supersample``, ``224 / min(H, W)`` below 224 px, else 1).
        n = ``randint(1, max_words)``; per word ``randint(3, max_letters)`` uniform lowercase
        letters, font scale ``randint(14, int(max_font_scale * 100)) / 100``, colour channels
        ``randint(0, 255)``, ``x = randint(round(10 s), W - round(8 s * letters))``,
        ``y = randint(round(10 s), H - round(10 s))`` (reference: ``Characters.apply``); an
        empty range (small images, long words) gives its lower end clipped to the image. The
        font scale becomes a Pillow size through the cv2 pixel height
        ``h = round(27 * scale * max(s, 1))`` and :data:`PIL_SIZE_FOR_HEIGHT`. Below 224 px
        the words keep their 224 px size and are drawn on a grid ``1 / s`` times finer, their
        ink averaged over the image's pixels (``supersample``, see :func:`characters_kernel`):
        text a pixel high cannot be drawn, and Pillow's smallest sizes put several times the
        224 px share of ink on the image.

    Notes
    -----
    Every integer above is ``lo + floor(u * count)`` of its own uniform double ``u``, all from
    one ``Generator.random`` call of ``1 + max_words * (7 + max_letters)`` values in a fixed
    layout: n, then per word its letter count, scale, x, y, R, G, B and ``max_letters`` letter
    slots (unused slots and words are skipped). That is uniform up to a relative bias below
    ``count * 2**-53`` (doubles are multiples of 2**-53) and much cheaper than one
    ``Generator.integers`` call per quantity.
    """
    max_words, max_letters, max_scale = int(param[0]), int(param[1]), float(param[2])
    max_letters = max(CHAR_MIN_LETTERS, max_letters)
    top = max(CHAR_MIN_SCALE_PCT, int(max_scale * 100))
    sizes_of, x_ranges, (y_lo, y_count) = _characters_layout(
        max_letters, top, int(ctx.shape[0]), int(ctx.shape[1]), ctx.scale)
    max_words = max(1, max_words)
    n_letters = max_letters - CHAR_MIN_LETTERS + 1
    n_scales = top - CHAR_MIN_SCALE_PCT + 1
    stride = 7 + max_letters
    u = generator(ctx.key).random(1 + max_words * stride).tolist()
    n = 1 + int(u[0] * max_words)
    texts, sizes, xs, ys, colors = [], [], [], [], []
    for i in range(1, 1 + n * stride, stride):
        k = CHAR_MIN_LETTERS + int(u[i] * n_letters)
        sizes.append(sizes_of[int(u[i + 1] * n_scales)])
        x_lo, x_count = x_ranges[k]
        xs.append(x_lo + int(u[i + 2] * x_count))
        ys.append(y_lo + int(u[i + 3] * y_count))
        colors.append((int(u[i + 4] * 256), int(u[i + 5] * 256), int(u[i + 6] * 256)))
        texts.append("".join([_LETTERS[int(v * 26)] for v in u[i + 7:i + 7 + k]]))
    return {"texts": tuple(texts), "sizes": tuple(sizes), "x": np.array(xs, np.int64),
            "y": np.array(ys, np.int64), "colors": np.array(colors, np.uint8),
            "supersample": ctx.supersample}


@numba.njit(**NJIT)
def _draw_words_supersampled(rgb, pixels, glyphs, codes, firsts, lengths, x, y, colors,
                             f):  # pragma: no cover - compiled
    """Words drawn on a grid ``f`` times finer than ``rgb`` (H, W, 3) uint8, in place.

    Each word's coverage mask (:func:`_word_mask`, 0..255 at the fine grid) is placed with
    its pen start and baseline at the fine position of the centre of image pixel ``(x, y)``,
    ``(x + 0.5) f - 0.5``, and averaged over the image's pixels (:func:`_area_mean`, rounded
    half up); the ink goes in through that coverage with Pillow's
    ``DIV255(v * (255 - m) + ink * m)``, word after word.
    """
    height, width = rgb.shape[0], rgb.shape[1]
    k0 = 0
    for w in range(lengths.shape[0]):
        word, x_lo, y_lo = _word_mask(pixels, glyphs, codes, k0, lengths[w], firsts[w])
        k0 += lengths[w]
        if word.size == 0:
            continue
        top = (y[w] + 0.5) * f - 0.5 + _BASELINE_SHIFT + y_lo
        left = (x[w] + 0.5) * f - 0.5 + x_lo
        i0, r_starts, r_band = _cell_weights(height, top, word.shape[0], f)
        j0, c_starts, c_band = _cell_weights(width, left, word.shape[1], f)
        m = _area_mean(word, r_starts, r_band, c_starts, c_band)
        for i in range(m.shape[0]):
            for j in range(m.shape[1]):
                a = min(m[i, j], np.uint32(255))
                if a == 0:
                    continue
                for ch in range(3):
                    rgb[i0 + i, j0 + j, ch] = np.uint8(_blend255(
                        np.uint32(rgb[i0 + i, j0 + j, ch]), np.uint32(colors[w, ch]), a))


def characters_kernel(image: np.ndarray, texts, sizes, x, y, colors,
                      supersample: float = 1.0, out=None) -> np.ndarray:
    """Draw antialiased words with Pillow's bundled font.

    The reference draws with ``cv2.putText(img, text, org, FONT_HERSHEY_DUPLEX, scale, colour,
    1, LINE_AA)``; OpenCV and its font data are not used here. Each word, in order, is drawn
    as ``ImageDraw.text((x, y + 1), text, fill=colour, font=ImageFont.load_default(size),
    anchor="ls")`` would draw it on the whole RGB image (the + 1 aligns Pillow's baseline with
    cv2's ``org`` row), bit for bit, but from per-character coverage masks rendered by Pillow
    once per font size and cached (:func:`_atlas`), composited by a Numba kernel
    (:func:`_draw_words`) with Pillow's glyph-combining and ink-blending arithmetic. The size
    is chosen to match cv2's text (see :data:`PIL_SIZE_FOR_HEIGHT`); matching the reference is
    in distribution, not pixel for pixel.

    Parameters
    ----------
    image : ndarray, shape (H, W, C), uint8
        C = 1 or 3. Gray images are drawn on their RGB version and converted back with Pillow's
        RGB -> L formula, as the reference's L -> RGB -> corrupt -> L does (only the pixels
        under the words are converted: :func:`_draw_words_gray`).
    texts : sequence of str
        Words, printable ASCII (codes 32..126).
    sizes : sequence of float
        Pillow font size of each word, pixels (of the fine grid when ``supersample > 1``).
    x, y : array_like of int, shape (n,)
        Left end and baseline row of each word, pixels of the image.
    colors : array_like of int, shape (n, 3)
        RGB colour of each word, 0..255.
    supersample : float in [1, MAX_SUPERSAMPLE] (1024), default 1
        1: draw on the image's pixels as above. ``f > 1``: draw each word on a grid ``f``
        times finer (its pen start and baseline at the fine position of the centre of pixel
        ``(x, y)``, ``(x + 0.5) f - 0.5``) and average its coverage over the image's pixels,
        then blend the ink as Pillow does (:func:`_draw_words_supersampled`). The registry
        uses ``224 / min(H, W)`` below 224 px, so small images show the 224 px text as it
        would look shrunk to their size.
    out : ndarray, optional
        Where to write: C-contiguous, writeable uint8 of the image's shape, sharing no memory
        with it.

    Returns
    -------
    ndarray, shape (H, W, C), uint8
        ``out`` if given, else a new array.

    Raises
    ------
    ValueError
        If a text has a character outside printable ASCII, or ``supersample`` is not a
        finite number in [1, 1024] (:data:`MAX_SUPERSAMPLE`).
    """
    f = _check_supersample(supersample)
    image = np.ascontiguousarray(image, dtype=np.uint8)
    if out is None:
        out = np.empty_like(image)
    if not len(texts):
        np.copyto(out, image)
    else:
        joined = "".join(texts)
        if not (joined.isascii() and joined.isprintable()):
            raise ValueError(f"texts must be printable ASCII (codes 32..126), got {texts!r}")
        atlas = _atlas(sizes)
        codes = np.frombuffer(joined.encode("ascii"), np.uint8)
        firsts = np.array([atlas.first[size] - _FIRST_CODE for size in sizes], np.int64)
        lengths = np.array([len(t) for t in texts], np.int64)
        xs, ys = np.asarray(x, np.int64), np.asarray(y, np.int64)
        cols = np.asarray(colors, np.uint8)
        if f > 1.0:
            gray = image.shape[2] == 1
            np.copyto(out, image)
            rgb = to_rgb(out)  # a copy for gray images, out itself for RGB
            _draw_words_supersampled(rgb, atlas.pixels, atlas.glyphs, codes, firsts, lengths,
                                     xs, ys, cols, f)
            if gray:  # Pillow's RGB -> L; untouched pixels (R = G = B) map back to themselves
                out[...] = to_gray(rgb)
            return out
        _copy_and_draw(image, out, atlas.pixels, atlas.glyphs, codes, firsts, lengths, xs,
                       ys + _BASELINE_SHIFT, cols)
    return out


@numba.njit(**NJIT)
def _copy_and_draw(image, out, pixels, glyphs, codes, firsts, lengths, x, y,
                   colors):  # pragma: no cover - compiled
    """``out`` = ``image`` with the words drawn (:func:`_draw_words`, or
    :func:`_draw_words_gray` for one channel): the copy and the drawing in one call without
    the GIL."""
    src, dst = image.reshape(image.size), out.reshape(out.size)
    for i in range(src.size):
        dst[i] = src[i]
    if out.shape[2] == 1:
        _draw_words_gray(out, pixels, glyphs, codes, firsts, lengths, x, y, colors)
    else:
        _draw_words(out, pixels, glyphs, codes, firsts, lengths, x, y, colors)


#: ``characters`` (reference ``Characters``): the table's (maximum words, maximum letters,
#: maximum OpenCV font scale); constants :data:`CHAR_MIN_LETTERS` ... :data:`CV2_HEIGHT_PER_SCALE`.
CHARACTERS = Kind("characters", characters_sample, characters_kernel, random=True, into=True)
