"""Functional layer: each corruption with explicit physical parameters, in pixels of *this* image.

No tables, no size scaling: ``motion_blur(image, radius=15, sigma=5, angle=30)`` blurs by 15
pixels whatever the image size. Random corruptions take ``seed`` (int >= 0, or None for fresh
OS entropy). The pathology suite's own corruptions are here too (``hsv_shift``, ``marking``,
``pathology_bubble``, from :mod:`medmnistc_fast.corruptions.pathology`). Every function accepts
uint8 ``(H, W)``, ``(H, W, 1)`` or ``(H, W, 3)`` images (H, W >= 8; 1-channel images follow
the reference's gray pipeline L -> RGB -> corrupt -> L), returns a new array of the same shape
and dtype, never modifies its input, and raises TypeError / ValueError naming the offending
argument.
"""
from __future__ import annotations

import inspect
import math
import numbers
import textwrap
from collections.abc import Sequence

import numpy as np

from ._validation import _is_int, as_hwc, check_int, check_nonneg_int, check_positive, check_seed, to_float
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
#: the top); the tables use 5-300, and at 10,000 the noise is already under 3 gray levels.
MIN_PHOTONS, MAX_PHOTONS = 1e-3, 1e4


#: Shared parts of every public docstring here: the image, the result and the errors.
_IMAGE_DOC = """
    image : ndarray, shape (H, W), (H, W, 1) or (H, W, 3), uint8
        H, W >= 8. One-channel images follow the reference's gray pipeline
        L -> RGB -> corrupt -> L. Never modified; read-only and non-contiguous arrays work."""

_SEED_DOC = """
    seed : int >= 0 or None, keyword-only, default None
        Fixes the random draws: the output is a pure function of (seed, parameters, pixels),
        through the key ``SeedSequence(seed).generate_state(1, uint64)``
        (:func:`medmnistc_fast.rng.key_from_seed`). None draws fresh OS entropy."""

_RETURNS_RAISES_DOC = """

    Returns
    -------
    ndarray, same shape as ``image``, uint8
        A new C-contiguous array.

    Raises
    ------
    TypeError
        ``image`` is not a uint8 ndarray (a masked array included), or a parameter has the
        wrong type.
    ValueError
        ``image`` has a bad shape (not 2-D or 3-D, 2 or 4+ channels, a side below 8), or a
        parameter is outside its range (the message names it and the allowed values){raises}.
"""

#: References shared by the docstrings (each function adds its class in the reference package).
_PAPER = """\
    .. [1] F. Di Salvo, S. Doerrich, C. Ledig, "MedMNIST-C: Comprehensive benchmark and improved
       classifier robustness by simulating realistic image corruptions", arXiv:2406.17536 (2024).
"""
# The continuation line is indented as the other reference lines: an unindented line made
# ``inspect.getdoc`` keep every line's indentation, so numpydoc saw no sections.
_HENDRYCKS = """D. Hendrycks, T. Dietterich, "Benchmarking Neural Network Robustness to Common
       Corruptions and Perturbations", ICLR 2019 (ImageNet-C, which these formulas follow)"""


def _ref(where: str, extra: str = "") -> str:
    """The References section: the paper, the reference package's ``where`` and ``extra``."""
    out = _PAPER + f"    .. [2] Reference package ``medmnistc`` 0.1.0: {where}.\n"
    if extra:
        out += "    .. [3] " + extra.rstrip(".") + ".\n"
    return out


def _documented(params: str, references: str, raises: str = ""):
    """Complete ``fn``'s summary docstring into numpydoc: Parameters (``image`` first, then
    ``params``), Returns, Raises (``raises``, if given, continues the ValueError entry: the
    function's own further cases, starting with "; "), References."""
    extra = ";\n" + textwrap.fill(raises.lstrip("; "), 92, initial_indent=" " * 8,
                                  subsequent_indent=" " * 8) if raises else ""
    sections = textwrap.dedent("    Parameters\n    ----------" + _IMAGE_DOC + params.rstrip()
                               + _RETURNS_RAISES_DOC.format(raises=extra)
                               + "\n    References\n    ----------\n" + references.rstrip()
                               + "\n")

    def wrap(fn):
        if fn.__doc__ is not None:  # None under python -OO
            # Both parts at the left margin: Python 3.13 strips a docstring's indentation when
            # compiling, and indented sections after its body then kept theirs in
            # ``inspect.getdoc``, where numpydoc found no section.
            fn.__doc__ = inspect.cleandoc(fn.__doc__.rstrip()) + "\n\n" + sections
        return fn
    return wrap


def _run(name: str, image, **values) -> np.ndarray:
    hwc = as_hwc(image)
    kind = KINDS[name]
    kind.check_side(hwc.shape, "image")
    return kind.kernel(hwc, **values).reshape(image.shape)


def _noise_key(seed) -> int:
    return key_from_seed(check_seed(seed))


@_documented("""
    factor : float, in (0, 1]
        Side of the small image as a fraction of the original side (1 = unchanged size).""",
    _ref("``Pixelate`` in ``corruptions/compression.py``"))
def pixelate(image, factor: float) -> np.ndarray:
    """Pixelation: Pillow BOX downsampling by ``factor`` and BOX upsampling back.

    The small image is ``(max(1, int(W * factor)), max(1, int(H * factor)))`` pixels (the
    reference's ``int`` truncation; ``max(1, ...)`` only acts where the reference would fail);
    both resizes reproduce Pillow's 8-bit ``Image.resize(..., Image.BOX)`` bit for bit.
    """
    return _run("pixelate", image, factor=check_positive(factor, "factor", upper=1.0))


@_documented("""
    quality : int, in 1..95
        libjpeg quality factor. The bound 95 is Pillow's documented maximum for its JPEG
        ``quality`` option (values above 95 are advised against in Pillow's image-file-formats
        documentation).""",
    _ref("``JPEGCompression`` in ``corruptions/compression.py``"),
    "; a side longer than 65,500 px (libjpeg's ``JPEG_MAX_DIMENSION``, "
    ":data:`medmnistc_fast.corruptions.digital.JPEG_MAX_SIDE`)")
def jpeg_compression(image, quality: int) -> np.ndarray:
    """JPEG round trip through Pillow at ``quality`` (Pillow's default 4:2:0 chroma
    subsampling for RGB). A side longer than 65,500 px (libjpeg's ``JPEG_MAX_DIMENSION``) is a
    ValueError."""
    q = check_positive(quality, "quality", integer=True, upper=95)
    return _run("jpeg_compression", image, quality=q)


@_documented("""
    sigma : float > 0, finite
        Standard deviation on the [0, 1] intensity scale (0.04-0.26 in the MedMNIST-C
        tables).""" + _SEED_DOC,
    _ref("``GaussianNoise`` in ``corruptions/noise.py``", _HENDRYCKS))
def gaussian_noise(image, sigma: float, *, seed=None) -> np.ndarray:
    """Additive Gaussian noise: ``trunc(255 * clip(x + N(0, sigma), 0, 1))`` on
    ``x = image / 255``, independently per element.

    Sampled from the exact law of that expression for each input value (one draw per element),
    so the output equals the reference's in distribution, not draw for draw. The law is that of
    real arithmetic on ``x + n``: for sigma below about 1e-15 (noise within a few float64 ulps of
    ``x``), where float64 rounding decides the output, it can differ (at sigma 1e-20 about half
    of some values go one level down, where the float64 expression leaves them unchanged).
    """
    s = check_positive(sigma, "sigma")
    return _run("gaussian_noise", image, param=s, key=_noise_key(seed))


@_documented("""
    sigma : float > 0, finite
        Standard deviation of the normal multiplier, unitless (0.05-0.6 in the MedMNIST-C
        tables).""" + _SEED_DOC,
    _ref("``SpeckleNoise`` in ``corruptions/noise.py``", _HENDRYCKS))
def speckle_noise(image, sigma: float, *, seed=None) -> np.ndarray:
    """Multiplicative (speckle) noise: ``trunc(255 * clip(x + x * N(0, sigma), 0, 1))`` on
    ``x = image / 255``, independently per element (sampled from the exact law of that
    expression, so equal to the reference's in distribution; as for :func:`gaussian_noise`,
    the law of real arithmetic, which float64 rounding departs from for sigma below about
    1e-15)."""
    s = check_positive(sigma, "sigma")
    return _run("speckle_noise", image, param=s, key=_noise_key(seed))


@_documented("""
    amount : float, in (0, 1]
        Fraction of array elements (pixels x channels) replaced.""" + _SEED_DOC,
    _ref("``ImpulseNoise`` in ``corruptions/noise.py``",
         "scikit-image, ``skimage.util.random_noise`` (``mode='s&p'``)."))
def impulse_noise(image, amount: float, *, seed=None) -> np.ndarray:
    """Salt and pepper noise: each element becomes 0 or 255 with probability
    ``amount / 2`` each, the law of scikit-image ``random_noise(mode='s&p', amount=amount)``
    (salt_vs_pepper 0.5) as the reference calls it."""
    a = check_positive(amount, "amount", upper=1.0)
    return _run("impulse_noise", image, param=a, key=_noise_key(seed))


@_documented("""
    photons : float, in [0.001, 10000]
        Photons per unit intensity (Poisson rate multiplier; 5-300 in the MedMNIST-C tables);
        smaller is noisier. Bounds :data:`MIN_PHOTONS`, :data:`MAX_PHOTONS`.""" + _SEED_DOC,
    _ref("``ShotNoise`` in ``corruptions/noise.py``", _HENDRYCKS))
def shot_noise(image, photons: float, *, seed=None) -> np.ndarray:
    """Poisson (shot) noise: ``trunc(255 * clip(Poisson(x * photons) / photons, 0, 1))``
    on ``x = image / 255``, independently per element (sampled from the exact law, so equal to
    the reference's in distribution)."""
    m = check_positive(photons, "photons", lower=MIN_PHOTONS, upper=MAX_PHOTONS)
    return _run("shot_noise", image, param=m, key=_noise_key(seed))


def _check_sigma(value, name: str) -> float:
    """A Gaussian standard deviation in pixels, in [1e-3, 1024] (below 1e-3 the Gaussians of
    the blurs underflow to a single tap)."""
    return check_positive(value, name, lower=1e-3, upper=MAX_RADIUS)


@_documented("""
    radius : float, in (0, 1024]
        Disk radius in pixels.
    alias_sigma : float, in [0.001, 1024]
        Standard deviation of the anti-alias Gaussian, pixels.""",
    _ref("``DefocusBlur`` and ``disk`` in ``corruptions/filter.py``", _HENDRYCKS))
def defocus_blur(image, radius: float, alias_sigma: float) -> np.ndarray:
    """Defocus: convolution with the reference's anti-aliased disk of ``radius`` pixels.

    The disk ``x**2 + y**2 <= radius**2`` lives on the integer grid -8..8 (radius <= 8) or
    -ceil(radius)..ceil(radius) (larger radii), is divided by its sum, then blurred by a 3 x 3
    (radius <= 8) or 5 x 5 Gaussian of standard deviation ``alias_sigma`` (OpenCV
    ``GaussianBlur``) and not renormalised, as the reference's ``disk``. Image border:
    reflect-101 (OpenCV ``filter2D``'s default).
    """
    r = check_positive(radius, "radius", upper=MAX_RADIUS)
    a = _check_sigma(alias_sigma, "alias_sigma")
    return _run("defocus_blur", image, radius=r, alias_sigma=a)


@_documented("""
    radius : float, in (0, 1024]
        Blur length in pixels.
    sigma : float, in [0.001, 1024]
        Standard deviation of the weights, pixels.
    angle : float
        Direction in degrees, any finite value (taken modulo 360 beyond about 5.7e307). The
        benchmark draws it uniformly in [-45, 45].""",
    _ref("``MotionBlur`` and ``MotionImage`` in ``corruptions/filter.py``",
         "ImageMagick 6, ``MotionBlurImage`` (``magick/effect.c``)."))
def motion_blur(image, radius: float, sigma: float, angle: float) -> np.ndarray:
    """ImageMagick 6 motion blur (the reference's ``MotionBlur`` via Wand).

    ``out(y, x) = sum_k w_k in(y + dy_k, x + dx_k)`` over ``n = 2 ceil(radius) + 1`` taps
    ``k = 0..n-1``, half-Gaussian weights ``w_k ~ exp(-k**2 / (2 sigma**2))`` normalised to sum
    1, offsets ``dx_k ~ k cos(angle)``, ``dy_k ~ k sin(angle)`` rounded as ImageMagick does
    (rows point down); edges replicated; ImageMagick Q16 rounding.
    """
    r = check_positive(radius, "radius", upper=MAX_RADIUS)
    s = _check_sigma(sigma, "sigma")
    if not isinstance(angle, numbers.Real) or isinstance(angle, bool):
        raise TypeError(f"angle must be a finite real number of degrees; got {angle!r}")
    try:
        a = float(angle)
    except OverflowError:
        # an int (or Fraction) beyond the float range: finite, so its exact residue modulo
        # 360 with the sign of the angle, as math.fmod gives for huge floats below
        rem = abs(angle) % 360  # not r: that is the radius
        a = float(rem) if angle > 0 else -float(rem)
    if not math.isfinite(a):
        raise ValueError(f"angle must be a finite real number of degrees; got {angle!r}")
    if not math.isfinite(math.pi * a):
        # |angle| > ~5.7e307: its radians overflow to inf (sin(inf) is a math domain error).
        # Use the exact residue modulo 360 (fmod is exact); smaller angles are left as they
        # are so that their float rounding stays ImageMagick's.
        a = math.fmod(a, 360.0)
    return _run("motion_blur", image, radius=r, sigma=s, angle=a)


@_documented("""
    zooms : sequence of float, each in [1, 1e6], non-empty
        Zoom factors (1 = unchanged). The MedMNIST-C tables use
        ``numpy.arange(1, 1.11 .. 1.31, 0.01 .. 0.03)``.""",
    _ref("``ZoomBlur`` and ``clipped_zoom`` in ``corruptions/filter.py``", _HENDRYCKS))
def zoom_blur(image, zooms) -> np.ndarray:
    """Zoom blur: the average of the image and its centred zooms by each factor in
    ``zooms``.

    Each zoom crops the centre ``ceil(side / z)`` pixels of each side and enlarges them by
    ``z`` with linear interpolation (``scipy.ndimage.zoom(order=1)``), as the reference's
    ``clipped_zoom``; the sum is divided by ``len(zooms) + 1`` in float32 and truncated.
    """
    if isinstance(zooms, (str, bytes)):
        raise TypeError(f"zooms must be a sequence of real numbers in [1, 1e6]; got {zooms!r}")
    # A sequence or a 1-D array: a dict, set or generator has no order to keep or is used up.
    ok = isinstance(zooms, Sequence) or (isinstance(zooms, np.ndarray) and zooms.ndim == 1)
    items = tuple(zooms) if ok else None
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


@_documented("""
    kernel_size : int, odd, in 1..2049
        Kernel width in pixels.
    sigma : float in [0.001, 1024], or None
        Standard deviation in pixels. None: torchvision's default for ``kernel_size``,
        ``0.3 * ((kernel_size - 1) / 2 - 1) + 0.8`` (as the reference, which passes no sigma).""",
    _ref("``GaussianBlur`` in ``corruptions/filter.py``",
         "torchvision, ``transforms.functional.gaussian_blur`` (default sigma)."))
def gaussian_blur(image, kernel_size: int, sigma: float | None = None) -> np.ndarray:
    """torchvision Gaussian blur (separable, float32 taps, reflect padding)."""
    k = check_int(kernel_size, "kernel_size", 1, 2 * MAX_RADIUS + 1, odd=True)
    s = 0.3 * ((k - 1) * 0.5 - 1) + 0.8 if sigma is None else _check_sigma(sigma, "sigma")
    return _run("gaussian_blur", image, kernel_size=k, sigma=s)


@_documented("""
    factor : float > 0, finite
        1 leaves the image unchanged, below 1 darkens, above 1 brightens (values clip at
        255).""",
    _ref("``Brightness`` in ``corruptions/enhance.py``",
         "Pillow, ``PIL.ImageEnhance.Brightness``."))
def brightness(image, factor: float) -> np.ndarray:
    """Pillow ``ImageEnhance.Brightness(image).enhance(factor)``: a blend with black,
    bit-exact."""
    return _run("brightness_up", image, factor=check_positive(factor, "factor"))


@_documented("""
    factor : float > 0, finite
        1 leaves the image unchanged, below 1 lowers the contrast, above 1 raises it.""",
    _ref("``Contrast`` in ``corruptions/enhance.py``",
         "Pillow, ``PIL.ImageEnhance.Contrast``."))
def contrast(image, factor: float) -> np.ndarray:
    """Pillow ``ImageEnhance.Contrast(image).enhance(factor)``: a blend with the constant
    gray ``int(mean(L) + 0.5)`` of this image (L = Pillow's luma), bit-exact."""
    return _run("contrast_up", image, factor=check_positive(factor, "factor"))


@_documented("""
    gamma : float > 0, finite
        Exponent: above 1 darkens (the reference's ``gamma_corr_up``), below 1 brightens.""",
    _ref("``GammaCorrection`` in ``corruptions/enhance.py``",
         "torchvision, ``transforms.functional.adjust_gamma``."))
def gamma_correction(image, gamma: float) -> np.ndarray:
    """Gamma correction ``int(255.999 * (v / 255) ** gamma)`` per value ``v``.

    The lookup table of torchvision's PIL path ``adjust_gamma(img, gamma, gain=1)``
    (``(255 + 1 - 1e-3) * gain * (v / 255) ** gamma``), as the reference calls it.
    """
    return _run("gamma_corr_up", image, gamma=check_positive(gamma, "gamma"))


@_documented("""
    shift : float, in [-1, 1]
        Added to the saturation (on its [0, 1] scale).""",
    _ref("``Saturate`` in ``corruptions/enhance.py``",
         "scikit-image, ``skimage.color.rgb2hsv`` / ``hsv2rgb``."))
def saturate(image, shift: float) -> np.ndarray:
    """HSV saturation shift ``S = clip(S + shift, 0, 1)``: scikit-image ``rgb2hsv`` /
    ``hsv2rgb`` in float64 on ``image / 255``, then ``clip(0, 1) * 255`` truncated."""
    if not isinstance(shift, numbers.Real) or isinstance(shift, bool):
        raise TypeError(f"shift must be a real number in [-1, 1]; got {shift!r} "
                        f"({type(shift).__name__})")
    if not -1 <= shift <= 1:
        raise ValueError(f"shift must be a real number in [-1, 1]; got {shift!r}")
    return _run("saturate", image, shift=float(shift))


#: Bound on pixel coordinates given to the functional layer (|x|, |y| <= 2**30): far outside any
#: image, and small enough that no kernel's index arithmetic can overflow int64.
MAX_COORD = 2 ** 30


def _holds_bool(values) -> bool:
    """Whether a (nested) list or tuple holds a bool, which ``np.asarray`` would turn into an
    int when ints sit beside it (``[True, 2]`` -> ``[1, 2]``). Arrays are judged by dtype."""
    if isinstance(values, (bool, np.bool_)):
        return True
    return isinstance(values, (list, tuple)) and any(_holds_bool(v) for v in values)


def _int_array(values, name: str, *, minimum=-MAX_COORD, maximum=MAX_COORD) -> np.ndarray:
    """A 1-D int64 array of ints in [minimum, maximum], checked before the cast (a uint64 or
    huge value must not wrap)."""
    try:
        arr = np.asarray(values)
    except (TypeError, ValueError):
        raise TypeError(f"{name} must be a sequence of ints; got {values!r}") from None
    if _holds_bool(values):
        raise TypeError(f"{name} must be a 1-D sequence of ints, not bools; got {values!r}")
    if arr.ndim == 1 and arr.size and arr.dtype == object and all(_is_int(v) for v in arr):
        # ints beyond the uint64 range make an object array: a value out of range, as 2**63
        # (uint64) is, not a wrong type
        raise ValueError(f"{name} must hold ints in {minimum}..{maximum}; got {values!r}")
    if arr.ndim != 1 or (arr.size and not np.issubdtype(arr.dtype, np.integer)):
        raise TypeError(f"{name} must be a 1-D sequence of ints; got {values!r}")
    if arr.size and (int(arr.min()) < minimum or int(arr.max()) > maximum):
        raise ValueError(f"{name} must hold ints in {minimum}..{maximum}; got {values!r}")
    return arr.astype(np.int64)


def _same_length(**arrays) -> None:
    lengths = {k: len(v) for k, v in arrays.items()}
    if len(set(lengths.values())) > 1:
        raise ValueError(f"{', '.join(lengths)} must have the same length; got {lengths}")


@_documented("""
    radius : int >= 0
        Circle radius in pixels (the benchmark uses ``int(multiplier * min(W // 2, H // 2))``
        with its table's multiplier).""",
    _ref("``BlackCorner`` in ``corruptions/microscopy.py``"))
def black_corner(image, radius: int) -> np.ndarray:
    """Zero everything outside a filled circle centred at ``(W // 2, H // 2)``,
    rasterised as OpenCV's filled ``cv2.circle``."""
    return _run("black_corner", image, radius=check_nonneg_int(radius, "radius"))


@_documented("""
    x, y : sequence of int
        Top-left column and row of each mark, pixels, each with absolute value <= 2**30
        (marks are cropped at the image edges).
    ink : sequence of int, each in 0..9
        Which of the set's ten masks each mark uses (same length as ``x`` and ``y``).
    ink_side : {12, 16, 24, 32, 42}, keyword-only, default 24
        The ink set, by its stored mask side in pixels (keys '1'..'5' of ``inks.npz``; the
        reference's ``max(3, severity)``, with its 0-based severity, picks 24 for levels 1-4
        and 32 for level 5).
    side : int in 1..1024 or None, keyword-only
        The side in pixels at which the masks are drawn (None: ``ink_side``).""",
    _ref("``StainDeposit`` in ``corruptions/microscopy.py`` and ``assets/inks.npz``"),
    "; ``x``, ``y`` and ``ink`` of different lengths")
def stain_deposit(image, x, y, ink, *, ink_side: int = 24, side: int | None = None) -> np.ndarray:
    """Zero the pixels under ink marks of the reference's ink set (``assets/inks.npz``).
    """
    xs, ys = _int_array(x, "x"), _int_array(y, "y")
    inks = _int_array(ink, "ink", minimum=0, maximum=9)  # the set's ten masks
    _same_length(x=xs, y=ys, ink=inks)
    if not _is_int(ink_side):
        raise TypeError(f"ink_side must be an int, one of 12, 16, 24, 32, 42; got {ink_side!r}")
    if ink_side not in (12, 16, 24, 32, 42):
        raise ValueError(f"ink_side must be one of 12, 16, 24, 32, 42; got {ink_side!r}")
    s = ink_side if side is None else check_positive(side, "side", integer=True,
                                                      upper=MAX_RADIUS)
    return _run("stain_deposit", image, ink_side=int(ink_side), side=int(s), ink=inks, x=xs, y=ys)


@_documented("""
    x, y : sequence of int
        Centre column and row of each bubble, pixels, each with absolute value <= 2**30.
    radius : sequence of int, each in 0..1024
        Inner radius of each bubble, pixels (same length as ``x`` and ``y``).
    border : int in 0..1024, keyword-only, default 2
        Width of the brighter rim, pixels (the reference's ``border = 2``).""",
    _ref("``Bubble`` in ``corruptions/microscopy.py``"),
    "; ``x``, ``y`` and ``radius`` of different lengths")
def bubble(image, x, y, radius, *, border: int = 2) -> np.ndarray:
    """MedMNIST-C bubbles: for each centre ``(x[i], y[i])`` a white disk of
    ``radius[i] + border`` pixels at alpha 130, then one of ``radius[i]`` at alpha 100 (the
    reference's constants), drawn as Pillow ellipses and composited as Pillow's ``paste``."""
    xs, ys = _int_array(x, "x"), _int_array(y, "y")
    r = _int_array(radius, "radius", minimum=0, maximum=MAX_RADIUS)
    _same_length(x=xs, y=ys, radius=r)
    border = check_nonneg_int(border, "border", upper=MAX_RADIUS)
    return _run("bubble", image, x=xs, y=ys, inner=r, outer=r + border)


@_documented("""
    texts : sequence of str
        The words, printable ASCII (codes 32..126).
    x, y : sequence of int
        Left end and baseline row of each word, pixels, each with absolute value <= 2**30.
    colors : array_like of int, shape (n, 3), each in 0..255
        RGB colour of each word (gray images get its luma through the gray pipeline).
    font_size : float in [1, 1024], keyword-only, default 6.3
        Pillow font size, pixels. 6.3 is ``PIL_SIZE_FOR_HEIGHT[5]``, the size matching the
        5 px high cv2 text of the reference's largest font scales (0.17, 0.18) at 224 px.""",
    _ref("``Characters`` in ``corruptions/microscopy.py``"),
    "; a word with a character outside printable ASCII (32..126); ``texts``, ``x``, ``y`` "
    "and ``colors`` of different lengths")
def characters(image, texts, x, y, colors, *, font_size: float = 6.3) -> np.ndarray:
    """Draw antialiased words with Pillow's bundled font (Aileron Regular).

    The reference draws OpenCV Hershey text (``cv2.putText``, FONT_HERSHEY_DUPLEX); Pillow's
    font is used instead, sized to change about as many pixels
    (:data:`medmnistc_fast.corruptions.artifacts.PIL_SIZE_FOR_HEIGHT`).
    """
    if (isinstance(texts, str) or not isinstance(texts, Sequence)
            or not all(isinstance(t, str) for t in texts)):
        raise TypeError(f"texts must be a sequence (list, tuple) of str; got {texts!r}")
    xs, ys = _int_array(x, "x"), _int_array(y, "y")
    try:
        cols = np.asarray(colors)
    except (TypeError, ValueError):
        raise TypeError(f"colors must be (n, 3) ints in 0..255; got {colors!r}") from None
    if _holds_bool(colors):
        raise TypeError(f"colors must be (n, 3) ints in 0..255, not bools; got {colors!r}")
    if cols.shape == (0,):  # [] for no words, like x and y
        cols = np.zeros((0, 3), np.int64)
    if cols.size and not np.issubdtype(cols.dtype, np.integer):
        raise TypeError(f"colors must be (n, 3) ints in 0..255; got {colors!r} "
                        f"(dtype {cols.dtype})")
    if cols.ndim != 2 or cols.shape[1:] != (3,) \
            or (cols.size and (int(cols.min()) < 0 or int(cols.max()) > 255)):
        raise ValueError(f"colors must be (n, 3) ints in 0..255; got {colors!r}")
    _same_length(texts=texts, x=xs, y=ys, colors=cols)
    size = check_positive(font_size, "font_size", lower=1.0, upper=MAX_RADIUS)
    return _run("characters", image, texts=tuple(texts), sizes=(size,) * len(texts), x=xs, y=ys,
                colors=cols.astype(np.int64))
