"""Functional layer: each corruption with explicit physical parameters, in pixels of *this* image.

No tables, no size scaling: ``motion_blur(image, radius=15, sigma=5, angle=30)`` blurs by 15
pixels whatever the image size. Random corruptions take ``seed`` (int >= 0, or None for fresh
OS entropy). The pathology suite's own corruptions are here too (``hsv_shift``, ``marking``,
``pathology_bubble``, from :mod:`medmnistc_fast.corruptions.pathology`). Every function accepts uint8 ``(H, W)``, ``(H, W, 1)`` or ``(H, W, 3)`` images
(H, W >= 8; 1-channel images follow the reference's gray pipeline L -> RGB -> corrupt -> L),
returns a new array of the same shape and dtype, never modifies its input, and raises
TypeError / ValueError naming the offending argument.
"""
from __future__ import annotations

import math
import numbers
from collections.abc import Sequence

import numpy as np

from ._validation import as_hwc, check_nonneg_int, check_positive, check_seed, to_float
from .corruptions import KINDS
from .corruptions.pathology import hsv_shift, marking, pathology_bubble
from .rng import key_from_seed

__all__ = ["pixelate", "jpeg_compression", "gaussian_noise", "speckle_noise", "impulse_noise",
           "shot_noise", "defocus_blur", "motion_blur", "zoom_blur", "gaussian_blur",
           "brightness", "contrast", "gamma_correction", "saturate", "black_corner",
           "stain_deposit", "bubble", "characters", "hsv_shift", "marking", "pathology_bubble"]


#: Largest blur radius or sigma accepted, pixels (kernels grow with it; far beyond any image).
MAX_RADIUS = 1024
#: Range of shot noise's photons per unit intensity. The exact law table covers Poisson counts
#: 0..photons + 1 for each of 256 input values, so its cost grows with photons (about 20 MB at
#: the top); the tables use 5-60, and at 10,000 the noise is already under 3 gray levels.
MIN_PHOTONS, MAX_PHOTONS = 1e-3, 1e4


#: Shared tail of every public docstring here: the image, the result and the errors.
_COMMON_DOC = """
    Parameters
    ----------
    image : ndarray, shape (H, W), (H, W, 1) or (H, W, 3), uint8
        H, W >= 8. One-channel images follow the reference's gray pipeline
        L -> RGB -> corrupt -> L. Never modified; read-only and non-contiguous arrays work.

    Returns
    -------
    ndarray, same shape as ``image``, uint8
        A new C-contiguous array.

    Raises
    ------
    TypeError
        ``image`` is not a uint8 ndarray, or a parameter has the wrong type.
    ValueError
        ``image`` has a bad shape, or a parameter is outside its range (the message names it
        and the allowed values).
"""


def _documented(fn):
    """Append :data:`_COMMON_DOC` to ``fn``'s one-paragraph docstring."""
    if fn.__doc__ is not None:  # None under python -OO
        fn.__doc__ = fn.__doc__.rstrip() + "\n" + _COMMON_DOC
    return fn


def _run(name: str, image, **values) -> np.ndarray:
    hwc = as_hwc(image)
    return KINDS[name].kernel(hwc, **values).reshape(image.shape)


def _noise_key(seed) -> int:
    return key_from_seed(check_seed(seed))


@_documented
def pixelate(image, factor: float) -> np.ndarray:
    """Pillow BOX downsampling by ``factor`` (0 < factor <= 1) and BOX upsampling back."""
    return _run("pixelate", image, factor=check_positive(factor, "factor", upper=1.0))


@_documented
def jpeg_compression(image, quality: int) -> np.ndarray:
    """Pillow JPEG round trip at ``quality`` (int 1..95; Pillow's default 4:2:0 subsampling)."""
    q = check_positive(quality, "quality", integer=True, upper=95)
    return _run("jpeg_compression", image, quality=q)


@_documented
def gaussian_noise(image, sigma: float, *, seed=None) -> np.ndarray:
    """``clip(x + N(0, sigma))`` on ``x = image / 255``, truncated back to uint8.

    sigma : float > 0, standard deviation on the [0, 1] intensity scale.
    """
    s = check_positive(sigma, "sigma")
    return _run("gaussian_noise", image, param=s, key=_noise_key(seed))


@_documented
def speckle_noise(image, sigma: float, *, seed=None) -> np.ndarray:
    """``clip(x + x * N(0, sigma))`` on ``x = image / 255`` (sigma > 0)."""
    s = check_positive(sigma, "sigma")
    return _run("speckle_noise", image, param=s, key=_noise_key(seed))


@_documented
def impulse_noise(image, amount: float, *, seed=None) -> np.ndarray:
    """Salt and pepper: each element becomes 0 or 255 with probability ``amount / 2`` each
    (0 < amount <= 1), scikit-image ``random_noise(mode='s&p')``'s law."""
    a = check_positive(amount, "amount", upper=1.0)
    return _run("impulse_noise", image, param=a, key=_noise_key(seed))


@_documented
def shot_noise(image, photons: float, *, seed=None) -> np.ndarray:
    """``clip(Poisson(x * photons) / photons)``; photons per unit intensity, in
    [:data:`MIN_PHOTONS`, :data:`MAX_PHOTONS`] = [0.001, 10000]."""
    m = check_positive(photons, "photons", upper=MAX_PHOTONS)
    if m < MIN_PHOTONS:
        raise ValueError(f"photons must be in [{MIN_PHOTONS:g}, {MAX_PHOTONS:g}]; got {photons!r}")
    return _run("shot_noise", image, param=m, key=_noise_key(seed))


def _check_sigma(value, name: str) -> float:
    """A Gaussian standard deviation in pixels, in [1e-3, 1024] (below 1e-3 the Gaussians of
    the blurs underflow to a single tap)."""
    v = check_positive(value, name, upper=MAX_RADIUS)
    if v < 1e-3:
        raise ValueError(f"{name} must be in [0.001, {MAX_RADIUS}] pixels; got {value!r}")
    return v


@_documented
def defocus_blur(image, radius: float, alias_sigma: float) -> np.ndarray:
    """Convolution with the reference's anti-aliased disk of ``radius`` pixels.

    The disk lives on the grid -8..8 (radius <= 8, 3x3 anti-alias Gaussian) or
    -ceil(radius)..ceil(radius) (5x5 Gaussian), as the reference's ``disk``; ``alias_sigma``
    (pixels, in [1e-3, 1024]) is the anti-alias Gaussian's standard deviation. Border:
    reflect-101.
    """
    r = check_positive(radius, "radius", upper=MAX_RADIUS)
    a = _check_sigma(alias_sigma, "alias_sigma")
    return _run("defocus_blur", image, radius=r, alias_sigma=a)


@_documented
def motion_blur(image, radius: float, sigma: float, angle: float) -> np.ndarray:
    """ImageMagick 6 motion blur (reference ``MotionBlur``): ``out(y, x) = sum_k w_k
    in(y + dy_k, x + dx_k)`` over ``n = 2 ceil(radius) + 1`` taps, half-Gaussian weights
    ``w_k ~ exp(-k**2 / (2 sigma**2))`` (``radius`` in pixels, 0 < radius <= 1024; ``sigma`` in
    pixels, 1e-3 <= sigma <= 1024),
    ``dx_k ~ k cos(angle)``, ``dy_k ~ k sin(angle)`` rounded as ImageMagick does (``angle`` in
    degrees, any finite value, taken modulo 360 beyond about 5.7e307; rows point down); edges
    replicated; ImageMagick Q16 rounding."""
    r = check_positive(radius, "radius", upper=MAX_RADIUS)
    s = _check_sigma(sigma, "sigma")
    if not isinstance(angle, numbers.Real) or isinstance(angle, bool):
        raise TypeError(f"angle must be a finite real number of degrees; got {angle!r}")
    try:
        a = float(angle)
    except OverflowError:  # an int beyond the float range
        a = math.inf
    if not math.isfinite(a):
        raise ValueError(f"angle must be a finite real number of degrees; got {angle!r}")
    if not math.isfinite(math.pi * a):
        # |angle| > ~5.7e307: its radians overflow to inf (sin(inf) is a math domain error).
        # Use the exact residue modulo 360 (fmod is exact); smaller angles are left as they
        # are so that their float rounding stays ImageMagick's.
        a = math.fmod(a, 360.0)
    return _run("motion_blur", image, radius=r, sigma=s, angle=a)


@_documented
def zoom_blur(image, zooms) -> np.ndarray:
    """Average of the image and its centred zooms by each factor in ``zooms`` (each in
    [1, 1e6])."""
    if isinstance(zooms, (str, bytes)):
        raise TypeError(f"zooms must be a sequence of real numbers in [1, 1e6]; got {zooms!r}")
    try:
        items = tuple(zooms)
    except TypeError:
        items = None
    # Each item a real number (not a str such as '1.5' or a bool, which float() would take).
    if items is None or not all(isinstance(z, numbers.Real) and not isinstance(z, (bool, np.bool_))
                                for z in items):
        raise TypeError(f"zooms must be a sequence of real numbers in [1, 1e6]; got "
                        f"{zooms!r}")
    zs = tuple(to_float(z) for z in items)
    if not zs or not all(1.0 <= z <= 1e6 for z in zs):
        raise ValueError(f"zooms must be a non-empty sequence of numbers in [1, 1e6]; got "
                         f"{zooms!r}")
    return _run("zoom_blur", image, zooms=zs)


@_documented
def gaussian_blur(image, kernel_size: int, sigma: float | None = None) -> np.ndarray:
    """torchvision-style Gaussian blur with an odd ``kernel_size`` (pixels) and ``sigma``
    (pixels in [1e-3, 1024]; default torchvision's ``0.3 * ((kernel_size - 1) / 2 - 1) + 0.8``)."""
    k = check_positive(kernel_size, "kernel_size", integer=True, upper=2 * MAX_RADIUS + 1)
    if k % 2 == 0:
        raise ValueError(f"kernel_size must be an odd int >= 1; got {kernel_size!r}")
    s = 0.3 * ((k - 1) * 0.5 - 1) + 0.8 if sigma is None else _check_sigma(sigma, "sigma")
    return _run("gaussian_blur", image, kernel_size=k, sigma=s)


@_documented
def brightness(image, factor: float) -> np.ndarray:
    """Pillow ``ImageEnhance.Brightness(image).enhance(factor)`` (factor > 0)."""
    return _run("brightness_up", image, factor=check_positive(factor, "factor"))


@_documented
def contrast(image, factor: float) -> np.ndarray:
    """Pillow ``ImageEnhance.Contrast(image).enhance(factor)`` (factor > 0)."""
    return _run("contrast_up", image, factor=check_positive(factor, "factor"))


@_documented
def gamma_correction(image, gamma: float) -> np.ndarray:
    """``int(255.999 * (v / 255) ** gamma)`` per value (torchvision ``adjust_gamma``, gain 1)."""
    return _run("gamma_corr_up", image, gamma=check_positive(gamma, "gamma"))


@_documented
def saturate(image, shift: float) -> np.ndarray:
    """HSV saturation ``S = clip(S + shift, 0, 1)`` (scikit-image rgb2hsv / hsv2rgb);
    ``shift`` in [-1, 1]."""
    if not isinstance(shift, numbers.Real) or isinstance(shift, bool):
        raise TypeError(f"shift must be a real number in [-1, 1]; got {shift!r} "
                        f"({type(shift).__name__})")
    if not -1 <= shift <= 1:
        raise ValueError(f"shift must be a real number in [-1, 1]; got {shift!r}")
    return _run("saturate", image, shift=float(shift))


#: Bound on pixel coordinates given to the functional layer (|x|, |y| <= 2**30): far outside any
#: image, and small enough that no kernel's index arithmetic can overflow int64.
MAX_COORD = 2 ** 30


def _int_array(values, name: str, *, minimum=-MAX_COORD, maximum=MAX_COORD) -> np.ndarray:
    """A 1-D int64 array of ints in [minimum, maximum], checked before the cast (a uint64 or
    huge value must not wrap)."""
    try:
        arr = np.asarray(values)
    except (TypeError, ValueError):
        raise TypeError(f"{name} must be a sequence of ints; got {values!r}") from None
    if arr.ndim != 1 or (arr.size and not np.issubdtype(arr.dtype, np.integer)):
        raise TypeError(f"{name} must be a 1-D sequence of ints; got {values!r}")
    if arr.size and (int(arr.min()) < minimum or int(arr.max()) > maximum):
        raise ValueError(f"{name} must hold ints in {minimum}..{maximum}; got {values!r}")
    return arr.astype(np.int64)


def _same_length(**arrays) -> None:
    lengths = {k: len(v) for k, v in arrays.items()}
    if len(set(lengths.values())) > 1:
        raise ValueError(f"{', '.join(lengths)} must have the same length; got {lengths}")


@_documented
def black_corner(image, radius: int) -> np.ndarray:
    """Zero everything outside the filled circle of ``radius`` pixels (int >= 0) centred at
    ``(W // 2, H // 2)``, rasterised as OpenCV's filled ``cv2.circle``."""
    return _run("black_corner", image, radius=check_nonneg_int(radius, "radius"))


@_documented
def stain_deposit(image, x, y, ink, *, ink_side: int = 24, side: int | None = None) -> np.ndarray:
    """Zero the pixels under ink marks of the reference's ink set (``assets/inks.npz``).

    x, y : sequences of int, top-left column and row of each mark (pixels, |x|, |y| <= 2**30;
        cropped at edges).
    ink : sequence of int in 0..9, which of the ten masks each mark uses.
    ink_side : 12, 16, 24, 32 or 42, the ink set (stored mask side in pixels).
    side : int in 1..1024 or None, the side at which masks are drawn (None: ``ink_side``).
    """
    xs, ys = _int_array(x, "x"), _int_array(y, "y")
    inks = _int_array(ink, "ink", minimum=0)
    _same_length(x=xs, y=ys, ink=inks)
    if inks.size and inks.max() > 9:
        raise ValueError(f"ink must hold mask indices 0..9; got {ink!r}")
    if ink_side not in (12, 16, 24, 32, 42):
        raise ValueError(f"ink_side must be one of 12, 16, 24, 32, 42; got {ink_side!r}")
    s = ink_side if side is None else check_positive(side, "side", integer=True,
                                                      upper=MAX_RADIUS)
    return _run("stain_deposit", image, ink_side=int(ink_side), side=int(s), ink=inks, x=xs, y=ys)


@_documented
def bubble(image, x, y, radius, *, border: int = 2) -> np.ndarray:
    """MedMNIST-C bubbles: for each centre (x[i], y[i]) a white disk of ``radius[i] + border``
    pixels at alpha 130, then one of ``radius[i]`` at alpha 100, composited as Pillow's paste.
    Centres are ints with ``|x|, |y| <= 2**30``; radius and border ints in 0..1024."""
    xs, ys = _int_array(x, "x"), _int_array(y, "y")
    r = _int_array(radius, "radius", minimum=0, maximum=MAX_RADIUS)
    _same_length(x=xs, y=ys, radius=r)
    border = check_nonneg_int(border, "border", upper=MAX_RADIUS)
    return _run("bubble", image, x=xs, y=ys, inner=r, outer=r + border)


@_documented
def characters(image, texts, x, y, colors, *, font_size: float = 6.3) -> np.ndarray:
    """Draw antialiased words (printable ASCII) with Pillow's bundled font of ``font_size``
    pixels (1..1024), left end and baseline at (x[i], y[i]), RGB colour ``colors[i]``
    (0..255)."""
    if (isinstance(texts, str) or not isinstance(texts, Sequence)
            or not all(isinstance(t, str) for t in texts)):
        raise TypeError(f"texts must be a sequence (list, tuple) of str; got {texts!r}")
    xs, ys = _int_array(x, "x"), _int_array(y, "y")
    cols = np.asarray(colors)
    if cols.ndim != 2 or cols.shape[1:] != (3,) or not np.issubdtype(cols.dtype, np.integer) \
            or (cols.size and (cols.min() < 0 or cols.max() > 255)):
        raise ValueError(f"colors must be (n, 3) ints in 0..255; got {colors!r}")
    _same_length(texts=texts, x=xs, y=ys, colors=cols)
    size = check_positive(font_size, "font_size", upper=MAX_RADIUS)
    if size < 1.0:
        raise ValueError(f"font_size must be in [1, {MAX_RADIUS}] pixels; got {font_size!r}")
    return _run("characters", image, texts=tuple(texts), sizes=(size,) * len(texts), x=xs, y=ys,
                colors=cols.astype(np.int64))
