"""The C++ lookup-table and luma kernels (``csrc/lut.cpp``) against NumPy and Pillow oracles.

Both the AVX-512 VBMI path (taken on CPUs that have it) and the portable loop are checked, on
sizes that leave every tail length of the 64-byte blocks.
"""
from __future__ import annotations

import numpy as np
import pytest
from PIL import Image

from medmnistc_fast import _native

SHAPES = [(1, 1, 1), (1, 1, 3), (3, 5, 1), (7, 9, 3), (8, 8, 1), (16, 4, 3), (21, 22, 3),
          (64, 65, 1), (224, 224, 1), (224, 224, 3), (17, 23, 4)]


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("portable", [False, True])
def test_apply_lut_is_numpy_take(shape, portable):
    rng = np.random.default_rng(sum(shape))
    img = rng.integers(0, 256, shape, dtype=np.uint8)
    for lut in (rng.integers(0, 256, 256, dtype=np.uint8), np.arange(256, dtype=np.uint8)[::-1].copy(),
                np.zeros(256, np.uint8)):
        before = img.copy()
        out = _native.apply_lut(img, lut, portable)
        np.testing.assert_array_equal(out, lut[img])
        np.testing.assert_array_equal(img, before)
        assert out.flags.c_contiguous and out.dtype == np.uint8 and out.shape == img.shape


def test_apply_lut_every_tail_length():
    rng = np.random.default_rng(0)
    lut = rng.integers(0, 256, 256, dtype=np.uint8)
    for n in range(1, 200):
        img = rng.integers(0, 256, (1, n, 1), dtype=np.uint8)
        np.testing.assert_array_equal(_native.apply_lut(img, lut), lut[img])


def test_apply_lut_non_contiguous_and_read_only():
    rng = np.random.default_rng(1)
    lut = rng.integers(0, 256, 256, dtype=np.uint8)
    big = rng.integers(0, 256, (40, 50, 3), dtype=np.uint8)
    view = big[::2, 1::3]
    view.flags.writeable = False
    np.testing.assert_array_equal(_native.apply_lut(view, lut), lut[view])


def test_apply_lut_rejects_bad_tables():
    img = np.zeros((4, 4, 1), np.uint8)
    with pytest.raises(ValueError, match="lut"):
        _native.apply_lut(img, np.zeros(255, np.uint8))


def _pillow_luma_sum(img):
    if img.shape[2] == 1:
        return int(img.astype(np.int64).sum())
    return int(np.asarray(Image.fromarray(img).convert("L"), dtype=np.int64).sum())


@pytest.mark.parametrize("shape", [s for s in SHAPES if s[2] in (1, 3)] + [(300, 301, 3)])
@pytest.mark.parametrize("portable", [False, True])
def test_luma_sum_is_pillows_rgb_to_l(shape, portable):
    rng = np.random.default_rng(sum(shape) + 7)
    for img in (rng.integers(0, 256, shape, dtype=np.uint8), np.full(shape, 255, np.uint8)):
        assert _native.luma_sum(img, portable) == _pillow_luma_sum(img)


@pytest.mark.parametrize("shape", [(224, 224, 3), (28, 28, 3), (31, 9, 1)])
def test_mean_luma_is_pillows_contrast_gray_level(shape):
    # ImageEnhance.Contrast: int(ImageStat.Stat(image.convert("L")).mean[0] + 0.5); the contrast
    # kernel (csrc/lut.cpp) takes int(luma_sum / (H W) + 0.5).
    from PIL import ImageStat

    img = np.random.default_rng(3).integers(0, 256, shape, dtype=np.uint8)
    pil = Image.fromarray(img[:, :, 0] if shape[2] == 1 else img)
    mean_luma = int(_native.luma_sum(img) / (shape[0] * shape[1]) + 0.5)
    assert mean_luma == int(ImageStat.Stat(pil.convert("L")).mean[0] + 0.5)


def test_tables_refuse_arguments_outside_their_domain():
    # blend_lut(base outside 0..255) and gamma_lut(gamma < 0 or NaN) sent out-of-range floats to
    # truncating integer casts (undefined behaviour, found by an ASan/UBSan run); they raise now.
    for base in (-1, 256, -1000, 10**6):
        with pytest.raises(ValueError, match="base"):
            _native.blend_lut(base, 0.5)
    img = np.zeros((2, 3, 1), np.uint8)
    for g in (-1.0, -1e-300, float("nan"), float("-inf")):
        with pytest.raises(ValueError, match="gamma"):
            _native.gamma_lut(g)
        with pytest.raises(ValueError, match="gamma"):
            _native.gamma(img, g)


def test_tables_at_the_ends_of_their_domain():
    # blend with alpha = 0 is the constant base; alpha = 1 the identity (both ends of the range).
    ramp = np.arange(256, dtype=np.uint8)
    for base in (0, 255):
        np.testing.assert_array_equal(_native.blend_lut(base, 0.0), np.full(256, base, np.uint8))
        np.testing.assert_array_equal(_native.blend_lut(base, 1.0), ramp)
    # pow(x, 0) = 1 for every x (C99 F.9.4.4), so int(255.999 * 1) = 255 everywhere; with an
    # infinite gamma, pow(x, inf) = 0 for 0 <= x < 1 and pow(1, inf) = 1.
    np.testing.assert_array_equal(_native.gamma_lut(0.0), np.full(256, 255, np.uint8))
    expected = np.zeros(256, np.uint8)
    expected[255] = 255
    np.testing.assert_array_equal(_native.gamma_lut(float("inf")), expected)


def test_out_sharing_memory_with_the_image_is_refused():
    # The element-wise kernels that take out= assume a buffer of its own: an out overlapping
    # the image (the image itself, or a view one pixel further on) could read samples already
    # written, so both are refused before anything is written. A disjoint out is filled as asked.
    buf = np.random.default_rng(3).integers(0, 256, 2 * 8 * 8 * 3 + 3, dtype=np.uint8)
    image = buf[: 8 * 8 * 3].reshape(8, 8, 3)
    table = np.zeros((256, 256), np.uint32)
    calls = {
        "brightness": lambda out: _native.brightness(image, 1.2, out=out),
        "contrast": lambda out: _native.contrast(image, 0.7, out=out),
        "gamma": lambda out: _native.gamma(image, 1.5, out=out),
        "hsv_shift": lambda out: _native.hsv_shift(image, 1, 0.2, out=out),
        "alias_sample": lambda out: _native.alias_sample(image, table, 7, out=out),
    }
    before = image.copy()
    for name, call in calls.items():
        for out in (image, buf[3: 3 + 8 * 8 * 3].reshape(8, 8, 3)):
            with pytest.raises(ValueError, match=f"{name}: out must not share memory"):
                call(out)
        assert np.array_equal(image, before), name
        disjoint = buf[8 * 8 * 3 + 3:].reshape(8, 8, 3)
        assert call(disjoint) is disjoint
        assert np.array_equal(disjoint, call(None)), name
