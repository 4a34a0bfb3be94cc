"""Defocus blur: the fast disk path of ``_native.filter2d`` and the reference kernel's construction.

The filtering is checked against the float64 direct-correlation oracle of
``tests/test_native.py`` (OpenCV ``filter2D`` semantics: correlation with the anchor at the kernel
centre, BORDER_REFLECT_101, then ``trunc(clip(x / 255, 0, 1) * 255)``, as the reference
``DefocusBlur`` does). The kernel's
float32 arithmetic (OpenCV ``GaussianBlur``) is checked against exact rational arithmetic; its
agreement with the real reference is in the golden-file tests.
"""
from __future__ import annotations

import math
import subprocess
import sys
from fractions import Fraction

import numpy as np
import pytest

import medmnistc_fast as mf
from medmnistc_fast import _native
from medmnistc_fast.corruptions import blur
from medmnistc_fast.registry import TABLES
from tests import variants
from tests.memory import peak_growth_kb
from tests.test_native import filter2d_oracle as oracle  # trunc(clip(filter2D(img / 255)) * 255)

# Every (radius, alias sigma) of the MedMNIST-C defocus tables, plus radii on both sides of the
# grid border (7, 8), non-integer radii and sigmas outside the tables.
TABLE_PARAMS = sorted({tuple(map(float, p)) for d in mf.DATASETS
                       if "defocus_blur" in TABLES[d] for p in TABLES[d]["defocus_blur"]})
EXTRA_PARAMS = [(6.5, 0.35), (7.5, 0.25), (3.3, 0.8), (8.0, 0.1), (7.0, 0.05), (8.0, 1.5),
                (0.3, 0.2), (4.7, 0.45)]
# Rows of exactly one strip of outputs (112 samples for Gaussian plans, 64 without) and one
# sample either side of it.
SHAPES = [(8, 8, 1), (8, 8, 3), (9, 23, 3), (31, 12, 1), (64, 96, 3), (96, 64, 1),
          (9, 112, 1), (9, 113, 1), (10, 37, 3), (11, 64, 1), (11, 63, 1)]

# Every instruction-set variant of the disk filter this CPU runs; the first is the default.
# In the order the extension picks by default: AVX-512 where the CPU has it, else the SSE2
# baseline (the AVX2 variant ran 2-5x slower than the baseline on an AVX2-only Zen 3; it is
# only ever selected by hand).
ISAS = variants.runnable(_native._set_disk_isa, ("avx512", "baseline", "avx2"))
isa = variants.fixture(_native._set_disk_isa, ISAS)


def natural(shape, seed):
    """Smooth blobs over a gradient, a flat patch, a saturated patch and mild noise."""
    h, w, c = shape
    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[0:h, 0:w].astype(np.float64)
    out = np.empty(shape)
    for ch in range(c):
        f = 40 + 120 * xx / max(w - 1, 1)
        for _ in range(3):
            cy, cx, s = rng.uniform(0, h), rng.uniform(0, w), rng.uniform(2, 10)
            f += rng.uniform(-80, 120) * np.exp(-((yy - cy) ** 2 + (xx - cx) ** 2) / (2 * s * s))
        out[..., ch] = f
    out[: h // 3, : w // 3] = 173
    out[h // 2:, w // 2:] = 255
    out += rng.normal(0, 2, shape)
    return np.clip(np.rint(out), 0, 255).astype(np.uint8)


def check(img, radius, alias):
    kernel, mask, gauss = blur._defocus_parts(radius, alias)
    ours = _native.filter2d(img, kernel, mask, gauss)
    want = oracle(img, kernel)
    diff = np.abs(ours.astype(np.int16) - want)
    assert diff.max() <= 1, (radius, alias, img.shape)
    # The fast path's error is float rounding (well under 1e-5 of a gray level), so a one-level
    # difference needs an exact result within that distance of an integer: rare.
    assert np.count_nonzero(diff) <= max(2, diff.size // 2000), (radius, alias, img.shape)


@pytest.mark.parametrize("radius, alias", TABLE_PARAMS + EXTRA_PARAMS)
def test_fast_path_matches_direct_correlation(radius, alias, isa):
    rng = np.random.default_rng(int(radius * 100 + alias * 1000))
    for k, shape in enumerate(SHAPES):
        check(rng.integers(0, 256, shape, dtype=np.uint8), radius, alias)
        check(natural(shape, k), radius, alias)


@pytest.mark.parametrize("radius, alias", TABLE_PARAMS)
def test_real_images_at_224(radius, alias):
    inputs = np.load("tests/golden/inputs.npz")
    for name in ("image__retina", "image__ct_small"):
        img = inputs[name]
        img = img if img.ndim == 3 else img[..., None]
        # A 96 x 112 crop keeps the oracle quick while covering borders and content.
        check(np.ascontiguousarray(img[40:136, 60:172]), radius, alias)


@pytest.mark.parametrize("radius, alias", TABLE_PARAMS + [(8.0, 1.5), (7.0, 0.05)])
def test_flat_images_exact(radius, alias, isa):
    # Flat regions give value * sum(kernel); the fast path keeps that gain to double precision,
    # so the truncation agrees with the oracle on every level (one channel per level).
    kernel, mask, gauss = blur._defocus_parts(radius, alias)
    img = np.ascontiguousarray(np.broadcast_to(np.arange(256, dtype=np.uint8), (5, 7, 256)))
    np.testing.assert_array_equal(_native.filter2d(img, kernel, mask, gauss), oracle(img, kernel))


# (radius, alias sigma) pairs of the tables that take each ring shape compiled into the RGB disk
# filter: radii 2-6 without the Gaussian, 5-6 with it, 7-8 with border corrections.
COMPILED_SHAPES = [(2.0, 0.01), (3.0, 0.1), (4.0, 0.1), (5.0, 0.1), (6.0, 0.1), (5.0, 0.2),
                   (6.0, 0.3), (7.0, 0.3), (7.0, 0.4), (8.0, 0.5)]


@pytest.mark.parametrize("radius, alias", COMPILED_SHAPES)
def test_compiled_shapes_equal_plan_rings(radius, alias, isa):
    # RGB images at these radii take ring shapes compiled in; one channel at a time they take
    # the rings read from the plan. The integer sums and the float steps are the same, so the
    # bytes must be.
    from medmnistc_fast.sample import sample_images
    kernel, mask, gauss = blur._defocus_parts(radius, alias)
    for img in list(sample_images(2, 224, rgb=True)) + [natural((57, 91, 3), 5),
                                                         natural((9, 23, 3), 6)]:
        planes = [_native.filter2d(np.ascontiguousarray(img[..., ch:ch + 1]), kernel, mask, gauss)
                  for ch in range(3)]
        np.testing.assert_array_equal(_native.filter2d(img, kernel, mask, gauss),
                                      np.concatenate(planes, axis=2), err_msg=str(img.shape))


def variant_images():
    """Real 224 px images (sample RGB and gray), random ones, more than 8 channels (filtered
    plane by plane), odd sizes, and flat, binary and saturated content."""
    from medmnistc_fast.sample import sample_images
    rng = np.random.default_rng(3)
    images = list(sample_images(3, 224, rgb=True)) + [
        g[..., None] for g in sample_images(2, 224, rgb=False)]
    images += [rng.integers(0, 256, (57, 91, 3), dtype=np.uint8),
               rng.integers(0, 256, (20, 30, 11), dtype=np.uint8), natural((41, 77, 2), 4),
               np.full((33, 47, 3), 201, np.uint8),
               (rng.random((40, 115, 1)) < 0.5).astype(np.uint8) * 255,
               np.clip(rng.integers(240, 300, (29, 60, 3)), 0, 255).astype(np.uint8)]
    return images


VARIANT_PARAMS = TABLE_PARAMS + [(8.0, 1.5), (7.0, 0.05), (7.5, 0.45), (8.0, 0.15)]


def test_variants_agree_bit_for_bit():
    # The variants run the same integer, float32 and double operations in the same order, so
    # they must give the same bytes, on both paths of the Gaussian plans (float32 where it
    # decides the truncation, double elsewhere) and on the Gaussian-free plans.
    if len(ISAS) < 2:
        pytest.skip("this CPU runs only one variant of the disk filter")
    images = variant_images()
    results = {}
    for name in ISAS:
        assert _native._set_disk_isa(name)
        results[name] = [_native.filter2d(img, *blur._defocus_parts(r, a))
                         for img in images for r, a in VARIANT_PARAMS]
    assert _native._set_disk_isa(ISAS[0])
    for name in ISAS[1:]:
        for want, got in zip(results[ISAS[0]], results[name]):
            np.testing.assert_array_equal(got, want)


def test_float32_decisions_equal_the_double_evaluation(isa):
    # Gaussian plans evaluate in float32 and fall back to the plan's double formula where
    # float32 cannot decide the truncation; forcing the double formula everywhere must give the
    # same bytes (a wrong decision would differ by one level, which the oracle tests allow).
    images = variant_images()
    fast = [_native.filter2d(img, *blur._defocus_parts(r, a))
            for img in images for r, a in VARIANT_PARAMS]
    _native._set_disk_double(True)
    try:
        exact = [_native.filter2d(img, *blur._defocus_parts(r, a))
                 for img in images for r, a in VARIANT_PARAMS]
    finally:
        _native._set_disk_double(False)
    for want, got in zip(exact, fast):
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("radius, alias", VARIANT_PARAMS)
def test_plan_kinds(radius, alias):
    # Which evaluation each kernel takes, so that the equality tests above cover every path.
    # The tiny pre-decision (B alone decides where trunc(wc B - lo) == trunc(wc B + hi)) needs
    # its window hi + lo, about wc rho 255 (sum(Me) + rho sum(Mk)), well below the spacing
    # 1 / N of wc B; sum(Me), sum(Mk) <= 4 N and wc <= 1.02 / N bound it by
    # 1.02 * 255 * 4 rho (1 + rho).
    kernel, mask, gauss = blur._defocus_parts(radius, alias)
    kind = _native._disk_plan_kind(kernel, mask, gauss)
    n = int(mask.sum())
    rho = gauss[0] / gauss[1]
    base, _, corr = kind.partition("+")
    assert corr in ("", "corrected")
    if rho * 255 * n < 2.0 ** -40:  # the neighbour weights cannot move a result
        assert base == "free"
    elif 1.02 * 255 * 4 * rho * (1 + rho) + 2.0 ** -13 < 0.7 / n:
        assert base == "tiny"
    else:  # no parameter may fall between the bounds unchecked
        assert rho > 1e-3, (radius, alias, rho)
        assert base == "gauss"
    # Border corrections exist exactly when the blurred disk reaches the grid's border rows.
    assert (corr == "corrected") == (base != "free" and bool(mask[1].any() or mask[0].any()))


def test_tiny_plans_in_the_tables():
    # The MedMNIST-C levels with alias sigma 0.2 take the pre-decision (dermamnist and
    # retinamnist level 2, pathmnist levels 3 and 4); their neighbours at 0.3 and above do not.
    kinds = {p: _native._disk_plan_kind(*blur._defocus_parts(*p))
             for p in [(5.0, 0.2), (6.0, 0.2), (6.0, 0.3), (7.0, 0.4), (8.0, 0.5)]}
    assert kinds == {(5.0, 0.2): "tiny", (6.0, 0.2): "tiny", (6.0, 0.3): "gauss",
                     (7.0, 0.4): "gauss+corrected", (8.0, 0.5): "gauss+corrected"}


def test_plan_cache_tells_kernels_apart():
    # The disk plans are cached by the bytes of (kernel, mask, gauss1d), the last few compared in
    # place: cycling through more kernels than that, including one that differs from another
    # only by a factor (same mask and Gaussian), every call must still filter with its own.
    params = TABLE_PARAMS[:12]
    kernels = [blur._defocus_parts(*p) for p in params]
    k, mask, gauss = blur._defocus_parts(5.0, 0.2)
    kernels.append((k * np.float32(0.5), mask, gauss))
    img = natural((12, 20, 3), 5)
    for _ in range(3):
        for kernel, mask, gauss in kernels:
            ours = _native.filter2d(img, kernel, mask, gauss)
            assert np.abs(ours.astype(np.int16) - oracle(img, kernel)).max() <= 1


def test_default_disk_variant_is_avx512_or_the_baseline():
    # a fresh process: this module's ISAS switched variants in this one
    out = subprocess.run([sys.executable, "-c", "from medmnistc_fast import _native; "
                          "print(_native._disk_isa())"], capture_output=True, text=True,
                         check=True).stdout.strip()
    assert out == ("avx512" if "avx512" in ISAS else "baseline")


def test_set_disk_isa_refuses_unknown():
    assert _native._set_disk_isa("sse9") is False
    assert _native._disk_isa() == ISAS[0]


def test_public_call_uses_reference_kernel():
    # At 224 px the public call filters with the reference's own kernel (scale 1); a gray image
    # goes L -> RGB -> blur -> L, which leaves equal channels unchanged.
    img = natural((224, 224, 1), 3)[..., 0]
    for level, (radius, alias) in enumerate(TABLES["octmnist"]["defocus_blur"], start=1):
        ours = mf.corrupt(img, "defocus_blur", level, dataset="octmnist")
        want = oracle(img[..., None], blur.defocus_kernel(float(radius), float(alias)))[..., 0]
        assert np.abs(ours.astype(np.int16) - want).max() <= 1


def test_general_kernel_path_still_exact():
    # Without mask and Gaussian (other image sizes) filter2d takes the exact plan: dyadic taps
    # make every sum exact, so it must agree with the oracle bit for bit.
    rng = np.random.default_rng(11)
    kernel = rng.integers(0, 64, (7, 5)) / 2.0 ** 12
    for shape in [(8, 8, 3), (21, 13, 1)]:
        img = rng.integers(0, 256, shape, dtype=np.uint8)
        np.testing.assert_array_equal(_native.filter2d(img, kernel), oracle(img, kernel))


def test_fma32_is_single_rounding():
    rng = np.random.default_rng(5)
    n = 4000
    a = (rng.standard_normal(n) * np.exp2(rng.integers(-30, 5, n))).astype(np.float32)
    b = (rng.standard_normal(n) * np.exp2(rng.integers(-30, 5, n))).astype(np.float32)
    c = (rng.standard_normal(n) * np.exp2(rng.integers(-60, 5, n))).astype(np.float32)
    # a * b + c = 1 + 3 * 2^-24 - 2^-54: its double rounding is the float32 halfway point
    # 1 + 3 * 2^-24, where ties-to-even would round up; the single rounding goes down. Also exact
    # ties (1 + 2^-24: to even) and their mirror images.
    a[:4] = np.float32(2.0 ** -24 * (1 + 2.0 ** -15))
    b[:4] = np.float32(1 - 2.0 ** -15)
    c[:4] = np.float32(1 + 2.0 ** -23)
    a[1], c[1] = -a[1], -c[1]
    a[2], b[2], c[2] = np.float32(2.0 ** -24), np.float32(1.0), np.float32(1.0)
    a[3], b[3], c[3] = np.float32(2.0 ** -24), np.float32(3.0), np.float32(1.0)
    got = [blur._fma32(a[i], b[i], c[i]) for i in range(n)]
    for i in range(n):
        exact = Fraction(float(a[i])) * Fraction(float(b[i])) + Fraction(float(c[i]))
        lo = np.float32(float(exact))  # nearest double, then float32: refine by hand
        cands = [np.nextafter(lo, np.float32(-np.inf)), lo, np.nextafter(lo, np.float32(np.inf))]
        errs = [abs(Fraction(float(v)) - exact) for v in cands]
        best = min(errs)
        winners = [v for v, e in zip(cands, errs) if e == best]
        if len(winners) == 2:  # a tie: round half to even
            winners = [v for v in winners if int(v.view(np.uint32)) % 2 == 0]
        assert got[i] == winners[0], (a[i], b[i], c[i])


@pytest.mark.parametrize("ksize", [3, 5])
def test_gauss1d_is_the_normalised_gaussian(ksize):
    for sigma in (0.01, 0.1, 0.3, 0.6, 1.7):
        x = np.arange(ksize) - (ksize - 1) / 2
        want = np.exp(-x * x / (2 * sigma * sigma))
        want /= want.sum()
        got = blur._gauss1d(sigma, ksize)
        np.testing.assert_allclose(got, want, rtol=1e-14, atol=1e-300)
        assert got[0] == got[-1] and math.isclose(got.sum(), 1.0, rel_tol=1e-15)


# Gaussian plans without border corrections redo undecided vectors in blocks of 256 output rows
# (blur.cpp, kDiskDeferRows) from a ring of 512 rows of B, and every Gaussian plan copies the
# staged rows of a partial strip (112 outputs a strip) per block: heights around one and two
# blocks, with whole and partial strips.
TALL_SHAPES = [(255, 9, 1), (256, 9, 3), (257, 113, 1), (258, 37, 3), (513, 8, 1),
               (515, 115, 1), (769, 20, 2)]


@pytest.mark.parametrize("radius, alias, kind", [(5.0, 0.2, "tiny"), (6.0, 0.2, "tiny"),
                                                 (3.0, 0.3, "gauss"), (7.0, 0.3, "gauss+corrected")])
def test_tall_images_across_deferred_blocks(radius, alias, kind, isa):
    kernel, mask, gauss = blur._defocus_parts(radius, alias)
    assert _native._disk_plan_kind(kernel, mask, gauss) == kind
    for k, shape in enumerate(TALL_SHAPES):
        img = natural(shape, k)
        fast = _native.filter2d(img, kernel, mask, gauss)
        check(img, radius, alias)
        # Every vector through the double evaluation (deferred where the plan defers): B of
        # each block's rows must still be in the ring when the block is redone.
        _native._set_disk_double(True)
        try:
            exact = _native.filter2d(img, kernel, mask, gauss)
        finally:
            _native._set_disk_double(False)
        np.testing.assert_array_equal(fast, exact)


def test_tall_image_scratch_does_not_grow_with_height():
    # A 1,000,000 x 9 gray image (9 MB) needs its padded copy (25 samples a row for radius 5)
    # and row pointers (8 bytes a row), about 50 MB with input and output. Keeping B (256 bytes
    # a row), the staged outputs (128) and the redo list (32) for the whole strip added 416 MB.
    # Peak resident memory of a fresh process, after a 1,000 x 9 image and after the tall one.
    setup = ("import numpy as np\n"
             "from medmnistc_fast import _native\n"
             "from medmnistc_fast.corruptions import blur\n"
             "parts = blur._defocus_parts(5.0, 0.2)\n"
             "def defocus(h):\n"
             "    img = np.random.default_rng(0).integers(0, 256, (h, 9, 1), np.uint8)\n"
             "    assert _native.filter2d(img, *parts).shape == img.shape")
    growth = peak_growth_kb(setup, "defocus(n)", 1000, 1_000_000)
    assert growth < 150_000, growth  # kB
