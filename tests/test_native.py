"""Tests of the C++ blur kernels in ``medmnistc_fast._native`` against slow NumPy oracles.

Each oracle below is written for clarity, not speed, straight from the arithmetic the reference
(``medmnistc`` 0.1.0, ``corruptions/filter.py``) and the libraries it calls perform. Comparisons
with the real reference (ImageMagick, OpenCV, torchvision) live in the golden-file tests.
"""

from __future__ import annotations

import math
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
from scipy import ndimage

from medmnistc_fast import _native
from medmnistc_fast.corruptions.blur import motion_taps  # checked against the reference in test_golden

# Shapes (H, W, C): degenerate, odd, non-square, gray, RGB, and a channel count without a fast path.
SHAPES = [
    (1, 1, 1), (1, 1, 3), (2, 3, 3), (3, 2, 1), (7, 13, 1), (13, 7, 3), (31, 17, 3), (24, 24, 4),
]


def random_image(shape, seed):
    return np.random.default_rng(seed).integers(0, 256, shape, dtype=np.uint8)


def natural_image(shape, seed):
    """Smooth blobs, a gradient, a flat patch, a saturated patch and mild noise."""
    h, w, c = shape
    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[0:h, 0:w].astype(np.float64)
    img = np.zeros((h, w, c))
    for ch in range(c):
        field = 60 + 80 * xx / max(w - 1, 1)
        for _ in range(4):
            cy, cx = rng.uniform(0, h), rng.uniform(0, w)
            s, a = rng.uniform(2, 12), rng.uniform(-90, 120)
            field += a * np.exp(-((yy - cy) ** 2 + (xx - cx) ** 2) / (2 * s * s))
        img[..., ch] = field + rng.normal(0, 4, (h, w))
    img[: h // 3, : w // 3] = 77
    img[h // 2 :, w // 2 :, 0] = 255
    return np.clip(np.rint(img), 0, 255).astype(np.uint8)


def images(shape):
    yield random_image(shape, 1)
    yield natural_image(shape, 2)


def assert_within_one_level(got, want, max_fraction):
    """|got - want| <= 1, and equal except on at most max(2, max_fraction * size) samples."""
    diff = np.abs(got.astype(int) - want.astype(int))
    assert diff.max(initial=0) <= 1
    assert np.count_nonzero(diff) <= max(2, max_fraction * diff.size)


def reflect101(i, n):
    """Index i mirrored into [0, n) without repeating the edge: ...cb|abcd|cb..., repeatedly."""
    if n == 1:
        return 0
    while i < 0 or i >= n:
        i = -i if i < 0 else 2 * (n - 1) - i
    return i


def pad_reflect101(img, ph, pw):
    h, w = img.shape[:2]
    rows = [reflect101(i, h) for i in range(-ph, h + ph)]
    cols = [reflect101(j, w) for j in range(-pw, w + pw)]
    return img[np.ix_(rows, cols)]


# ------------------------------------------------------------------------------------------------
# Motion blur


def motion_oracle(img, weights, dx, dy):
    h, w, _ = img.shape
    quanta = img.astype(np.float64) * 257.0
    acc = np.zeros(img.shape)
    ys, xs = np.arange(h)[:, None], np.arange(w)[None, :]
    for wk, ox, oy in zip(weights, dx, dy):
        acc += wk * quanta[np.clip(ys + oy, 0, h - 1), np.clip(xs + ox, 0, w - 1)]
    q = np.clip(np.floor(acc + 0.5), 0, 65535)
    return (q // 257).astype(np.uint8)


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize(
    "params", [(5, 5, 12.5), (15, 5, -30.0), (20, 15, 44.9), (3, 3, 90.0), (40, 12, 200.0)]
)
def test_motion_blur_matches_oracle(shape, params):
    taps = motion_taps(*params)
    for img in images(shape):
        np.testing.assert_array_equal(_native.motion_blur(img, *taps), motion_oracle(img, *taps))


def test_motion_blur_matches_imagemagick_streak():
    # One white pixel at (15, 15) of a 31 x 31 RGB image through the reference's PNG -> Wand
    # MagickMotionBlurImage(15, 5, angle) -> PNG path, ImageMagick 6.9.11-60 Q16 (Debian 12).
    # (row, column, value); all other pixels 0. The streak trails towards -angle.
    expected = {
        30.0: [(9, 4, 1), (9, 5, 2), (10, 5, 3), (10, 6, 5), (11, 7, 7), (11, 8, 10), (12, 9, 14),
               (12, 10, 18), (13, 11, 22), (13, 12, 27), (14, 12, 31), (14, 13, 34), (15, 14, 36),
               (15, 15, 37)],
        -45.0: [(15, 15, 37), (16, 14, 71), (17, 13, 31), (18, 12, 27), (19, 11, 41), (20, 10, 14),
                (21, 9, 17), (22, 8, 5), (23, 7, 5), (24, 6, 1)],
    }
    img = np.zeros((31, 31, 3), np.uint8)
    img[15, 15] = 255
    for angle, pixels in expected.items():
        want = np.zeros((31, 31), np.uint8)
        for y, x, v in pixels:
            want[y, x] = v
        out = _native.motion_blur(img, *motion_taps(15, 5, angle))
        np.testing.assert_array_equal(out, np.repeat(want[..., None], 3, axis=2))


def test_motion_taps_round_like_imagemagick():
    # cos(pi/6) and sin(-pi/6) sit next to half-integers: ImageMagick's order of operations puts
    # k = 1 at dy = 0 for -30 degrees (math.radians would give -1).
    _, dx, dy = motion_taps(15, 5, -30.0)
    assert (dx[1], dy[1]) == (1, 0)


# ------------------------------------------------------------------------------------------------
# Zoom blur

ZOOM_LISTS = [np.arange(1, 1.11, 0.01), np.arange(1, 1.16, 0.01), np.arange(1, 1.21, 0.02),
              np.arange(1, 1.26, 0.02), np.arange(1, 1.31, 0.03)]


def zoom_axis_oracle(n, z):
    """Per output sample (i0, i1, w0, w1), image coordinates: clipped_zoom + scipy zoom, order 1."""
    c = int(np.ceil(n / z))
    top = (n - c) // 2
    n_out = int(round(c * z))
    scale = (c - 1) / (n_out - 1) if n_out > 1 else 1.0
    trim = (n_out - n) // 2
    taps = []
    for o in range(trim, trim + n):
        pos = o * scale
        if pos > c - 1:  # scipy mode='constant': outside the input gives cval = 0
            taps.append((top, top, 0.0, 0.0))
            continue
        i = math.floor(pos)
        t = pos - i
        taps.append((top + i, top + min(i + 1, c - 1), 1.0 - t, t))
    return taps


def zoom_layer_oracle(x, z):
    """One float32 layer: bilinear sum of four products in double, stored as float32."""
    h, w, _ = x.shape
    ty, tx = zoom_axis_oracle(h, z), zoom_axis_oracle(w, z)
    y0, y1, wy0, wy1 = (np.array(v) for v in zip(*ty))
    x0, x1, wx0, wx1 = (np.array(v) for v in zip(*tx))
    a = x.astype(np.float64)
    wy0, wy1 = wy0[:, None, None], wy1[:, None, None]
    wx0, wx1 = wx0[None, :, None], wx1[None, :, None]
    out = (a[y0][:, x0] * wy0 * wx0 + a[y0][:, x1] * wy0 * wx1
           + a[y1][:, x0] * wy1 * wx0 + a[y1][:, x1] * wy1 * wx1)
    return out.astype(np.float32)


def zoom_oracle(img, zooms):
    x = (img / 255.0).astype(np.float32)
    acc = np.zeros_like(x)
    for z in zooms:
        acc += zoom_layer_oracle(x, z)
    return (np.clip((x + acc) / (len(zooms) + 1), 0, 1) * 255).astype(np.uint8)


@pytest.mark.parametrize("shape", [(28, 28, 3), (30, 20, 3), (17, 45, 1), (64, 64, 1)])
@pytest.mark.parametrize("z", [1.0, 1.01, 1.1300000000000001, 1.3, 2.7])
def test_zoom_layer_oracle_is_scipy(shape, z):
    # The oracle's layer is the reference's clipped_zoom (per axis) with scipy.ndimage.zoom.
    x = (random_image(shape, 3) / 255.0).astype(np.float32)
    h, w, _ = shape
    ch, cw = int(np.ceil(h / z)), int(np.ceil(w / z))
    top, left = (h - ch) // 2, (w - cw) // 2
    zoomed = ndimage.zoom(x[top:top + ch, left:left + cw], (z, z, 1), order=1)
    th, tw = (zoomed.shape[0] - h) // 2, (zoomed.shape[1] - w) // 2
    np.testing.assert_array_equal(zoom_layer_oracle(x, z), zoomed[th:th + h, tw:tw + w])


def test_zoom_keeps_scipy_zero_edge():
    # The last output sample can land a rounding error past the input, where scipy's
    # mode='constant' returns 0: a 36 px axis at z = arange(1, 1.21, .02)[10] (1.2000000000000002)
    # loses its last row and column in the reference.
    z = ZOOM_LISTS[2][10]
    assert zoom_axis_oracle(36, z)[-1][2:] == (0.0, 0.0)
    img = natural_image((36, 36, 3), 10)
    x = (img / 255.0).astype(np.float32)
    layer = ndimage.zoom(x[3:33, 3:33], (z, z, 1), order=1)
    assert layer.shape == (36, 36, 3) and not layer[-1].any() and not layer[:, -1].any()
    np.testing.assert_array_equal(zoom_layer_oracle(x, z), layer)
    np.testing.assert_array_equal(_native.zoom_blur(img, np.array([z])), zoom_oracle(img, [z]))


@pytest.mark.parametrize("shape", SHAPES + [(28, 28, 3), (40, 23, 1)])
@pytest.mark.parametrize("level", range(5))
def test_zoom_blur_matches_oracle(shape, level):
    for img in images(shape):
        np.testing.assert_array_equal(_native.zoom_blur(img, ZOOM_LISTS[level]),
                                      zoom_oracle(img, ZOOM_LISTS[level]))


@pytest.mark.parametrize("zooms", [[], [1.0], [2.7, 1.3], [177 / 13]])
def test_zoom_blur_other_factor_lists(zooms):
    img = natural_image((33, 41, 3), 4)
    zooms = np.array(zooms, dtype=np.float64)
    np.testing.assert_array_equal(_native.zoom_blur(img, zooms), zoom_oracle(img, zooms))


# ------------------------------------------------------------------------------------------------
# filter2d (defocus blur)


def filter2d_oracle(img, kernel):
    """cv2.filter2D of img / 255 (correlation, reflect-101), clipped, times 255, truncated."""
    kh, kw = kernel.shape
    padded = pad_reflect101(img.astype(np.float64) / 255.0, kh // 2, kw // 2)
    h, w, _ = img.shape
    acc = np.zeros(img.shape)
    for i in range(kh):
        for j in range(kw):
            acc += float(kernel[i, j]) * padded[i:i + h, j:j + w]
    return (np.clip(acc, 0, 1) * 255).astype(np.uint8)


def gaussian_weights(n, sigma):
    """cv2.getGaussianKernel(n, sigma) for sigma > 0."""
    x = np.arange(n) - (n - 1) / 2
    g = np.exp(-x * x / (2 * sigma * sigma))
    return g / g.sum()


def blurred_mask_kernel(mask, g):
    """mask / sum(mask) in float32, blurred along x then y by the float32 weights g with
    reflect-101 at the kernel's border (OpenCV GaussianBlur, as the reference's disk())."""
    disk = mask.astype(np.float32) / np.float32(mask.sum())
    g32 = g.astype(np.float32)
    p = len(g) // 2
    rows = pad_reflect101(disk[..., None], 0, p)[..., 0]
    tmp = sum(g32[b] * rows[:, b:b + disk.shape[1]] for b in range(len(g)))
    cols = pad_reflect101(tmp[..., None], p, 0)[..., 0]
    return sum(g32[a] * cols[a:a + disk.shape[0]] for a in range(len(g))).astype(np.float32)


def defocus_kernel(radius, alias):
    """The reference disk(): normalised binary disk (float32) blurred by a float32 Gaussian (3x3,
    or 5x5 above radius 8) with reflect-101 at the kernel border; also its mask and weights."""
    span = np.arange(-8, 9) if radius <= 8 else np.arange(-radius, radius + 1)
    gx, gy = np.meshgrid(span, span)
    mask = (gx ** 2 + gy ** 2) <= radius ** 2
    g = gaussian_weights(3 if radius <= 8 else 5, alias)
    return blurred_mask_kernel(mask, g), mask, g


# (radius, alias) from the MedMNIST-C tables, plus the retinamnist 6th entry (radius 9, 5x5 blur),
# pathology224 level 5 (radius 10) and dermamnist level 5 at 448 px (radius 16, sigma 1).
DEFOCUS = [
    (3, 0.1), (5, 0.2), (6, 0.2), (7, 0.3), (8, 0.5), (2, 0.01), (0.5, 0.6), (1, 0.5), (9, 0.6),
    (10, 0.5), (16, 1.0),
]


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("ksize", [(1, 1), (3, 5), (17, 17), (9, 3)])
def test_filter2d_exact_on_dyadic_kernels(shape, ksize):
    # Dyadic taps make every sum exact in double, so the kernel and the oracle must agree bit for
    # bit, including images smaller than the kernel (mirrored repeatedly).
    rng = np.random.default_rng(5)
    kernel = rng.integers(-40, 200, ksize) / 2.0 ** 14
    kernel[rng.random(ksize) < 0.3] = kernel.flat[0]  # runs and repeated values
    for img in images(shape):
        np.testing.assert_array_equal(_native.filter2d(img, kernel), filter2d_oracle(img, kernel))


@pytest.mark.parametrize("shape", [(7, 13, 1), (31, 17, 3), (24, 24, 4)])
def test_filter2d_float_kernels(shape):
    rng = np.random.default_rng(6)
    for ksize in [(3, 3), (5, 11), (17, 17)]:
        kernel = rng.random(ksize).astype(np.float32)
        kernel /= kernel.sum()
        for img in images(shape):
            want = filter2d_oracle(img, kernel)
            assert_within_one_level(_native.filter2d(img, kernel), want, 1e-3)


@pytest.mark.parametrize("radius, alias", DEFOCUS)
def test_filter2d_defocus_exact_plan(radius, alias):
    kernel, _, _ = defocus_kernel(radius, alias)
    for img in images((40, 37, 3)):
        assert_within_one_level(_native.filter2d(img, kernel), filter2d_oracle(img, kernel), 1e-4)


@pytest.mark.parametrize("radius, alias", DEFOCUS)
@pytest.mark.parametrize("shape", [(1, 1, 3), (2, 3, 1), (7, 13, 3), (64, 48, 3)])
def test_filter2d_defocus_structured_plan(radius, alias, shape):
    kernel, mask, g = defocus_kernel(radius, alias)
    for img in images(shape):
        want = filter2d_oracle(img, kernel)
        assert_within_one_level(_native.filter2d(img, kernel, mask, g), want, 1e-3)
    flat = np.full(shape, 201, np.uint8)
    want = filter2d_oracle(flat, kernel)
    np.testing.assert_array_equal(_native.filter2d(flat, kernel, mask, g), want)


@pytest.mark.parametrize("radius, alias", [(9, 0.6), (10, 0.5), (16, 1.0), (12, 0.8)])
def test_filter2d_border_terms_in_use(radius, alias):
    # The 5 x 5 Gaussian of the large disks reflects at the kernel grid's border; the structured
    # plan carries that as border terms (not as remainder taps), which makes it the cheaper plan.
    kernel, mask, g = defocus_kernel(radius, alias)
    assert _native._disk_plan_kind(kernel, mask, g) == "structured+border"
    # A box is three runs of one class: the exact plan is cheaper than any structured one.
    box = np.full((3, 3), 1 / 9)
    assert _native._disk_plan_kind(box, np.ones((3, 3), np.uint8), gaussian_weights(3, 1.0)) \
        == "exact"


@pytest.mark.parametrize("seed", range(4))
def test_filter2d_border_terms_any_mask(seed):
    # Masks that are not disks (holes, several runs a row, touching every border) blurred by
    # 3- and 5-tap weights with reflect-101, as the reference's disk() would blur them.
    rng = np.random.default_rng(40 + seed)
    n = int(rng.choice([5, 9, 13]))
    mask = rng.random((n, n)) < 0.6
    mask[0, 0] = mask[-1, -1] = True
    g = gaussian_weights(int(rng.choice([3, 5])), rng.uniform(0.4, 1.5))
    kernel = blurred_mask_kernel(mask, g)
    for shape in [(3, 4, 1), (31, 17, 3), (40, 37, 2)]:
        for img in images(shape):
            want = filter2d_oracle(img, kernel)
            assert_within_one_level(_native.filter2d(img, kernel, mask, g), want, 1e-3)


def test_filter2d_structured_plan_keeps_structure_residual():
    # A kernel that the mask and Gaussian describe badly still filters correctly (the remainder
    # carries the difference); only its float-rounding part may be dropped.
    kernel, mask, g = defocus_kernel(4, 0.5)
    kernel = kernel.copy()
    kernel[0, :] += 0.01
    img = natural_image((30, 30, 3), 7)
    want = filter2d_oracle(img, kernel)
    assert_within_one_level(_native.filter2d(img, kernel, mask, g), want, 1e-3)


# ------------------------------------------------------------------------------------------------
# Gaussian blur (torchvision)


def torchvision_kernel1d(k):
    """torchvision's _get_gaussian_kernel1d(k, 0.3 * ((k - 1) * 0.5 - 1) + 0.8) in float32."""
    sigma = 0.3 * ((k - 1) * 0.5 - 1) + 0.8
    x = (np.arange(k) - (k - 1) / 2).astype(np.float32)
    arg = np.float32(-0.5) * (x / np.float32(sigma)) ** 2
    pdf = np.exp(arg.astype(np.float64)).astype(np.float32)  # torch's float32 exp, within 1 ulp
    return pdf / pdf.sum(dtype=np.float32)


def gaussian_oracle(img, kernel1d):
    """Reflect padding, correlation with outer(k, k) (float32 taps) in double, round half even."""
    kernel = np.outer(kernel1d, kernel1d).astype(np.float32)
    k = len(kernel1d)
    padded = pad_reflect101(img.astype(np.float64), k // 2, k // 2)
    h, w, _ = img.shape
    acc = np.zeros(img.shape)
    for i in range(k):
        for j in range(k):
            acc += float(kernel[i, j]) * padded[i:i + h, j:j + w]
    return np.clip(np.round(acc), 0, 255).astype(np.uint8)


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("k", [1, 3, 5, 11, 25])
def test_gaussian_blur_matches_oracle(shape, k):
    kernel1d = torchvision_kernel1d(k)
    for img in images(shape):
        want = gaussian_oracle(img, kernel1d)
        assert_within_one_level(_native.gaussian_blur(img, kernel1d), want, 1e-3)


def test_gaussian_blur_flat_image_is_unchanged():
    img = np.full((20, 9, 3), 133, np.uint8)
    np.testing.assert_array_equal(_native.gaussian_blur(img, torchvision_kernel1d(13)), img)


# ------------------------------------------------------------------------------------------------
# Conventions shared by all kernels


def all_kernels():
    kernel, mask, g = defocus_kernel(5, 0.2)
    return {
        "motion_blur": lambda img: _native.motion_blur(img, *motion_taps(10, 5, 33.0)),
        "zoom_blur": lambda img: _native.zoom_blur(img, ZOOM_LISTS[4]),
        "filter2d": lambda img: _native.filter2d(img, kernel),
        "filter2d_structured": lambda img: _native.filter2d(img, kernel, mask, g),
        "gaussian_blur": lambda img: _native.gaussian_blur(img, torchvision_kernel1d(11)),
    }


@pytest.mark.parametrize("name", list(all_kernels()))
def test_new_contiguous_output_and_untouched_input(name):
    run = all_kernels()[name]
    img = natural_image((29, 31, 3), 8)
    before = img.copy()
    out = run(img)
    assert out.dtype == np.uint8 and out.shape == img.shape and out.flags.c_contiguous
    assert not np.shares_memory(out, img)
    np.testing.assert_array_equal(img, before)


@pytest.mark.parametrize("name", list(all_kernels()))
def test_read_only_and_non_contiguous_inputs(name):
    run = all_kernels()[name]
    img = natural_image((31, 29, 3), 9)
    expected = run(img)
    read_only = img.copy()
    read_only.flags.writeable = False
    np.testing.assert_array_equal(run(read_only), expected)
    strided = np.ascontiguousarray(img.transpose(1, 0, 2)).transpose(1, 0, 2)
    assert not strided.flags.c_contiguous
    np.testing.assert_array_equal(run(strided), expected)


@pytest.mark.parametrize("name", list(all_kernels()))
def test_threads_give_the_same_results(name):
    run = all_kernels()[name]
    imgs = [natural_image((40, 40, 3), s) for s in range(6)]
    expected = [run(img) for img in imgs]
    with ThreadPoolExecutor(max_workers=3) as pool:
        for got, want in zip(pool.map(run, imgs), expected):
            np.testing.assert_array_equal(got, want)


def test_shape_errors():
    img = np.zeros((5, 5, 3), np.uint8)
    w, dx, dy = motion_taps(3, 2, 10.0)
    kernel = np.ones((3, 3)) / 9
    # Each call must fail on its own check: a bare ValueError would also accept an unrelated
    # error raised later (e.g. a missing odd-size check ending in the positive-kernel check).
    bad_calls = [
        (lambda: _native.motion_blur(np.zeros((5, 5), np.uint8), w, dx, dy),
         r"motion_blur: image must have shape \(H, W, C\), got 2 dimensions"),
        (lambda: _native.motion_blur(np.zeros((0, 5, 3), np.uint8), w, dx, dy),
         r"motion_blur: image dimensions must all be >= 1"),
        (lambda: _native.motion_blur(img, w, dx[:-1], dy),
         r"motion_blur: weights, dx and dy must have the same length >= 1"),
        (lambda: _native.motion_blur(img, w[:0], dx[:0], dy[:0]),
         r"motion_blur: weights, dx and dy must have the same length >= 1"),
        (lambda: _native.motion_blur(img, w * 1e4, dx, dy),
         r"motion_blur: sum\(\|weights\|\) must be finite and <= 1024"),
        (lambda: _native.zoom_blur(img, np.array([0.9])),
         r"zoom_blur: zoom factors must lie in \[1, 1e6\]"),
        (lambda: _native.zoom_blur(img, np.array([np.nan])),
         r"zoom_blur: zoom factors must lie in \[1, 1e6\]"),
        (lambda: _native.zoom_blur(img, np.ones((2, 2))),
         r"zoom_blur: zooms must be one-dimensional"),
        (lambda: _native.filter2d(img, np.ones((2, 3))),
         r"filter2d: kernel must be two-dimensional with odd sizes"),
        (lambda: _native.filter2d(img, np.ones(3)),
         r"filter2d: kernel must be two-dimensional with odd sizes"),
        (lambda: _native.filter2d(img, np.full((3, 3), np.inf)),
         r"filter2d: sum\(\|kernel\|\) must be finite and <= 1024"),
        (lambda: _native.filter2d(img, kernel, np.ones((3, 3), bool), None),
         r"filter2d: give both mask and gauss1d, or neither"),
        (lambda: _native.filter2d(img, kernel, np.ones((2, 3), bool), np.ones(3)),
         r"filter2d: mask must be two-dimensional with odd sizes"),
        (lambda: _native.filter2d(img, kernel, np.zeros((3, 3), bool), np.ones(3)),
         r"filter2d: mask and gauss1d must describe a positive kernel"),
        (lambda: _native.gaussian_blur(img, np.ones(4, np.float32) / 4),
         r"gaussian_blur: kernel1d must have an odd length"),
        (lambda: _native.gaussian_blur(img, np.ones((3, 3), np.float32)),
         r"gaussian_blur: kernel1d must be one-dimensional"),
    ]
    for call, message in bad_calls:
        with pytest.raises(ValueError, match=f"^{message}$"):
            call()
