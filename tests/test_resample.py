"""Byte-exactness of the C++ BOX resampling kernels (``_native.resize_box``, ``_native.pixelate``)
against Pillow, which is the oracle: the reference ``Pixelate`` is two Pillow
``Image.resize(..., Image.BOX)`` calls.

Random and real images, random non-square sizes (down- and upsampling), every pixelate factor of
every severity table at 224, 28, 64 and 128 px, and every instruction-set path this CPU can run
(the kernels are integer-only, so all paths must give the same bytes).
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from PIL import Image

import medmnistc_fast as mf
from medmnistc_fast import _native, registry
from medmnistc_fast.sample import sample_images
from tests import variants

# The kernels reproduce Pillow 13's BOX resize, whose pass order for non-square shrinks changed
# in 13 (csrc/resample.cpp; python-pillow/Pillow#9549); Pillow 12, which the package allows,
# takes the other order there, so the comparisons with the installed Pillow need 13. Square
# resizes, the only ones MedMNIST-C's pixelate makes, are the same in both.
_PIL_MAJOR = int(Image.__version__.split(".")[0])
needs_pillow_13 = pytest.mark.skipif(_PIL_MAJOR < 13, reason="reproduces Pillow 13's pass order; "
                                     f"Pillow {Image.__version__} is installed")

# Every instruction-set path of the kernels this CPU runs; the first is the default (best).
ISAS = variants.runnable(_native._set_resample_isa, ("avx512", "avx2", "sse2", "portable"))
isa = variants.fixture(_native._set_resample_isa, ISAS)


def pil_box(image: np.ndarray, width: int, height: int) -> np.ndarray:
    """Pillow BOX resize of an (H, W, 1) or (H, W, 3) uint8 array (modes L and RGB)."""
    c = image.shape[2]
    pil = Image.fromarray(image[:, :, 0] if c == 1 else image)
    return np.asarray(pil.resize((width, height), Image.BOX)).reshape(height, width, c)


def pil_pixelate(image: np.ndarray, width: int, height: int) -> np.ndarray:
    h, w, _ = image.shape
    return pil_box(pil_box(image, width, height), w, h)


def random_image(rng, h, w, c, kind):
    """Uniform noise, or a smooth image with flat areas (many equal neighbours, saturated spots)."""
    if kind == "noise":
        return rng.integers(0, 256, (h, w, c), dtype=np.uint8)
    yy, xx = np.mgrid[0:h, 0:w]
    base = 127.5 + 127.5 * np.sin(xx / max(w, 1) * rng.uniform(1, 9) + yy / max(h, 1) * rng.uniform(1, 9))
    img = np.repeat(base[..., None], c, axis=2) + rng.normal(0, 20, (h, w, c))
    img[: h // 3, : w // 4] = rng.integers(0, 256)
    return np.clip(np.rint(img), 0, 255).astype(np.uint8)


sides = st.integers(1, 300)
channels = st.sampled_from([1, 3])
kinds = st.sampled_from(["noise", "smooth"])


@needs_pillow_13
@settings(max_examples=150)
@given(h=sides, w=sides, out_h=st.integers(1, 400), out_w=st.integers(1, 400), c=channels,
       kind=kinds, seed=st.integers(0, 2**32 - 1))
def test_resize_box_matches_pillow(h, w, out_h, out_w, c, kind, seed):
    img = random_image(np.random.default_rng(seed), h, w, c, kind)
    got = _native.resize_box(img, out_w, out_h)
    assert got.shape == (out_h, out_w, c) and got.dtype == np.uint8
    assert np.array_equal(got, pil_box(img, out_w, out_h))


@needs_pillow_13
@settings(max_examples=150)
@given(h=sides, w=sides, factor=st.floats(0.001, 1.0), c=channels, kind=kinds,
       seed=st.integers(0, 2**32 - 1))
def test_pixelate_matches_two_pillow_resizes(h, w, factor, c, kind, seed):
    img = random_image(np.random.default_rng(seed), h, w, c, kind)
    sw, sh = max(1, int(w * factor)), max(1, int(h * factor))
    got = _native.pixelate(img, sw, sh)
    assert got.shape == img.shape and got.dtype == np.uint8
    assert np.array_equal(got, pil_pixelate(img, sw, sh))


@needs_pillow_13
def test_every_isa_path_matches_pillow(isa):
    """Fixed sweep (sizes straddling the 16/32-row strips and 16/32/64-byte vectors) on each path."""
    rng = np.random.default_rng(7)
    for t in range(120):
        h, w = (int(v) for v in rng.integers(1, 150, 2))
        c = (1, 3)[t % 2]
        img = random_image(rng, h, w, c, ("noise", "smooth")[t % 3 == 0])
        out_w, out_h = (int(v) for v in rng.integers(1, 200, 2))
        assert np.array_equal(_native.resize_box(img, out_w, out_h), pil_box(img, out_w, out_h)), (isa, h, w, c)
        f = rng.uniform(0.02, 1.0)
        sw, sh = max(1, int(w * f)), max(1, int(h * f))
        assert np.array_equal(_native.pixelate(img, sw, sh), pil_pixelate(img, sw, sh)), (isa, h, w, c, f)


def _table_factors():
    return sorted({float(f) for table in registry.TABLES.values() for f in table.get("pixelate", ())})


@pytest.mark.parametrize("size", [224, 28, 64, 128])
def test_all_table_factors_on_real_images(size, isa):
    """Every pixelate factor of every table, through the public API, on real images."""
    rgb, gray = sample_images(3, size, rgb=True), sample_images(3, size, rgb=False)[..., None]
    for f in _table_factors():
        s = max(1, int(size * f))
        for img in (*rgb, *gray):
            assert np.array_equal(_native.pixelate(img, s, s), pil_pixelate(img, s, s)), (size, f)
    for ds, table in registry.TABLES.items():
        if "pixelate" not in table:
            continue
        for level in range(1, 6):
            for img in (rgb[0], gray[0, ..., 0]):
                hwc = img if img.ndim == 3 else img[..., None]
                f = table["pixelate"][level - 1]
                want = pil_pixelate(hwc, max(1, int(size * f)), max(1, int(size * f))).reshape(img.shape)
                assert np.array_equal(mf.corrupt(img, "pixelate", level, dataset=ds), want), (ds, level)


def test_gray_equals_the_reference_rgb_round_trip():
    """The reference pixelates gray images as L -> RGB -> resize -> L; on L directly it is the same."""
    gray = sample_images(2, 224, rgb=False)
    for img in gray:
        for f in (0.8, 0.37, 0.1):
            s = int(224 * f)
            pil = Image.fromarray(img).convert("RGB")
            ref = np.asarray(pil.resize((s, s), Image.BOX).resize((224, 224), Image.BOX).convert("L"))
            assert np.array_equal(_native.pixelate(img[..., None], s, s)[..., 0], ref)


@needs_pillow_13
@pytest.mark.parametrize("shape,size", [
    ((282, 210), (185, 64)),   # height shrinks by > 2x the width's pixels: Pillow 13 goes vertical first
    ((100, 30), (29, 10)),
    ((30, 100), (10, 29)),
    ((67, 143), (141, 5)),
    ((259, 33), (4, 106)),
    ((100, 100), (90, 80)),    # (100 - 80) == 2 * (100 - 90): horizontal first
    ((100, 100), (90, 79)),
])
def test_pass_order_of_pillow_13(shape, size):
    """Both pass orders occur in Pillow 13 (the vertical pass first when in_h - out_h >
    2 * (in_w - out_w)); the kernel follows it. The assertions on the compositions document which
    order Pillow took, so a change of rule in a future Pillow shows up here."""
    h, w = shape
    out_w, out_h = size
    rng = np.random.default_rng(3)
    img = rng.integers(0, 256, (h, w, 3), dtype=np.uint8)
    want = pil_box(img, out_w, out_h)
    assert np.array_equal(_native.resize_box(img, out_w, out_h), want)
    horizontal_first = pil_box(pil_box(img, out_w, h), out_w, out_h)
    vertical_first = pil_box(pil_box(img, w, out_h), out_w, out_h)
    if (h - out_h) > 2 * (w - out_w):
        assert np.array_equal(vertical_first, want)
    else:
        assert np.array_equal(horizontal_first, want)
    assert not np.array_equal(horizontal_first, vertical_first)  # the case tells the orders apart


def test_degenerate_and_long_windows():
    rng = np.random.default_rng(1)
    for h, w, out_h, out_w in [(1, 1, 1, 1), (1, 1, 5, 7), (1, 300, 1, 1), (300, 1, 1, 1),
                               (300, 300, 1, 1), (300, 290, 2, 1), (5, 300, 5, 1), (299, 7, 1, 7)]:
        for c in (1, 3):
            img = rng.integers(0, 256, (h, w, c), dtype=np.uint8)
            assert np.array_equal(_native.resize_box(img, out_w, out_h), pil_box(img, out_w, out_h))
            assert np.array_equal(_native.pixelate(img, out_w, out_h), pil_pixelate(img, out_w, out_h))
    # Runs of more than 257 samples (sums beyond 16 bits) on saturated pixels.
    img = np.full((3, 1000, 3), 255, np.uint8)
    img[1] = rng.integers(200, 256, (1000, 3))
    for out_w in (1, 2, 3):
        assert np.array_equal(_native.resize_box(img, out_w, 3), pil_box(img, out_w, 3))
        assert np.array_equal(_native.resize_box(img.transpose(1, 0, 2).copy(), 3, out_w),
                              pil_box(img.transpose(1, 0, 2).copy(), 3, out_w))


def test_factor_above_one_and_other_channel_counts():
    """pixelate with a small size above the image size (the up pass then downsamples), and 2 or 4
    channels (each channel as its own L image)."""
    rng = np.random.default_rng(2)
    img = rng.integers(0, 256, (37, 51, 3), dtype=np.uint8)
    assert np.array_equal(_native.pixelate(img, 80, 64), pil_pixelate(img, 80, 64))
    for c in (2, 4):
        img = rng.integers(0, 256, (45, 33, c), dtype=np.uint8)
        for size in ((10, 13), (33, 20), (60, 90)):
            want_p = np.concatenate([pil_pixelate(img[:, :, k:k + 1], *size) for k in range(c)], axis=2)
            want_r = np.concatenate([pil_box(img[:, :, k:k + 1], *size) for k in range(c)], axis=2)
            assert np.array_equal(_native.pixelate(img, *size), want_p)
            assert np.array_equal(_native.resize_box(img, *size), want_r)


def test_threads_give_the_same_bytes():
    imgs = sample_images(8, 224, rgb=True)
    want = [_native.pixelate(im, 67, 67) for im in imgs]
    with ThreadPoolExecutor(4) as pool:
        got = list(pool.map(lambda im: _native.pixelate(im, 67, 67), imgs))
    assert all(np.array_equal(a, b) for a, b in zip(got, want))


def test_input_is_not_modified_and_layouts_are_accepted():
    img = sample_images(1, 64, rgb=True)[0]
    before = img.copy()
    view = img[::-1, ::2]  # non-contiguous: converted by the binding
    assert np.array_equal(_native.pixelate(view, 9, 20), pil_pixelate(np.ascontiguousarray(view), 9, 20))
    assert np.array_equal(img, before)


@pytest.mark.parametrize("fn", [_native.resize_box, _native.pixelate])
def test_bad_arguments_raise(fn):
    # The message names the function, the offending side and its value, so a check on the wrong
    # side (width and height swapped) or a later, unrelated ValueError cannot pass.
    name = fn.__name__
    img = np.zeros((8, 8, 3), np.uint8)
    for w, h, side, value in ((0, 5, "width", 0), (5, 0, "height", 0), (-1, 5, "width", -1),
                              (2**24, 5, "width", 2**24), (5, 2**24, "height", 2**24)):
        with pytest.raises(ValueError,
                           match=rf"^{name}: {side} must be in \[1, 2\*\*24\), got {value}$"):
            fn(img, w, h)
    with pytest.raises(ValueError, match=rf"^{name}: image must have shape \(H, W, C\), got 2 dim"):
        fn(np.zeros((8, 8), np.uint8), 4, 4)
    with pytest.raises(ValueError, match=rf"^{name}: image dimensions must all be >= 1$"):
        fn(np.zeros((0, 8, 3), np.uint8), 4, 4)
