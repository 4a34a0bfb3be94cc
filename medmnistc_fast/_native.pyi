"""Typed stubs for the private C++ extension ``medmnistc_fast._native`` (built from ``csrc/``).

Every kernel takes a C-contiguous uint8 image of shape (H, W, C) with H, W, C >= 1 (other dtypes and
layouts are converted by pybind11's ``forcecast``; the public functions validate and convert first),
returns a new C-contiguous uint8 array of the same shape, and releases the GIL while it computes.
Kernels check shapes only; wrong shapes raise ValueError. They own no randomness: callers pass every
sampled value explicitly.

References
----------
F. Di Salvo, S. Doerrich, C. Ledig, "MedMNIST-C: Comprehensive benchmark and improved classifier
robustness by simulating realistic image corruptions", arXiv:2406.17536, 2024. Reference
implementation: ``medmnistc`` 0.1.0, ``medmnistc/corruptions/filter.py``.
"""

import numpy as np
import numpy.typing as npt

def motion_blur(
    image: npt.NDArray[np.uint8],
    weights: npt.NDArray[np.float64],
    dx: npt.NDArray[np.int32],
    dy: npt.NDArray[np.int32],
) -> npt.NDArray[np.uint8]:
    """Motion blur with explicit taps, as ImageMagick 6 Q16 ``MotionBlurImage`` computes it.

    ``out[y, x, c] = floor(q / 257)`` with ``q = clip(int(s + 0.5), 0, 65535)`` and
    ``s = sum_k weights[k] * 257 * image[clip(y + dy[k]), clip(x + dx[k]), c]``, accumulated in
    double in tap order, indices clamped to the image (edge pixels repeat). This is the reference's
    round trip (8-bit PNG read as 16-bit quanta, ``ClampToQuantum``, 8-bit PNG write, which
    truncates) and matches ImageMagick 6.9.11-60 Q16 bit for bit.

    The reference's taps for ``MagickMotionBlurImage(radius, sigma, angle)``:
    ``n = 2 * ceil(radius) + 1``; ``weights[k]`` proportional to ``exp(-k**2 / (2 sigma**2))``,
    k = 0..n-1, normalised to sum 1; with ``t = pi * angle / 180``, ``px = n * sin(t)``,
    ``py = n * cos(t)``, ``h = hypot(px, py)``: ``dx[k] = ceil(k * py / h - 0.5)``,
    ``dy[k] = ceil(k * px / h - 0.5)`` (x = column, y = row pointing down). Evaluate in this order
    in double: near-half-integer products (angle -30: k * sin(t) = -0.5 * k) must round as
    ImageMagick rounds them. The streak of a bright pixel trails towards -angle (to the left at 0
    degrees, upwards at 90).

    Parameters
    ----------
    image : ndarray, shape (H, W, C), uint8
    weights : ndarray, shape (n,), float64
        Tap weights; ``sum(abs(weights))`` must be finite and at most 1024.
    dx, dy : ndarray, shape (n,), int32
        Tap offsets in pixels (columns, rows).

    Returns
    -------
    ndarray, shape (H, W, C), uint8

    Raises
    ------
    ValueError
        If ``image`` is not 3-D with positive sizes, the tap arrays are not 1-D of one common
        length n >= 1, or the weights are too large.
    """

def zoom_blur(
    image: npt.NDArray[np.uint8], zooms: npt.NDArray[np.float64]
) -> npt.NDArray[np.uint8]:
    """Zoom blur: the reference ``ZoomBlur`` (``clipped_zoom``, ``scipy.ndimage.zoom`` order 1).

    ``x = float32(image / 255)``. For each factor z, per axis of length n: the centred
    ``c = ceil(n / z)`` samples (from ``(n - c) // 2``) are zoomed to ``round(c * z)`` samples
    (half to even) with scipy's ``grid_mode=False`` linear interpolation (output sample o at input
    position ``o * (c - 1) / (round(c * z) - 1)``, computed in double, stored as float32, 0 beyond
    the last sample as in ``mode='constant'``), and the centred n samples are kept (from
    ``(round(c * z) - n) // 2``). The layers are summed in float32 in the given order, and
    ``out = trunc(clip((x + sum) / (len(zooms) + 1), 0, 1) * 255)`` in float32. The reference uses
    the height for both axes (square images only); here each axis uses its own length, so H != W
    works. Identical to the reference on every pixel tested (28 to 224 px).

    Parameters
    ----------
    image : ndarray, shape (H, W, C), uint8
    zooms : ndarray, shape (m,), float64
        Zoom factors, each in [1, 1e6] (for example ``np.arange(1, 1.11, .01)``); m may be 0.

    Returns
    -------
    ndarray, shape (H, W, C), uint8

    Raises
    ------
    ValueError
        If ``image`` is not 3-D with positive sizes, ``zooms`` is not 1-D, or a factor lies outside
        [1, 1e6] or is NaN.
    """

def filter2d(
    image: npt.NDArray[np.uint8],
    kernel: npt.NDArray[np.float32] | npt.NDArray[np.float64],
    mask: npt.NDArray[np.bool_] | npt.NDArray[np.uint8] | None = None,
    gauss1d: npt.NDArray[np.float64] | None = None,
) -> npt.NDArray[np.uint8]:
    """2-D correlation of ``image / 255`` with ``kernel``, as OpenCV ``filter2D`` in the reference
    ``DefocusBlur``, then ``trunc(clip(., 0, 1) * 255)``.

    ``out[y, x, c] = trunc(clip(sum_ij kernel[i, j] * image[y + i - kh // 2, x + j - kw // 2, c]
    / 255, 0, 1) * 255)`` with BORDER_REFLECT_101 (``...cb|abcd|cb...``, mirrored again for images
    smaller than the kernel). The kernel is used in double precision (float32 kernels convert
    exactly); taps below ``2**-53 * sum|kernel| / kernel.size`` in magnitude are ignored (they
    cannot change a double-precision sum). Without ``mask``, the sum is evaluated exactly (integer
    pixel sums over runs of equal taps) and has matched the reference on every pixel tested.

    With ``mask`` and ``gauss1d`` (from the reference ``disk()``: ``mask`` is the binary disk and
    ``gauss1d`` the 1-D kernel of its ``cv2.GaussianBlur``), a 3-tap symmetric ``gauss1d`` and a
    mask of the kernel's shape shaped like a disk (every row one run centred on the anchor column,
    half widths symmetric in the row offset and non-increasing away from the centre row; at most
    257 pixels), the kernel is modelled as ``c * (g1**2 D + g0 g1 Me + g0**2 Mk)``: the reference's blur in exact
    arithmetic, D the mask and Me, Mk integer matrices (neighbour sums of D, with the blur's
    reflect-101 at the kernel border). The model is used when it is within ``2**-18 * max|kernel|``
    of every tap (the float32 rounding of the kernel), with ``c`` keeping the kernel sum; pixel
    sums are exact integers and the three weights are applied in double (computed in float32
    first, and in double wherever float32 cannot decide the truncation: the same bytes), so
    results move by a few 1e-7 of a gray level at most (every MedMNIST-C kernel at 224 px: 38 of the 7.0 million
    defocus samples of the golden files differ from the reference, by one level). Otherwise the kernel is split into
    ``c * outer(g, g) (*) mask`` and a remainder whose taps below ``2**-18 * max|kernel|`` are
    dropped (their sum folded into ``c``), when that is cheaper than the exact evaluation.

    Parameters
    ----------
    image : ndarray, shape (H, W, C), uint8
    kernel : ndarray, shape (kh, kw), float32 or float64
        Odd sizes; ``sum(abs(kernel))`` must be finite and at most 1024.
    mask : ndarray, shape (mh, mw), bool or uint8, optional
        Odd sizes; nonzero marks the disk. Give with ``gauss1d``.
    gauss1d : ndarray, shape (g,), float64, optional
        Odd length. Give with ``mask``.

    Returns
    -------
    ndarray, shape (H, W, C), uint8

    Raises
    ------
    ValueError
        If shapes are wrong (not 2-D, even sizes), only one of ``mask`` and ``gauss1d`` is given,
        ``mask`` and ``gauss1d`` describe no positive kernel, or the kernel is too large.
    """

def gaussian_blur(
    image: npt.NDArray[np.uint8], kernel1d: npt.NDArray[np.float32]
) -> npt.NDArray[np.uint8]:
    """Gaussian blur as ``torchvision.transforms.functional.gaussian_blur`` on a uint8 image.

    Correlation with ``outer(kernel1d, kernel1d)`` in float32 after "reflect" padding by
    ``len(kernel1d) // 2`` (mirror without repeating the edge pixel), rounded half to even
    (``torch.round``) and cast to uint8. Computed separably in float32 (rows, then columns, four
    taps per pass), which differs from torch's 2-D float32 sum by rounding only: about 2e-5 of the
    pixels differ by one level at 224 px. Images smaller than the padding keep mirroring (period
    ``2 * (n - 1)``; a 1-pixel axis repeats its pixel) where torch raises; results are clamped to
    [0, 255] (only reachable with kernels that do not sum to 1).

    torchvision's kernel for size k: ``sigma = 0.3 * ((k - 1) * 0.5 - 1) + 0.8`` (torchvision writes
    ``k * 0.15 + 0.35``), ``x = linspace(-(k - 1) / 2, (k - 1) / 2, k)`` in float32,
    ``pdf = exp(-0.5 * (x / sigma)**2)`` in float32, ``kernel1d = pdf / sum(pdf)``.

    Parameters
    ----------
    image : ndarray, shape (H, W, C), uint8
    kernel1d : ndarray, shape (k,), float32
        Odd length (other dtypes are cast to float32); ``sum(abs(kernel1d))`` must be finite and at
        most 1024.

    Returns
    -------
    ndarray, shape (H, W, C), uint8

    Raises
    ------
    ValueError
        If ``image`` is not 3-D with positive sizes, or ``kernel1d`` is not 1-D of odd length or is
        too large.
    """

def resize_box(
    image: npt.NDArray[np.uint8], width: int, height: int
) -> npt.NDArray[np.uint8]:
    """Pillow ``Image.resize((width, height), Image.BOX)`` of an 8-bit image, bit for bit.

    Each channel is resampled like a Pillow "L" image (for C = 1 and 3 this is exactly Pillow's "L"
    and "RGB"). Pillow's rules (``src/libImaging/Resample.c``), per axis from n to m samples:
    ``scale = n / m``, ``filterscale = max(scale, 1)``, ``support = 0.5 * filterscale``; output i
    has centre ``(i + 0.5) * scale`` and window ``[int(centre - support + 0.5),
    int(centre + support + 0.5))`` clipped to [0, n); tap x weighs ``box((x - centre + 0.5) /
    filterscale)`` (1 on (-0.5, 0.5], else 0), normalised by the sum and rounded to 22-bit fixed
    point (``int(0.5 + w * 2**22)``); ``out = clip((2**21 + sum(px * W)) >> 22, 0, 255)``. The two
    passes are rounded to 8 bits each; a pass whose size is unchanged is skipped. As in Pillow 13,
    the vertical pass runs first when both are needed and ``H - height > 2 * (W - width)``,
    otherwise the horizontal pass runs first.

    Parameters
    ----------
    image : ndarray, shape (H, W, C), uint8
        H, W < 2**24.
    width, height : int
        Output size in pixels, in [1, 2**24).

    Returns
    -------
    ndarray, shape (height, width, C), uint8

    Raises
    ------
    ValueError
        If ``image`` is not 3-D with positive sizes, or a size is outside [1, 2**24).
    """

def pixelate(
    image: npt.NDArray[np.uint8], width: int, height: int
) -> npt.NDArray[np.uint8]:
    """``resize_box(resize_box(image, width, height), W, H)`` in one call, bit for bit: the
    reference ``Pixelate`` (two Pillow BOX resizes) with the small size given explicitly.

    When the small size is at most the image size, the second resize is a pure copy of pixels
    (Pillow's BOX upsampling gives one tap of weight 1 per output) and is done as a gather.

    Parameters, their ranges and the errors raised are those of :func:`resize_box`, with
    ``(width, height)`` the size of the intermediate image (the reference uses ``int(W * factor)``,
    ``int(H * factor)``).

    Returns
    -------
    ndarray, shape (H, W, C), uint8
        The shape of ``image``.
    """

def _disk_isa() -> str:
    """Instruction set of the disk filter (the defocus fast path of ``filter2d``): "avx512",
    "avx2" or "baseline". At load: "avx512" where the CPU has AVX-512, else "baseline"; "avx2"
    only after ``_set_disk_isa("avx2")`` (it ran 2-5x slower than the baseline on an AVX2-only
    AMD EPYC, csrc/blur.cpp ``best_disk_variant``)."""

def _set_disk_isa(name: str) -> bool:
    """Testing aid: switch the disk filter to ``name`` if this CPU runs it (returns whether it
    did). Not thread-safe; every variant gives identical bytes."""

def _disk_plan_kind(kernel: np.ndarray, mask: np.ndarray, gauss1d: np.ndarray) -> str:
    """Testing aid: the evaluation ``filter2d(image, kernel, mask, gauss1d)`` takes: without a
    disk plan "exact" (classes of equal taps) or "structured" (mask runs and the Gaussian, with
    "+border" when the kernel grid's reflect-101 border is carried as border terms), whichever is
    cheaper; else "free" (Gaussian-free disk plan), "gauss" (float32 evaluation of the
    Gaussian plan) or "tiny" (Gaussian plan decided from the disk sum alone where its margins
    allow), followed by "+corrected" when the plan has kernel-border corrections."""

def _set_disk_double(on: bool) -> None:
    """Testing aid: make the disk filter's Gaussian plans take their exact double evaluation for
    every sample (``True``) or only where the float32 evaluation cannot decide the truncation
    (``False``, the default). Not thread-safe; both settings give identical bytes."""

def _resample_isa() -> str:
    """Instruction set of the resampling kernels: "avx512", "avx2", "sse2" or "portable"."""

def _set_resample_isa(name: str) -> bool:
    """Testing aid: switch the resampling kernels to ``name`` if this CPU runs it (returns whether
    it did). Not thread-safe; every path gives identical bytes."""

def apply_lut(
    image: npt.NDArray[np.uint8], lut: npt.NDArray[np.uint8], portable: bool = False
) -> npt.NDArray[np.uint8]:
    """``out[y, x, c] = lut[image[y, x, c]]`` (the colour corruptions' 256-entry tables).

    AVX-512 VBMI byte permutes (``VPERMI2B``, 64 bytes per step) on CPUs that have them, a plain
    loop otherwise or with ``portable=True``; both give the same bytes.

    Parameters
    ----------
    image : ndarray, shape (H, W, C), uint8
    lut : ndarray, shape (256,), uint8

    Raises
    ------
    ValueError
        ``image`` not 3-D with positive sizes, or ``lut`` not of shape (256,).
    """

def luma_sum(image: npt.NDArray[np.uint8], portable: bool = False) -> int:
    """Sum over pixels of Pillow's luma ``(19595 R + 38470 G + 7471 B + 0x8000) >> 16``
    (Pillow ``libImaging/Convert.c``, RGB -> L), or of the values for one channel.

    Parameters
    ----------
    image : ndarray, shape (H, W, 1) or (H, W, 3), uint8

    Raises
    ------
    ValueError
        Not 3-D, or a channel count other than 1 or 3.
    """

def alias_sample(
    image: npt.NDArray[np.uint8],
    table: npt.NDArray[np.uint32],
    key: int,
    portable: bool = False,
    out: npt.NDArray[np.uint8] | None = None,
) -> npt.NDArray[np.uint8]:
    """Replace each element by an alias-method draw from its row of a packed table.

    ``table[v, col] = (t << 8) | a`` (see ``corruptions.noise.alias_tables``). Element ``j`` of
    the flat image takes 32 bits of ``splitmix64(key + (j // 2 + 1) * 0x9E3779B97F4A7C15)``
    (high half for even ``j``, low half for odd), ``col`` = its top 8 bits, ``u`` = its low 24;
    the output is ``col`` if ``u < t`` else ``a``. AVX-512 (16 elements per step, gathered
    table entries) where available, a plain loop otherwise or with ``portable=True``; the same
    bytes either way.

    Parameters
    ----------
    image : ndarray, shape (H, W, C), uint8
    table : ndarray, shape (256, 256), uint32
    key : int in [0, 2**64)
    out : ndarray, optional
        Where to write (returned): writeable, C-contiguous uint8 of the image's shape, sharing
        no memory with it. None: a new array.

    Raises
    ------
    ValueError
        ``image`` not 3-D with positive sizes, ``table`` not of shape (256, 256), or ``out``
        not a writeable C-contiguous uint8 array of the image's shape or sharing memory with
        ``image`` (the same functions, brightness, contrast, gamma and hsv_shift, check
        ``out`` alike).
    """

def blend_lut(base: int, factor: float) -> npt.NDArray[np.uint8]:
    """(256,) table of Pillow's ``Image.blend`` of the constant ``base`` (0..255) with each byte
    ``v``: ``float32(base) + float32(factor) * (float32(v) - float32(base))``, clipped to
    [0, 255] when ``float32(factor)`` is outside [0, 1], truncated (``corruptions.color._blend_lut``,
    entry for entry). ValueError if ``base`` is outside 0..255."""

def gamma_lut(gamma: float) -> npt.NDArray[np.uint8]:
    """(256,) table ``int((255 + 1 - 1e-3) * pow(v / 255, gamma))`` with C ``pow``, as
    torchvision's PIL ``adjust_gamma`` (gain 1) computes it (``corruptions.color.gamma_lut``).
    ValueError if ``gamma`` is negative or NaN."""

def brightness(
    image: npt.NDArray[np.uint8], factor: float, out: npt.NDArray[np.uint8] | None = None
) -> npt.NDArray[np.uint8]:
    """``apply_lut(image, blend_lut(0, factor))`` (Pillow ``ImageEnhance.Brightness``). ``out``
    (optional, returned): where to write, as for :func:`alias_sample`."""

def contrast(
    image: npt.NDArray[np.uint8], factor: float, out: npt.NDArray[np.uint8] | None = None
) -> npt.NDArray[np.uint8]:
    """``apply_lut(image, blend_lut(int(luma_sum(image) / (H * W) + 0.5), factor))`` (Pillow
    ``ImageEnhance.Contrast``), with one GIL release for the sum and the table; ValueError
    unless C is 1 or 3. ``out`` (optional, returned): where to write, as for
    :func:`alias_sample`."""

def gamma(
    image: npt.NDArray[np.uint8], gamma: float, out: npt.NDArray[np.uint8] | None = None
) -> npt.NDArray[np.uint8]:
    """``apply_lut(image, gamma_lut(gamma))`` (ValueError if ``gamma`` is negative or NaN).
    ``out`` (optional, returned): where to write, as for :func:`alias_sample`."""

def hsv_shift(
    image: npt.NDArray[np.uint8], channel: int, amount: float, isa: str = "auto",
    out: npt.NDArray[np.uint8] | None = None,
) -> npt.NDArray[np.uint8]:
    """Shift HSV channel ``channel`` (0 H, 1 S, 2 V) by ``amount`` in [-1, 1]: scikit-image's
    float64 rgb2hsv / hsv2rgb, clip, * 255, truncate, bit for bit; (H, W, 1 or 3) uint8, a new
    array or ``out``. ``isa``: "auto" or one of :func:`_hsv_isas` (same bytes). ValueError for
    another shape, channel, an unavailable isa or a bad ``out``."""

def _hsv_isas() -> list[str]:
    """Instruction sets hsv_shift can use here, best first ("avx512", "avx2", "baseline")."""

def rgbx_pixels(image: npt.NDArray[np.uint8]) -> npt.NDArray[np.uint8]:
    """New uint8 (H, W, 4) copy of a uint8 (H, W, 3) image with a fourth byte 255 per pixel
    (Pillow's "RGBX" layout, which ``Image.frombuffer`` maps without copying). Raises ValueError
    unless the image has 3 channels."""

def pil_pixels(schema: object, array: object, h: int, w: int, c: int) -> npt.NDArray[np.uint8] | None:
    """New uint8 (h, w, c) array of a Pillow image from its ``Image.__arrow_c_array__()``
    capsules: mode 'L' exported as uint8 ("C", h * w elements) for c = 1, mode 'RGB' as a
    fixed-size list "+w:4" of uint8 (R, G, B, padding) for c = 3. Returns None for any other
    layout (format, nulls, lengths, missing buffers); the capsules keep ownership."""

def seed_sequence_state(words: list[int], n64: int) -> npt.NDArray[np.uint64]:
    """``numpy.random.SeedSequence(...).generate_state(n64, np.uint64)`` from the sequence's
    assembled uint32 entropy words (the entropy's words, least significant first, zero-padded to
    4 when spawn-key words follow, then those): NumPy's SeedSequence algorithm (csrc/seed.cpp).
    Raises ValueError for no words or n64 outside 1..2**20."""
