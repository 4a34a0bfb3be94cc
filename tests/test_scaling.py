"""Blur kernels at sizes other than the reference's: the documented rules of
``blur.scaled_defocus_kernel`` and ``blur.scaled_gaussian_kernel1d`` (area resampling, then a
3-tap widening that keeps scale**2 times the kernel's variance) and of
``blur.motion_taps_scaled`` (the 224 px taps shrunk, spread bilinearly)."""
from __future__ import annotations

import math

import numpy as np
import pytest

import medmnistc_fast as mf
from medmnistc_fast.corruptions import blur
from medmnistc_fast.registry import TABLES

DEFOCUS = sorted({tuple(map(float, p)) for d in TABLES if "defocus_blur" in TABLES[d]
                  for p in TABLES[d]["defocus_blur"]})
GAUSS = sorted({int(k) for d in TABLES if "gaussian_blur" in TABLES[d]
                for k in TABLES[d]["gaussian_blur"]})
SCALES = [8 / 224, 11 / 96, 28 / 224, 28 / 96, 64 / 224, 0.5, 128 / 224, 0.9, 1.5, 2.0]


def torchvision_sigma(k):
    return 0.3 * ((k - 1) * 0.5 - 1) + 0.8


def variance_1d(w):
    w = np.asarray(w, np.float64)
    x = np.arange(w.shape[0]) - (w.shape[0] - 1) / 2
    return float((w * x * x).sum() / w.sum())


def test_gaussian_at_28px_hand_computed():
    # torchvision's 3-tap kernel for sigma 0.8 is (p, 1 - 2p, p), p = e / (1 + 2e) with
    # e = exp(-1 / (2 * 0.64)); its variance is 2p. At scale 1/8 the three 224 px cells fall in
    # one cell of the new grid (variance 0), so the widening (a, 1 - 2a, a) takes
    # 2a = 2p / 64: a = p / 64.
    e = math.exp(-1 / (2 * 0.8 * 0.8))
    p = e / (1 + 2 * e)
    got = blur.scaled_gaussian_kernel1d(3, 0.8, 1 / 8)
    assert got.dtype == np.float32 and got.shape == (3,)
    np.testing.assert_allclose(got, [p / 64, 1 - p / 32, p / 64], rtol=2e-6)


def test_scale_one_is_the_reference_kernel():
    for radius, alias in DEFOCUS:
        assert blur.scaled_defocus_kernel(radius, alias, 1.0) is blur.defocus_kernel(radius, alias)
    for k in GAUSS:
        s = torchvision_sigma(k)
        assert blur.scaled_gaussian_kernel1d(k, s, 1.0) is blur.gaussian_kernel1d(k, s)


@pytest.mark.parametrize("scale", SCALES)
def test_defocus_kernels_keep_sum_symmetry_and_variance(scale):
    for radius, alias in DEFOCUS:
        ref = blur.defocus_kernel(radius, alias).astype(np.float64)
        got = blur.scaled_defocus_kernel(radius, alias, scale).astype(np.float64)
        assert got.shape[0] % 2 == 1 and got.shape[0] == got.shape[1]
        assert (got >= 0).all()
        np.testing.assert_allclose(got, got.T, atol=1e-7)
        np.testing.assert_allclose(got, got[::-1, ::-1], atol=1e-7)
        assert got.sum() == pytest.approx(ref.sum(), rel=1e-6)
        # never less than the scaled variance: a blur never vanishes
        want = scale * scale * variance_1d(ref.sum(axis=1))
        assert variance_1d(got.sum(axis=1)) >= want * (1 - 1e-6), (radius, alias)


@pytest.mark.parametrize("scale", SCALES)
def test_gaussian_kernels_keep_sum_symmetry_and_variance(scale):
    for k in GAUSS:
        ref = blur.gaussian_kernel1d(k, torchvision_sigma(k)).astype(np.float64)
        got = blur.scaled_gaussian_kernel1d(k, torchvision_sigma(k), scale).astype(np.float64)
        assert got.shape[0] % 2 == 1 and (got >= 0).all()
        np.testing.assert_allclose(got, got[::-1], atol=1e-7)
        assert got.sum() == pytest.approx(1.0, rel=1e-6)
        assert variance_1d(got) >= scale * scale * variance_1d(ref) * (1 - 1e-6), k


def test_sub_pixel_blurs_get_exactly_the_scaled_variance():
    # octmnist's defocus disks (radius 0.5-2.5 px at 224) and chestmnist's Gaussians lie inside
    # one pixel of the 28 px grid: area resampling alone gives a single tap (variance 0), so the
    # widening supplies all of it.
    s = 28 / 224
    for radius, alias in (tuple(map(float, p)) for p in TABLES["octmnist"]["defocus_blur"]):
        ref = blur.defocus_kernel(radius, alias).astype(np.float64)
        got = blur.scaled_defocus_kernel(radius, alias, s).astype(np.float64)
        assert variance_1d(got.sum(axis=1)) == pytest.approx(
            s * s * variance_1d(ref.sum(axis=1)), rel=1e-5)
    for k in (3, 5, 7):
        ref = blur.gaussian_kernel1d(k, torchvision_sigma(k))
        got = blur.scaled_gaussian_kernel1d(k, torchvision_sigma(k), s)
        assert variance_1d(got) == pytest.approx(s * s * variance_1d(ref), rel=1e-5)


def checkerboard(size, channels):
    board = (np.indices((size, size)).sum(axis=0) % 2 * 255).astype(np.uint8)
    return board if channels == 1 else np.repeat(board[:, :, None], 3, axis=2)


@pytest.mark.parametrize("size", [28, 64])
def test_no_blur_vanishes_at_small_sizes(size):
    # Every level of every dataset's defocus, Gaussian and motion blur changes a checkerboard
    # (the previous rule left chestmnist's Gaussian blur and octmnist's defocus as the identity at
    # 28 px). At 8 px chestmnist level 1 (sigma 0.03 px) moves no pixel by half a level.
    for dataset in mf.DATASETS:
        for corruption in ("defocus_blur", "gaussian_blur", "motion_blur"):
            if corruption not in TABLES[dataset]:
                continue
            img = checkerboard(size, 3 if dataset in ("pathmnist", "bloodmnist", "dermamnist",
                                                      "retinamnist") else 1)
            for level in range(1, 6):
                out = mf.corrupt(img, corruption, level, dataset=dataset)
                change = np.abs(out.astype(int) - img).mean()
                assert change > 0, (dataset, corruption, level, size)


def test_motion_taps_scaled_hand_computed():
    # radius 1 -> n = 3 taps, weights (1, e^-1/2, e^-2) / sum at dx = 0, 1, 2 (angle 0). At
    # scale 1/2 they land on x = 0, 0.5, 1: pixel 0 gets w0 + w1 / 2, pixel 1 gets w1 / 2 + w2.
    e1, e2 = math.exp(-0.5), math.exp(-2.0)
    w0, w1, w2 = 1 / (1 + e1 + e2), e1 / (1 + e1 + e2), e2 / (1 + e1 + e2)
    w, dx, dy = blur.motion_taps_scaled(1.0, 1.0, 0.0, 0.5)
    assert dx.tolist() == [0, 1] and dy.tolist() == [0, 0]
    np.testing.assert_allclose(w, [w0 + w1 / 2, w1 / 2 + w2], rtol=1e-15)


@pytest.mark.parametrize("scale", [8 / 224, 28 / 224, 64 / 224, 0.5, 128 / 224])
def test_motion_taps_scaled_keep_sum_and_shift(scale):
    # Bilinear spreading keeps every tap's weight and its weighted position exactly: the
    # streak's total and mean offset are those of the 224 px taps times the scale.
    angles = np.random.default_rng(0).uniform(-45, 45, 20)
    for dataset in mf.DATASETS:
        for radius, sigma in TABLES[dataset].get("motion_blur", ()):
            for angle in angles:
                w0, dx0, dy0 = blur.motion_taps(float(radius), float(sigma), float(angle))
                w, dx, dy = blur.motion_taps_scaled(float(radius), float(sigma), float(angle),
                                                    scale)
                assert (w > 0).all() and len(set(zip(dx.tolist(), dy.tolist()))) == len(w)
                assert w.sum() == pytest.approx(1.0, abs=1e-12)
                assert (w * dx).sum() == pytest.approx(scale * (w0 * dx0).sum(), abs=1e-12)
                assert (w * dy).sum() == pytest.approx(scale * (w0 * dy0).sum(), abs=1e-12)


def test_motion_taps_scaled_at_scale_one_are_the_reference_taps():
    for angle in (-45.0, -30.0, 0.0, 17.3, 45.0):
        got = blur.motion_taps_scaled(15.0, 8.0, angle, 1.0)
        want = blur.motion_taps(15.0, 8.0, angle)
        assert all(a is b for a, b in zip(got, want))


def _numpy_scaling_operator(profile, scale):
    """The scaling operator in NumPy array operations (the form it had before it moved into
    one Numba function): the oracle of the bit-for-bit test below."""
    h = (profile.shape[0] - 1) // 2
    h_dst = max(0, math.ceil((h + 0.5) * scale - 0.5))
    dst = np.arange(-h_dst, h_dst + 1)[:, None]
    src = np.arange(-h, h + 1)[None, :]
    m = np.clip(np.minimum((dst + 0.5) / scale, src + 0.5)
                - np.maximum((dst - 0.5) / scale, src - 0.5), 0.0, None)

    def variance(w):
        c = (w.shape[0] - 1) // 2
        x = np.arange(-c, c + 1, dtype=np.float64)
        return float((w * x * x).sum() / w.sum())

    moved = blur._product(m, profile)
    shortfall = scale * scale * variance(profile) - variance(moved)
    if shortfall <= 0.0:
        return m
    a = 0.5 * shortfall
    op = (1.0 - 2.0 * a) * np.pad(m, ((1, 1), (0, 0)))
    op[:-2] += a * m
    op[2:] += a * m
    return op


def test_scaled_kernels_equal_their_numpy_formulation_bit_for_bit():
    """The scaled kernels decide truncations in the filtered images, so the compiled form
    must give the NumPy formulation's float32 bytes exactly (NumPy's sums are pairwise:
    blur._pairwise_sum repeats that order), for the tables' parameters and random ones
    (augmentation draws radius and sigma continuously), below and above scale 1."""
    rng = np.random.default_rng(11)
    draws = [(r, a, s) for r, a in DEFOCUS for s in SCALES]
    draws += [(float(rng.uniform(0.3, 14)), float(rng.uniform(0.01, 3)),
               float(rng.uniform(0.02, 2.5))) for _ in range(400)]
    for radius, alias, scale in draws:
        k = blur.defocus_kernel(radius, alias)
        if scale == 1.0:
            continue
        k64 = k.astype(np.float64)
        op = _numpy_scaling_operator(k64.sum(axis=1), scale)
        want = blur._product(blur._product(op, k64), op.T)
        want = (want * (float(k.sum(dtype=np.float64)) / want.sum())).astype(np.float32)
        got = blur.scaled_defocus_kernel(radius, alias, scale)
        assert got.tobytes() == want.tobytes(), (radius, alias, scale)
    for size in range(1, 40, 2):
        for sigma in (0.3, 0.8, float(rng.uniform(0.1, 5)), torchvision_sigma(size)):
            for scale in SCALES + [float(rng.uniform(0.02, 2.5))]:
                k64 = blur.gaussian_kernel1d(size, sigma).astype(np.float64)
                want = blur._product(_numpy_scaling_operator(k64, scale), k64)
                want = (want / want.sum()).astype(np.float32)
                got = blur.scaled_gaussian_kernel1d(size, sigma, scale)
                assert scale == 1.0 or got.tobytes() == want.tobytes(), (size, sigma, scale)


def test_pairwise_sum_is_numpys_sum():
    rng = np.random.default_rng(12)
    for n in list(range(0, 300)) + [511, 512, 513, 1000, 1031, 4096, 5000]:
        a = rng.standard_normal(n) * rng.choice([1e-9, 1.0, 1e9])
        assert blur._pairwise_sum(a) == a.sum(), n


@pytest.mark.parametrize("bad", [0, -0.5, math.nan, math.inf])
def test_scaled_kernels_refuse_bad_parameters(bad):
    """scale 0 divided by zero, NaN went through, negative scales returned a kernel."""
    for call, name in ((lambda v: blur.scaled_defocus_kernel(v, 0.1, 0.5), "radius"),
                       (lambda v: blur.scaled_defocus_kernel(4.0, v, 0.5), "alias_sigma"),
                       (lambda v: blur.scaled_defocus_kernel(4.0, 0.1, v), "scale"),
                       (lambda v: blur.scaled_gaussian_kernel1d(3, v, 0.5), "sigma"),
                       (lambda v: blur.scaled_gaussian_kernel1d(3, 0.8, v), "scale")):
        with pytest.raises(ValueError, match=rf"^{name} must be > 0 and finite; got "):
            call(bad)
    with pytest.raises(TypeError, match=r"^scale must be a real number > 0 and finite; got '1'"):
        blur.scaled_defocus_kernel(4.0, 0.1, "1")
    for size in (0, 4, -3):
        with pytest.raises(ValueError, match=r"^kernel_size must be an odd int >= 1; got "):
            blur.scaled_gaussian_kernel1d(size, 0.8, 0.5)
    with pytest.raises(TypeError, match=r"^kernel_size must be an odd int >= 1; got 3.0"):
        blur.scaled_gaussian_kernel1d(3.0, 0.8, 0.5)
