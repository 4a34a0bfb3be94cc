"""The digital-pathology corruption suite (Patchcamelyon-C / LocalTCT-C style).

Nine corruptions with five severities, under the dataset keys ``pathology96`` (PatchCamelyon,
96 px patches) and ``pathology224`` (the 224 px cytology configuration); their tables live in
:data:`medmnistc_fast.registry.TABLES`. Five of them are MedMNIST-C kinds with other tables
(``pixelate``, ``jpeg_compression``, ``defocus_blur``, ``motion_blur``, ``saturate``; spatial
parameters scale with ``ctx.scale = min(H, W) / reference_size``, 96 or 224). This module holds
the four that differ, collected in :data:`PATHOLOGY_KINDS`:

``brightness``
    HSV value shift: ``V = clip(V + amount, 0, 1)`` (not Pillow's brightness of MedMNIST-C).
``hue``
    HSV hue shift: ``H = H + amount``, minus 1 when above 1 (cyclic).
``marking``
    A dark brown-black ink blot of (width, height) pixels at the reference size, pasted at a fixed
    top-left corner (:data:`MARKING_POSITIONS`); :data:`MARKING_RANDOM` is the same with a random
    position per image.
``bubble``
    ``out = x + mask * r * (bubble - x)`` toward a synthetic air bubble covering about 65 % of
    the patch.

The HSV corruptions repeat scikit-image's ``rgb2hsv`` / ``hsv2rgb`` float64 arithmetic per pixel
in one C++ kernel (:func:`hsv_shift_kernel`; bit-identical to the NumPy pipeline
``x / 255 -> rgb2hsv -> shift one channel -> hsv2rgb -> clip(0, 1) * 255 -> truncate``).

The original benchmark's ink blot and bubble photograph cannot be used (its repository has no
licence), so both are synthesised here, deterministically, by analytic formulas evaluated at the
requested size (no stored asset, no random generator whose stream could change between NumPy
versions: the few pseudo-random coefficients come from SplitMix64 of fixed counters):

* the blot (:func:`blot`) is a star-shaped region ``rho <= R(theta)`` whose radius is a Fourier
  series with 16 harmonics of amplitude ``0.2 / k`` (coefficients from SplitMix64, seed
  :data:`BLOT_SEED`), scaled so that its bounding box is the requested width x height; it fills
  about 75 % of that box, so at the tabulated sizes its area is about ``(s / 10) ** 2`` of the
  image at severity s, the original blot's (within 3 % at every level of both tables except the 10 x 10 px
  level-1 blot at 96 px, which has 84 px instead of 92). Its colour is a smooth random shade mapped
  linearly between the darkest ink (15, 10, 8) and the mean ink (34, 21, 18) (shade normalised
  to min 0 and mean 1 on every rendering), with a few lighter pixels on parts of the rim.
* the bubble (:func:`bubble_layer`) is an ellipse centred at (0.48 W, 0.52 H) with semi-axes
  (0.46 W, 0.45 H) -- 65.0 % of the patch -- with a light near-neutral interior (about (228,
  229, 231)) and a soft dark double rim: a line of darkest value (29, 29, 30) at 1.2 % of the
  patch side inside the edge and a fainter one at 4.5 %; the mask is 1 inside the ellipse with
  a one-pixel soft edge.

Gray (1-channel) inputs never occur in the pathology data but are accepted: they go through
RGB and back to L with Pillow's luma formula (:func:`~._spec.to_gray`), as in MedMNIST-C.

References
----------
Y. Zhang, Y. Sun, H. Li, S. Zheng, C. Zhu, L. Yang, "Benchmarking the Robustness of Deep Neural
Networks to Common Corruptions in Digital Pathology", MICCAI 2022, arXiv:2206.14973 (the suite,
its nine corruptions and their severity parameters).
S. van der Walt et al., scikit-image ``skimage.color.rgb2hsv`` / ``hsv2rgb`` (0.22-0.26).
G. L. Steele, D. Lea, C. H. Flood, "Fast splittable pseudorandom number generators", OOPSLA 2014.
"""
from __future__ import annotations

import math
import numbers
from functools import lru_cache

import numba
import numpy as np

from .._config import NJIT
from .._validation import as_hwc, check_int, check_int_pair, check_seed, to_float
from ..rng import GAMMA, _splitmix64_array, generator, key_from_seed
from ._hsv import HSV_CHANNELS, hsv_shift_kernel  # noqa: F401 (re-exported)
from ._spec import Context, Kind, to_gray, to_rgb

__all__ = [
    "PATHOLOGY_KINDS", "HSV_BRIGHTNESS", "HUE", "MARKING", "MARKING_RANDOM", "PATHOLOGY_BUBBLE",
    "HSV_CHANNELS", "MARKING_POSITIONS", "BLOT_SEED", "SHADE_CAP",
    "hsv_shift_kernel", "blot", "bubble_layer",
    "marking_sample", "marking_random_sample", "marking_kernel", "bubble_kernel",
    "hsv_shift", "marking", "pathology_bubble", "suite_for_size",
]

# ---------------------------------------------------------------------------------------------
# HSV shifts (brightness = V, saturate = S, hue = H)
# ---------------------------------------------------------------------------------------------

def _sample_amount(param, ctx: Context) -> dict:
    """``{"amount": float(param)}``: the table entry is the shift itself (unitless, on [0, 1])."""
    return {"amount": float(param)}


def _value_kernel(image, *, amount, out=None):
    return hsv_shift_kernel(image, 2, float(amount), out=out)


def _hue_kernel(image, *, amount, out=None):
    return hsv_shift_kernel(image, 0, float(amount), out=out)


#: ``brightness`` of the suite: HSV V += .05 .. .25 (both configurations; Zhang et al. 2022).
HSV_BRIGHTNESS = Kind("brightness", _sample_amount, _value_kernel, random=False, into=True)
#: ``hue``: HSV H += .02 .. .10 at 96 px, .03 .. .15 at 224 px (Zhang et al. 2022; the 224 px
#: values from a figure of the paper), cyclic.
HUE = Kind("hue", _sample_amount, _hue_kernel, random=False, into=True)


# ---------------------------------------------------------------------------------------------
# Deterministic pseudo-random coefficients
# ---------------------------------------------------------------------------------------------

def _uniforms(seed: int, n: int) -> np.ndarray:
    """``n`` floats in [-1, 1) from the SplitMix64 counter stream of ``seed`` (element j uses
    SplitMix64's finaliser of ``seed + (j + 1) * GAMMA``, top 53 bits); identical on every
    platform and NumPy version, unlike a ``numpy.random`` stream."""
    with np.errstate(over="ignore"):
        z = _splitmix64_array(np.uint64(seed) + np.arange(n, dtype=np.uint64) * np.uint64(GAMMA))
    return (z >> np.uint64(11)).astype(np.float64) * (2.0 / 2.0**53) - 1.0


def _round_half_up(x: float) -> int:
    return int(math.floor(x + 0.5))


def _check_side(value, name: str) -> int:
    """``value`` as an int >= 1 (a size in pixels); bools, floats and strings are rejected."""
    return check_int(value, name, 1)


# ---------------------------------------------------------------------------------------------
# marking: the ink blot
# ---------------------------------------------------------------------------------------------

#: Seed of the blot's outline and shading coefficients (any fixed value; this one gives a blot
#: filling about 75 % of its bounding box, so that its area is about (s/10)^2 of the image at
#: severity s, as the original blot's).
BLOT_SEED = 3
#: Harmonics 2..17 of the outline radius, amplitude ``_BLOT_AMPLITUDE / k``.
_BLOT_HARMONICS = np.arange(2, 18)
_BLOT_AMPLITUDE = 0.2
#: Darkest and mean ink colour, RGB 0..255: those of the original benchmark's blot asset
#: (``blots.npy`` of github.com/superjamessyx/robustness_benchmark, not used here): darkest
#: about (15, 10, 8), mean about (34, 21, 18).
INK_DARKEST = (15.0, 10.0, 8.0)
INK_MEAN = (34.0, 21.0, 18.0)
#: Largest normalised shade: the lightest ink is ``INK_DARKEST + 7 (INK_MEAN - INK_DARKEST)`` =
#: (148, 87, 78). Our choice, above the lightest rim pixel of every blot the registry draws
#: ((144, 85, 76), at 7 x 8 px; 3,303 sizes checked), so it only binds on boxes far thinner than
#: wide, whose few ink pixels all sit on the rim band (a 100 x 1 box reached white without it).
SHADE_CAP = 7.0
#: Top-left corner (x = column, y = row) of the blot, pixels at the reference size, by reference
#: size: the fixed paste position of the original benchmark's code (x = 17, y = 10 at 96 px;
#: 27, 13 at 224).
MARKING_POSITIONS = {96: (17, 10), 224: (27, 13)}
#: Largest blot side accepted by :func:`marking` (pixels). The blot is rendered as a full
#: height x width array with 4 x 4 sub-pixel samples per pixel, about 2 s for 1024 x 1024 on one
#: core the first time (then cached per size); 4096 x 4096 took about a minute.
MAX_MARKING = 1024
#: Sub-pixel samples per axis used to compute the blot's pixel coverage.
_BLOT_SUPERSAMPLE = 4


@lru_cache(maxsize=1)
def _blot_geometry():
    """Outline coefficients and the outline's bounding box in its own coordinates.

    Returns (a, b, box, waves): radius ``R(t) = 1 + sum_k a_k cos(k t) + b_k sin(k t)``;
    box = (xmin, xmax, ymin, ymax) of the curve ``R(t) (cos t, sin t)`` (sampled at 8192 angles);
    waves = (kx, ky, phase, weight) of five plane waves making the smooth ink shade.
    """
    k = _BLOT_HARMONICS.astype(np.float64)
    u = _uniforms(BLOT_SEED, 2 * k.size + 20)
    a = _BLOT_AMPLITUDE * u[: k.size] / k
    b = _BLOT_AMPLITUDE * u[k.size: 2 * k.size] / k
    t = np.linspace(0.0, 2.0 * np.pi, 8192, endpoint=False)
    c, s = np.cos(t), np.sin(t)
    r = _blot_radius(c, s, a, b)
    box = ((r * c).min(), (r * c).max(), (r * s).min(), (r * s).max())
    w = u[2 * k.size:].reshape(4, 5)
    waves = (2.5 * w[0], 2.5 * w[1], np.pi * w[2], 0.6 + 0.4 * w[3])
    return a, b, box, waves


def _unit_direction(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """``exp(i theta)`` of the points (x, y), as complex128 (1 at the origin)."""
    rho = np.hypot(x, y)
    safe = np.where(rho > 0, rho, 1.0)
    return np.where(rho > 0, x / safe, 1.0) + 1j * (y / safe)


def _blot_radius(c: np.ndarray, s: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``R(theta)`` from ``c = cos(theta)``, ``s = sin(theta)``: the harmonics ``cos(k theta)``,
    ``sin(k theta)`` are the powers of ``exp(i theta)`` (no per-harmonic trigonometry, O(N)
    memory)."""
    z = c + 1j * s
    zk = z * z
    r = np.ones(np.shape(c))
    for ak, bk in zip(a, b):  # k = 2, 3, ...
        r += ak * zk.real + bk * zk.imag
        zk = zk * z
    return r


def _to_outline(pixel, n: int, lo: float, hi: float):
    # Pixel coordinate in [-0.5, n + 0.5] -> outline coordinate in [lo, hi].
    return lo + (pixel + 0.5) / (n + 1.0) * (hi - lo)


#: Pixel rows of the blot rendered per block (bounds the memory for large images).
_BLOT_BLOCK_ROWS = 32


@lru_cache(maxsize=64, typed=True)
def blot(width: int, height: int):
    """The synthetic ink blot rendered in a ``height`` x ``width`` pixel box.

    The outline ``rho <= R(theta)`` (see the module docstring) is stretched so that its bounding
    box spans the pixel box plus half a pixel on every side; a pixel is ink when at least half of
    its 4 x 4 sub-pixel samples are inside, and on each border row and column of the box the
    pixel of largest coverage is always ink, so the blot's bounding box is exactly ``width`` x
    ``height``. Colour: ``INK_DARKEST + shade * (INK_MEAN - INK_DARKEST)``, rounded half up,
    where ``shade`` is a smooth field (five plane waves plus a lighter band on parts of the outer
    12 % of the radius) at pixel centres, normalised over the ink pixels to minimum 0 and mean 1;
    capped at :data:`SHADE_CAP`; so the darkest ink pixel is (15, 10, 8), the mean is
    (34, 21, 18) up to rounding (slightly below it where the cap binds), and a few rim pixels are
    lighter: up to (144, 85, 76) at the sizes the registry draws, never beyond (148, 87, 78).
    A 1 x 1 box (the level-1 box below 15 px for pathology96, 13 px for pathology224) holds
    one ink pixel, which cannot be both darkest and mean: it takes the mean ink (34, 21, 18).

    Deterministic: the same (width, height) gives the same arrays in every process (a pixel
    exactly on the coverage threshold could in principle flip with a different libm).

    Parameters
    ----------
    width, height : int, >= 1
        Box size in pixels.

    Returns
    -------
    mask : ndarray, shape (height, width), bool, read-only
    colour : ndarray, shape (height, width, 3), uint8, read-only
        Ink colour (meaningful where ``mask``).

    Raises
    ------
    TypeError
        ``width`` or ``height`` not an int (bools and floats included).
    ValueError
        ``width`` or ``height`` below 1.
    """
    width, height = _check_side(width, "width"), _check_side(height, "height")
    a, b, (xmin, xmax, ymin, ymax), (kx, ky, phase, weight) = _blot_geometry()
    n = _BLOT_SUPERSAMPLE
    sub = (np.arange(n) + 0.5) / n
    # Sub-pixel sample coordinates in the outline's frame.
    xs = _to_outline(np.arange(width)[:, None] + sub[None, :], width, xmin, xmax).reshape(-1)
    coverage = np.empty((height, width))
    for r0 in range(0, height, _BLOT_BLOCK_ROWS):
        rows = np.arange(r0, min(height, r0 + _BLOT_BLOCK_ROWS))
        ys = _to_outline(rows[:, None] + sub[None, :], height, ymin, ymax).reshape(-1)
        xx, yy = np.meshgrid(xs, ys)
        z = _unit_direction(xx, yy)
        inside = np.hypot(xx, yy) <= _blot_radius(z.real, z.imag, a, b)
        coverage[rows] = inside.reshape(rows.size, n, width, n).mean(axis=(1, 3))
    mask = coverage >= 0.5
    mask[0, np.argmax(coverage[0])] = True
    mask[-1, np.argmax(coverage[-1])] = True
    mask[np.argmax(coverage[:, 0]), 0] = True
    mask[np.argmax(coverage[:, -1]), -1] = True
    # Shade at pixel centres; the rim band's angular modulation is cos(3 theta + 1).
    px, py = np.meshgrid(_to_outline(np.arange(width) + 0.5, width, xmin, xmax),
                         _to_outline(np.arange(height) + 0.5, height, ymin, ymax))
    z = _unit_direction(px, py)
    rel = np.hypot(px, py) / _blot_radius(z.real, z.imag, a, b)
    shade = sum(wt * np.cos(fx * px + fy * py + ph)
                for fx, fy, ph, wt in zip(kx, ky, phase, weight))
    lobes = np.maximum(0.0, (z**3 * np.exp(1j)).real)
    shade = shade + 6.0 * np.clip((rel - 0.88) / 0.12, 0.0, 1.0) ** 2 * lobes
    vals = shade[mask]
    lo, mean = vals.min(), vals.mean()
    norm = (shade - lo) / (mean - lo) if mean > lo else np.ones_like(shade)
    norm = np.minimum(norm, SHADE_CAP)
    dark, avg = np.array(INK_DARKEST), np.array(INK_MEAN)
    colour = np.clip(np.floor(dark + norm[..., None] * (avg - dark) + 0.5), 0, 255).astype(np.uint8)
    mask.setflags(write=False)
    colour.setflags(write=False)
    return mask, colour


def _marking_size(param, ctx: Context):
    w, h = param
    s = ctx.scale
    return max(1, _round_half_up(w * s)), max(1, _round_half_up(h * s))


def marking_sample(param, ctx: Context) -> dict:
    """Blot size and fixed position for one image (deterministic: ``ctx.key`` is ignored).

    A sampler of the registry: ``param`` and ``ctx`` are not checked.

    Parameters
    ----------
    param : tuple of (int, int)
        (width, height) of the blot in pixels at the reference size (registry table
        ``marking``: (10, 10) .. (54, 57) at 96 px, (24, 26) .. (126, 135) at 224). The
        original blot's sizes are known as "about 10x10 .. 57x54" and "26x24 .. 135x126"
        without saying which side comes first; they are read here as height x width (NumPy's
        (H, W) order), so the blots are slightly taller than wide. The area, about
        ``(s / 10) ** 2`` of the image, is the same either way.
    ctx : Context
        ``ctx.scale = min(H, W) / reference_size``; ``ctx.reference_size`` (96 or 224) selects the
        top-left corner in :data:`MARKING_POSITIONS`.

    Returns
    -------
    dict
        ``width``, ``height``: ``max(1, round(w * scale))``, ``max(1, round(h * scale))``
        (round half up); ``x``, ``y``: the corner scaled the same way (pixels).
    """
    width, height = _marking_size(param, ctx)
    x0, y0 = MARKING_POSITIONS[int(ctx.reference_size)]
    s = ctx.scale
    return {"width": width, "height": height, "x": _round_half_up(x0 * s),
            "y": _round_half_up(y0 * s)}


def marking_random_sample(param, ctx: Context) -> dict:
    """As :func:`marking_sample`, with the top-left corner uniform over the positions that keep
    the blot inside the image (``x`` in ``0..W - width``, ``y`` in ``0..H - height``), drawn from
    ``ctx.key``. Along a side where the blot is larger than the image, over the positions that
    keep the image inside the blot's box (``x`` in ``W - width..0``), so that some ink always
    shows (a corner fixed at 0 would show only the box's empty corner)."""
    width, height = _marking_size(param, ctx)
    return _random_corner(ctx.key, ctx.shape, width, height)


def _random_corner(key: int, shape, width: int, height: int) -> dict:
    g = generator(key)
    dx, dy = shape[1] - width, shape[0] - height
    x = int(g.integers(min(0, dx), max(0, dx), endpoint=True))
    y = int(g.integers(min(0, dy), max(0, dy), endpoint=True))
    return {"width": width, "height": height, "x": x, "y": y}


def marking_kernel(image: np.ndarray, *, width: int, height: int, x: int, y: int) -> np.ndarray:
    """Replace the pixels under the blot by its ink colour.

    A kernel: ``image``, ``x`` and ``y`` are not checked (:func:`marking` checks them and is
    the function to call); only ``width`` and ``height`` are, by :func:`blot`.

    Parameters
    ----------
    image : ndarray, shape (H, W, C), uint8
        C = 1 or 3, C-contiguous; never modified.
    width, height : int, >= 1
        Blot box in pixels (:func:`blot`).
    x, y : int
        Top-left column and row of the box; any part outside the image is cropped.

    Returns
    -------
    ndarray, shape (H, W, C), uint8
        New array. For C = 1 the ink pixels get the L value of their colour (Pillow's luma).
    """
    mask, colour = blot(int(width), int(height))
    out = np.array(image, copy=True, order="C")
    rows, cols = image.shape[:2]
    x, y = int(x), int(y)
    r0, r1 = max(0, y), min(rows, y + int(height))
    c0, c1 = max(0, x), min(cols, x + int(width))
    if r0 >= r1 or c0 >= c1:
        return out
    ink = colour if image.shape[2] == 3 else _gray_ink(int(width), int(height))
    _paste(out, mask, ink, r0, r1, c0, c1, y, x)
    return out


@lru_cache(maxsize=64)
def _gray_ink(width: int, height: int) -> np.ndarray:
    gray = to_gray(np.ascontiguousarray(blot(int(width), int(height))[1]))
    gray.setflags(write=False)
    return gray


@numba.njit(**NJIT)
def _paste(out, mask, ink, r0, r1, c0, c1, y, x):  # pragma: no cover - compiled
    # out[r, c] = ink[r - y, c - x] where mask, for r in r0..r1-1, c in c0..c1-1 (in place).
    channels = out.shape[2]
    for r in range(r0, r1):
        for c in range(c0, c1):
            if mask[r - y, c - x]:
                for k in range(channels):
                    out[r, c, k] = ink[r - y, c - x, k]


#: ``marking`` of the suite: fixed top-left corner (:data:`MARKING_POSITIONS`; registry entries
#: use it).
MARKING = Kind("marking", marking_sample, marking_kernel, random=False)
#: Variant with a uniformly random corner per image (seeded through the image key). Not in the
#: registry tables, so ``corrupt`` and ``generate`` always use the fixed corner; the training
#: augmentation (:class:`medmnistc_fast.augment.AugMedMNISTC` with a pathology suite) uses it,
#: and :func:`medmnistc_fast.functional.marking` with ``position=None`` and a ``seed`` gives it
#: for one image (``size`` in pixels of that image; the registry scales the table's sizes from
#: the suite's 96 or 224 px).
MARKING_RANDOM = Kind("marking", marking_random_sample, marking_kernel, random=True)


# ---------------------------------------------------------------------------------------------
# bubble
# ---------------------------------------------------------------------------------------------

#: Ellipse centre and semi-axes as fractions of (W, H): pi * 0.46 * 0.45 = 65.0 % of the patch,
#: the share the original benchmark's photographed bubble (``bubbles.npy``, not used) covers.
BUBBLE_CENTRE = (0.48, 0.52)
BUBBLE_AXES = (0.46, 0.45)
#: Interior colour, RGB 0..255 (the original bubble's near-neutral light gray, about 229),
#: brightened by up to ``_BUBBLE_GLOW`` towards the centre.
BUBBLE_INTERIOR = (227.0, 228.0, 230.0)
_BUBBLE_GLOW = 3.0
#: Darkest rim colour (the original bubble's minimum, about 29/255).
BUBBLE_RIM = (29.0, 29.0, 30.0)
#: Rim lines (distance inside the edge, Gaussian width, darkness 0..1), distances and widths as
#: fractions of min(H, W) (1.2 % = 1.15 px at 96 px): the original bubble's dark double-line
#: rim, approximated.
_BUBBLE_LINES = ((0.012, 0.010, 1.0), (0.045, 0.007, 0.7))


@lru_cache(maxsize=32, typed=True)
def bubble_layer(height: int, width: int):
    """The synthetic bubble image and its blending mask at ``height`` x ``width`` pixels.

    Geometry relative to the image (so it scales to any size and aspect): ellipse centre
    :data:`BUBBLE_CENTRE`, semi-axes :data:`BUBBLE_AXES` (fractions of W and H). With ``d`` the
    distance in pixels from a pixel centre to the ellipse (first-order: ``(1 - rho) / |grad rho|``
    with ``rho`` the normalised elliptical radius; positive inside) and ``S = min(H, W)``:

    * mask = ``clip(0.5 + d, 0, 1)`` (one-pixel soft edge);
    * darkness ``D = max_i a_i exp(-(d - c_i S)^2 / (2 (w_i S)^2))`` over the two lines of
      ``_BUBBLE_LINES`` (widths at least 0.5 px);
    * bubble = ``(1 - D) * interior + D * BUBBLE_RIM``, interior = :data:`BUBBLE_INTERIOR` +
      ``3 (1 - rho^2)``, rounded half up to uint8.

    Parameters
    ----------
    height, width : int, >= 1
        Image size in pixels.

    Returns
    -------
    bubble : ndarray, shape (height, width, 3), uint8, read-only
    mask : ndarray, shape (height, width), float64 in [0, 1], read-only

    Raises
    ------
    TypeError
        ``height`` or ``width`` not an int (bools and floats included).
    ValueError
        ``height`` or ``width`` below 1.
    """
    height, width = _check_side(height, "height"), _check_side(width, "width")
    side = min(height, width)
    cx, cy = BUBBLE_CENTRE[0] * width, BUBBLE_CENTRE[1] * height
    ax, ay = BUBBLE_AXES[0] * width, BUBBLE_AXES[1] * height
    u = (np.arange(width) + 0.5 - cx) / ax
    v = (np.arange(height) + 0.5 - cy) / ay
    uu, vv = np.meshgrid(u, v)
    rho = np.hypot(uu, vv)
    grad = np.hypot(uu / ax, vv / ay) / np.maximum(rho, 1e-12)
    d = (1.0 - rho) / np.maximum(grad, 1e-12)
    mask = np.clip(0.5 + d, 0.0, 1.0)
    dark = np.zeros_like(d)
    for centre, w, strength in _BUBBLE_LINES:
        sigma = max(0.5, w * side)
        dark = np.maximum(dark, strength * np.exp(-((d - centre * side) ** 2) / (2 * sigma**2)))
    interior = np.array(BUBBLE_INTERIOR) + _BUBBLE_GLOW * np.clip(1.0 - rho**2, 0.0, 1.0)[..., None]
    img = (1.0 - dark[..., None]) * interior + dark[..., None] * np.array(BUBBLE_RIM)
    bubble = np.clip(np.floor(img + 0.5), 0, 255).astype(np.uint8)
    bubble.setflags(write=False)
    mask.setflags(write=False)
    return bubble, mask


@numba.njit(**NJIT)
def _blend(image, bubble, mask, strength):  # pragma: no cover - compiled
    # out = trunc(x + mask * r * (bubble - x)) in float64, per element of an RGB image.
    src = image.reshape(-1)
    bub = bubble.reshape(-1)
    alpha = mask.reshape(-1)
    out = np.empty_like(image)
    dst = out.reshape(-1)
    for p in range(alpha.size):
        a = alpha[p] * strength
        for k in range(3 * p, 3 * p + 3):
            x = np.float64(src[k])
            dst[k] = np.uint8(np.int32(x + a * (np.float64(bub[k]) - x)))
    return out


def _sample_strength(param, ctx: Context) -> dict:
    """``{"strength": r}`` with r the table entry (.1, .3, .5, .7, .9; Zhang et al. 2022)."""
    return {"strength": float(param)}


def bubble_kernel(image: np.ndarray, *, strength: float) -> np.ndarray:
    """Blend toward the synthetic bubble: ``out = x + mask * r * (bubble - x)``.

    A kernel: nothing is checked (a ``strength`` outside [0, 1] or NaN gives wrapped or zero
    pixels, a 2-D image an IndexError); :func:`pathology_bubble` checks its arguments and is
    the function to call.

    Parameters
    ----------
    image : ndarray, shape (H, W, C), uint8
        C = 1 or 3, C-contiguous; never modified. C = 1 goes through RGB and back to L.
    strength : float, in [0, 1]
        r; 0 leaves the image unchanged, 1 replaces the masked region by the bubble.

    Returns
    -------
    ndarray, shape (H, W, C), uint8
        New array; the blend is computed in float64 and truncated toward zero (as every float
        path of the suite ends with a truncating ``astype(np.uint8)``), so ``r = 1`` gives the
        bubble exactly where the mask is 1.
    """
    rgb = to_rgb(image)
    bubble, mask = bubble_layer(int(image.shape[0]), int(image.shape[1]))
    out = _blend(rgb, bubble, mask, float(strength))
    return to_gray(out) if image.shape[2] == 1 else out


#: ``bubble`` of the suite (r = .1, .3, .5, .7, .9 in both configurations; Zhang et al. 2022).
PATHOLOGY_BUBBLE = Kind("bubble", _sample_strength, bubble_kernel, random=False)

#: The pathology suite's kinds whose behaviour differs from the MedMNIST-C kind of the same name
#: (looked up by :func:`medmnistc_fast.corruptions.kind_of`); the other five corruptions
#: (pixelate, jpeg_compression, defocus_blur, motion_blur, saturate) use the MedMNIST-C kinds.
PATHOLOGY_KINDS = {
    "brightness": HSV_BRIGHTNESS,
    "hue": HUE,
    "marking": MARKING,
    "bubble": PATHOLOGY_BUBBLE,
}


def suite_for_size(height: int, width: int) -> str:
    """The pathology configuration whose reference size is nearer to ``min(height, width)``.

    ``"pathology96"`` up to 160 px (the midpoint of 96 and 224), ``"pathology224"`` above. The
    original benchmark accepts only exactly 96 or 224 px; here either table works on any size,
    its spatial parameters scaled by ``min(H, W) / reference_size``.

    Parameters
    ----------
    height, width : int, >= 1
        Image size in pixels.

    Returns
    -------
    str
        ``"pathology96"`` or ``"pathology224"``.

    Raises
    ------
    TypeError
        ``height`` or ``width`` not an int (bools and floats included).
    ValueError
        ``height`` or ``width`` below 1.
    """
    side = min(_check_side(height, "height"), _check_side(width, "width"))
    return "pathology96" if side <= 160 else "pathology224"


# ---------------------------------------------------------------------------------------------
# Functional layer (explicit parameters in pixels of this image; re-exported by
# medmnistc_fast.functional)
# ---------------------------------------------------------------------------------------------

def _check_real(value, name: str, lo: float, hi: float) -> float:
    if not isinstance(value, (numbers.Real, np.floating, np.integer)) or isinstance(
            value, (bool, np.bool_)):
        raise TypeError(f"{name} must be a real number in [{lo:g}, {hi:g}]; got {value!r} "
                        f"({type(value).__name__})")
    v = to_float(value)
    if not (lo <= v <= hi):  # also rejects NaN
        raise ValueError(f"{name} must be a real number in [{lo:g}, {hi:g}]; got {value!r}")
    return v


def hsv_shift(image, channel, amount: float) -> np.ndarray:
    """Add ``amount`` to one HSV channel (scikit-image ``rgb2hsv`` / ``hsv2rgb``, float64).

    Parameters
    ----------
    image : ndarray, shape (H, W), (H, W, 1) or (H, W, 3), uint8
        H, W >= 8. Gray images go through RGB and back to L (Pillow's luma). Never modified.
    channel : {"hue", "saturation", "value"} or {"h", "s", "v"}
        Case-insensitive (``"V"`` and ``"Value"`` work too).
    amount : float, in [-1, 1]
        Shift on the [0, 1] channel scale. Saturation and value are clipped to [0, 1]; hue is
        cyclic (1 is subtracted above 1, added below 0), in float64 as scikit-image computes
        it, so shifts a whole turn apart (``0.3`` and ``-0.7``; ``1.0`` and ``0``) can round to
        outputs one gray level apart on some pixels (of 4,096 random colours: 294 for 0.3
        against -0.7, 1,599 for 1.0 against 0; never more than one level).

    Returns
    -------
    ndarray, same shape as ``image``, uint8
        ``clip(hsv2rgb(...), 0, 1) * 255`` truncated.

    Raises
    ------
    TypeError
        ``image`` not a uint8 ndarray; ``channel`` not a str; ``amount`` not a real number.
    ValueError
        Bad image shape; ``channel`` not one of the names above; ``amount`` outside [-1, 1] or
        NaN.

    Notes
    -----
    The pathology suite's ``brightness``, ``saturate`` and ``hue`` are
    ``hsv_shift(image, "value" | "saturation" | "hue", table entry)``
    (Zhang et al., MICCAI 2022, arXiv:2206.14973).

    References
    ----------
    .. [1] Y. Zhang, Y. Sun, H. Li, S. Zheng, C. Zhu, L. Yang, "Benchmarking the Robustness of
       Deep Neural Networks to Common Corruptions in Digital Pathology", MICCAI 2022,
       arXiv:2206.14973 (the brightness, saturate and hue corruptions).
    .. [2] scikit-image, ``skimage.color.rgb2hsv`` / ``hsv2rgb`` (the float64 arithmetic
       reproduced bit for bit).
    """
    hwc = as_hwc(image)
    if not isinstance(channel, str):
        raise TypeError(f"channel must be a str, one of {sorted(HSV_CHANNELS)}; got {channel!r} "
                        f"({type(channel).__name__})")
    if channel.lower() not in HSV_CHANNELS:
        raise ValueError(f"channel must be one of {sorted(HSV_CHANNELS)}; got {channel!r}")
    a = _check_real(amount, "amount", -1.0, 1.0)
    return hsv_shift_kernel(hwc, HSV_CHANNELS[channel.lower()], a).reshape(image.shape)


def marking(image, size, position=None, *, seed=None) -> np.ndarray:
    """Paste the synthetic ink blot (a pen or ink mark on the slide).

    Parameters
    ----------
    image : ndarray, shape (H, W), (H, W, 1) or (H, W, 3), uint8
        H, W >= 8. Never modified.
    size : (int, int)
        (width, height) of the blot's bounding box in pixels, each in 1..1024
        (:data:`MAX_MARKING`; the first call at a size renders the blot, about 2 s at
        1024 x 1024, then it is cached).
    position : (int, int) or None
        (x, y) = column and row of the box's top-left corner in pixels, each with absolute
        value <= 2**30 (the part outside the image is cropped); None draws it uniformly so
        that the blot lies inside the image (along a side where the blot is larger, so that
        the image lies inside its box).
        The pathology suite uses (17, 10) at 96 px and (27, 13) at 224 px.
    seed : int >= 0 or None
        For ``position=None``: fixes the drawn position (None: fresh OS entropy). Validated,
        and otherwise unused, with an explicit position.

    Returns
    -------
    ndarray, same shape as ``image``, uint8

    Raises
    ------
    TypeError
        ``image`` not a uint8 ndarray; ``size`` or ``position`` not a pair of ints; ``seed``
        not an int or None.
    ValueError
        Bad image shape; a ``size`` side outside 1..1024, a ``position`` coordinate beyond
        2**30; negative ``seed``.

    References
    ----------
    .. [1] Y. Zhang, Y. Sun, H. Li, S. Zheng, C. Zhu, L. Yang, "Benchmarking the Robustness of
       Deep Neural Networks to Common Corruptions in Digital Pathology", MICCAI 2022,
       arXiv:2206.14973 (the marking corruption: the original's blot sizes, position and ink
       colours; the blot itself is synthesised here, see
       :func:`medmnistc_fast.corruptions.pathology.blot`).
    """
    hwc = as_hwc(image)
    w, h = check_int_pair(size, "size", 1, MAX_MARKING)
    seed = check_seed(seed)  # checked even when unused, like every other argument
    if position is None:
        values = _random_corner(key_from_seed(seed), hwc.shape, w, h)
    else:
        x, y = check_int_pair(position, "position", -2 ** 30, 2 ** 30)
        values = {"width": w, "height": h, "x": x, "y": y}
    return marking_kernel(hwc, **values).reshape(image.shape)


def pathology_bubble(image, strength: float) -> np.ndarray:
    """Blend toward the synthetic air bubble: ``out = x + mask * strength * (bubble - x)``.

    Parameters
    ----------
    image : ndarray, shape (H, W), (H, W, 1) or (H, W, 3), uint8
        H, W >= 8. Never modified.
    strength : float, in [0, 1]
        The suite's r (.1, .3, .5, .7, .9 for severities 1..5).

    Returns
    -------
    ndarray, same shape as ``image``, uint8
        A new array. See :func:`medmnistc_fast.corruptions.pathology.bubble_kernel` (float64,
        truncated) and :func:`medmnistc_fast.corruptions.pathology.bubble_layer` (geometry:
        an ellipse covering 65.0 % of the image, as the original's photographed bubble).

    Raises
    ------
    TypeError
        ``image`` not a uint8 ndarray; ``strength`` not a real number.
    ValueError
        Bad image shape; ``strength`` outside [0, 1] or NaN.

    References
    ----------
    .. [1] Y. Zhang, Y. Sun, H. Li, S. Zheng, C. Zhu, L. Yang, "Benchmarking the Robustness of
       Deep Neural Networks to Common Corruptions in Digital Pathology", MICCAI 2022,
       arXiv:2206.14973 (the bubble corruption, its blend formula and r; the bubble itself is
       synthesised here, not the original's photograph).
    """
    hwc = as_hwc(image)
    r = _check_real(strength, "strength", 0.0, 1.0)
    return bubble_kernel(hwc, strength=r).reshape(image.shape)
