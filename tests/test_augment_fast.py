"""The augmentation's per-call shortcuts equal the general forms they replace.

AugMedMNISTC draws and applies through per-choice functions (augment._make_drawer,
augment._make_runner), reads PIL images through their Arrow export and builds the colour
tables in C++; each is checked here against the plain form (NumPy draws, kind.sample +
kind.kernel, np.asarray, the Python table builders of corruptions/color.py).
"""
import pickle

import numpy as np
import pytest
from PIL import Image

import medmnistc_fast as mf
from medmnistc_fast import _native, augment, registry
from medmnistc_fast.api import sample_values
from medmnistc_fast.augment import AugMedMNISTC, _draw_key, _draw_param, _make_drawer, _make_runner
from medmnistc_fast.corruptions import blur, digital, kind_of

ALL_PAIRS = [(d, c) for d in mf.DATASETS for c in mf.corruptions(d)]


def _img(h, w, c, seed=0):
    g = np.random.default_rng(seed)
    yy, xx = np.mgrid[0:h, 0:w]
    base = (128 + 60 * np.sin(xx / 4.0) * np.cos(yy / 6.0))[..., None]
    return np.clip(base + g.normal(0, 25, (h, w, c)), 0, 255).astype(np.uint8)


@pytest.mark.parametrize("dataset,corruption", ALL_PAIRS)
def test_drawer_equals_draw_param(dataset, corruption):
    for levels in ((1, 5), (2, 2)):
        ranges = augment.param_range(dataset, corruption, levels)
        draw = _make_drawer(corruption, ranges)
        g1 = np.random.Generator(np.random.PCG64(11))
        g2 = np.random.Generator(np.random.PCG64(11))
        for _ in range(300):
            assert draw(g1) == _draw_param(g2, corruption, ranges)
            # Interleave a buffered 32-bit draw: both forms must leave the same state.
            assert g1.integers(0, 17) == g2.integers(0, 17)
        assert g1.bit_generator.state == g2.bit_generator.state


def test_draw_key_is_full_range_uint64_draw():
    g1 = np.random.Generator(np.random.PCG64(5))
    g2 = np.random.Generator(np.random.PCG64(5))
    for i in range(2000):
        assert _draw_key(g1) == int(g2.integers(0, 2**64, dtype=np.uint64))
        if i % 3 == 0:
            assert g1.integers(0, 9) == g2.integers(0, 9)  # leaves half a 64-bit word buffered
        if i % 5 == 0:
            assert g1.uniform(0.2, 0.7) == g2.uniform(0.2, 0.7)
    assert g1.bit_generator.state == g2.bit_generator.state


@pytest.mark.parametrize("dataset,corruption", ALL_PAIRS)
def test_runner_equals_sample_and_kernel(dataset, corruption):
    kind = kind_of(dataset, corruption)
    ref = registry.REFERENCE_SIZES[dataset]
    run = _make_runner(dataset, corruption, ref)
    draw = _make_drawer(corruption, augment.param_range(dataset, corruption, (1, 5)))
    g = np.random.Generator(np.random.PCG64(3))
    shapes = [(224, 224, 1), (224, 224, 3), (28, 28, 1), (40, 33, 3)]
    for i, shape in enumerate(shapes * 2):
        hwc = _img(*shape, seed=i)
        param, key = draw(g), _draw_key(g)
        want = kind.kernel(hwc, **sample_values(kind, param, (1, ref), hwc.shape, key))
        got = run(hwc, param, key)
        assert got.dtype == np.uint8 and got.shape == hwc.shape and got is not hwc
        np.testing.assert_array_equal(got, want)


def _blend_oracle(base, f):
    """Pillow's 8-bit blend in NumPy float32: base + alpha (v - base), clipped outside [0, 1]."""
    a, b = np.float32(f), np.float32(base)
    t = b + a * (np.arange(256, dtype=np.float32) - b)
    if not 0.0 <= a <= 1.0:
        t = np.clip(t, np.float32(0), np.float32(255))
    return t.astype(np.uint8)


def _gamma_oracle(gm):
    """torchvision's PIL adjust_gamma table, value by value with Python's pow."""
    return np.array([int((255 + 1 - 1e-3) * pow(v / 255.0, gm)) for v in range(256)], np.uint8)


def _mean_luma_oracle(img):
    """int(mean(L) + 0.5) with Pillow's integer RGB -> L conversion."""
    x = img.astype(np.int64)
    lum = x[..., 0] if x.shape[2] == 1 else (
        19595 * x[..., 0] + 38470 * x[..., 1] + 7471 * x[..., 2] + 0x8000) >> 16
    return int(lum.sum() / lum.size + 0.5)


def test_native_tables_equal_python_builders():
    g = np.random.default_rng(0)
    factors = np.concatenate([g.uniform(0.0, 3.0, 3000), [0.0, 0.5, 1.0, 1.1, 2.0]])
    for f in factors.tolist():
        for base in (0, 1, 100, 128, 255):
            np.testing.assert_array_equal(_native.blend_lut(base, f), _blend_oracle(base, f))
    gammas = np.concatenate([g.uniform(0.3, 1.8, 20000), [0.4, 0.5, 0.8, 1.0, 1.2, 1.6, 2.0]])
    for gm in gammas.tolist():
        np.testing.assert_array_equal(_native.gamma_lut(gm), _gamma_oracle(gm))


@pytest.mark.parametrize("c", [1, 3])
def test_native_colour_kernels_equal_lut_form(c):
    g = np.random.default_rng(c)
    for i in range(40):
        img = _img(int(g.integers(1, 70)), int(g.integers(1, 70)), c, seed=i)
        f = float(g.uniform(0.2, 2.0))
        np.testing.assert_array_equal(_native.brightness(img, f), _blend_oracle(0, f)[img])
        np.testing.assert_array_equal(
            _native.contrast(img, f), _blend_oracle(_mean_luma_oracle(img), f)[img])
        np.testing.assert_array_equal(_native.gamma(img, f), _gamma_oracle(f)[img])


def _pil_variants(arr, mode, tmp_path):
    im = Image.fromarray(arr)
    yield im
    yield im.copy()
    yield im.crop((1, 2, max(2, im.width - 3), max(3, im.height - 1)))
    yield im.convert("RGB").convert(mode) if mode == "L" else im.convert("L").convert("RGB")
    path = tmp_path / f"x_{mode}.png"
    im.save(path)
    yield Image.open(path)  # not loaded yet


@pytest.mark.parametrize("mode", ["L", "RGB"])
def test_from_pil_equals_numpy(mode, tmp_path):
    c = 1 if mode == "L" else 3
    for h, w in [(1, 1), (3, 17), (224, 224), (61, 200)]:
        arr = _img(h, w, c)[..., 0] if c == 1 else _img(h, w, c)
        for im in _pil_variants(arr, mode, tmp_path):
            want = np.asarray(im).reshape(im.height, im.width, c)
            got = digital.from_pil(im, c)
            assert got.flags.c_contiguous and got.flags.writeable and got.dtype == np.uint8
            np.testing.assert_array_equal(got, want)


def test_pil_pixels_rejects_other_layouts():
    im = Image.new("I", (4, 3))
    assert _native.pil_pixels(*im.__arrow_c_array__(), 3, 4, 1) is None  # int32 export
    rgb = Image.new("RGB", (4, 3))
    assert _native.pil_pixels(*rgb.__arrow_c_array__(), 3, 4, 1) is None  # list, not uint8
    gray = Image.new("L", (4, 3))
    assert _native.pil_pixels(*gray.__arrow_c_array__(), 3, 4, 3) is None
    assert _native.pil_pixels(*gray.__arrow_c_array__(), 4, 4, 1) is None  # too short


def test_from_pil_without_arrow_export(monkeypatch):
    arr = _img(20, 30, 3)
    im = Image.fromarray(arr)
    monkeypatch.setattr(type(im), "__arrow_c_array__", None, raising=False)
    np.testing.assert_array_equal(digital.from_pil(im, 3), arr)


def _crashing_export(*args):  # stands for Pillow 11.2-12.1's export of a mapped image
    raise AssertionError("Image.__arrow_c_array__ called before Pillow 13")


@pytest.mark.parametrize("mode", ["L", "RGB"])
def test_no_arrow_export_before_pillow_13(monkeypatch, mode):
    """Pillow 11.2-12.1 segfault exporting an image that maps a buffer: a gray
    Image.fromarray, or the transform's own PIL output fed back (two AugMedMNISTC in a row;
    found by a newcomer trial with Pillow 12.0/12.1). Before 13 the export is never called."""
    monkeypatch.setattr(digital, "USE_ARROW", False, raising=False)
    monkeypatch.setattr(Image.Image, "__arrow_c_array__", _crashing_export, raising=False)
    c = 1 if mode == "L" else 3
    arr = _img(20, 30, c)
    pil = Image.fromarray(arr[..., 0] if c == 1 else arr)
    np.testing.assert_array_equal(digital.from_pil(pil, c), arr)
    mapped = digital.pil_from_buffer(arr, mode)
    np.testing.assert_array_equal(digital.from_pil(mapped, c), arr)
    aug = AugMedMNISTC("chestmnist" if c == 1 else "pathmnist", seed=3, identity=False)
    twice = aug(aug(pil))
    g = AugMedMNISTC("chestmnist" if c == 1 else "pathmnist", seed=3, identity=False)
    np.testing.assert_array_equal(np.asarray(twice), g(g(arr[..., 0] if c == 1 else arr)))


def test_pil_from_buffer_equals_frombuffer():
    for mode, arr in (("L", _img(30, 20, 1)[..., 0]), ("L", _img(30, 20, 1)),
                      ("RGB", _img(30, 20, 3))):
        got = digital.pil_from_buffer(arr, mode)
        want = Image.fromarray(arr.reshape(30, 20) if mode == "L" else arr)
        assert got.mode == want.mode and got.size == want.size
        assert got.tobytes() == want.tobytes()
        got.putpixel((0, 0), 7 if mode == "L" else (7, 7, 7))  # a private copy, never arr
        assert arr.reshape(30, 20, -1)[0, 0, 0] != 7


def _gauss_oracle(img, k):
    """torchvision-style reflect padding, rows then columns in float32, taps summed as
    k0 x0, then ((k1 x1 + k2 x2) + (k3 x3 + k4 x4)) per group of four, then one by one
    (the documented order of csrc/blur.cpp); round half to even, clip to uint8."""
    k = np.asarray(k, np.float32)
    taps, pad = len(k), len(k) // 2

    def corr(x, axis):
        n = x.shape[axis]
        idx = np.arange(-pad, n + pad)
        period = 2 * (n - 1) if n > 1 else 1
        idx = np.abs(idx) % period if n > 1 else np.zeros_like(idx)
        idx = np.where(idx < n, idx, period - idx)
        xp = np.take(x, idx, axis=axis)

        def sl(i):
            return np.take(xp, np.arange(i, i + n), axis=axis)

        acc = k[0] * sl(0)
        i = 1
        while i + 4 <= taps:
            acc = acc + ((k[i] * sl(i) + k[i + 1] * sl(i + 1)) + (k[i + 2] * sl(i + 2) + k[i + 3] * sl(i + 3)))
            i += 4
        while i < taps:
            acc = acc + k[i] * sl(i)
            i += 1
        return acc.astype(np.float32)

    x = img.astype(np.float32)
    out = corr(corr(x, 1), 0)
    return np.clip(np.rint(out), 0, 255).astype(np.uint8)


@pytest.mark.parametrize("taps", [1, 3, 5, 7, 9, 11, 13, 15, 17, 21, 25, 31, 33, 37])
def test_gaussian_blur_order_of_operations(taps):
    g = np.random.default_rng(taps)
    for i, shape in enumerate([(40, 37, 1), (23, 64, 3), (224, 224, 1), (12, 12, 3)]):
        img = _img(*shape, seed=i)
        k = blur.gaussian_kernel1d(taps, float(g.uniform(0.3, 4.0)))
        np.testing.assert_array_equal(_native.gaussian_blur(img, k), _gauss_oracle(img, k))


def test_pickled_transform_keeps_stream_and_rebuilds_plans():
    aug = AugMedMNISTC("chestmnist", seed=4)
    x = _img(28, 28, 1)[..., 0]
    aug(x)
    assert aug._fast is not None
    state = pickle.dumps(aug)
    copy = pickle.loads(state)
    assert copy._fast is None
    for _ in range(20):
        np.testing.assert_array_equal(copy(x), aug(x))


@pytest.mark.parametrize("mode", ["L", "RGB"])
def test_fast_pil_images_behave_like_frombuffer(mode):
    """pil_from_buffer's own construction (digital._map_gray / _map_rgb, with an instance
    tobytes) against Image.frombuffer and Pillow's own Image.tobytes: bytes in every raw form,
    np.asarray, flags, writes (reaching the image, never the array), copies and pickling."""
    assert digital._fast_ok(mode)
    c = 1 if mode == "L" else 3
    arr = _img(33, 21, c, seed=4)
    keep = arr.copy()
    got = digital.pil_from_buffer(arr, mode)
    want = Image.frombuffer(mode, (21, 33), arr, "raw", mode, 0, 1)
    assert type(got) is Image.Image and got.mode == mode and got.size == (21, 33)
    assert got.readonly == want.readonly
    plain = Image.Image.tobytes
    for args in ((), ("raw",), ("raw", mode)):
        assert got.tobytes(*args) == plain(got, *args) == want.tobytes(*args)
    other = ("raw", "L;16") if mode == "L" else ("raw", "BGR")  # not the fast form: Pillow's
    assert got.tobytes(*other) == want.tobytes(*other)
    a = np.asarray(got)
    assert np.array_equal(a, arr.reshape(a.shape)) and not a.flags.writeable
    assert np.array_equal(np.array(got), np.array(want)) and np.array(got).flags.writeable
    back = pickle.loads(pickle.dumps(got))
    assert type(back) is Image.Image and back.tobytes() == want.tobytes()
    assert got.copy().tobytes() == want.tobytes()
    assert got == want
    # A write: the image changes (and its bytes with it), the array does not.
    value = 7 if mode == "L" else (7, 8, 9)
    got.putpixel((3, 2), value)
    assert got.getpixel((3, 2)) == value
    assert got.tobytes() == plain(got) and np.asarray(got)[2, 3].tolist() == (
        [7, 8, 9] if mode == "RGB" else 7)
    np.testing.assert_array_equal(arr, keep)


def test_pil_from_buffer_falls_back_to_frombuffer(monkeypatch):
    monkeypatch.setattr(digital, "_FAST", {"L": False, "RGB": False})
    for mode, c in (("L", 1), ("RGB", 3)):
        arr = _img(12, 10, c)
        got = digital.pil_from_buffer(arr, mode)
        assert "tobytes" not in vars(got)
        assert got.tobytes() == Image.fromarray(arr[..., 0] if c == 1 else arr).tobytes()


def test_fast_rgb_tobytes_without_arrow_export(monkeypatch):
    """Without a usable Arrow export the RGB image's tobytes falls back to Pillow's own (and
    np.asarray, which calls tobytes, does not recurse through from_pil's np.array fallback)."""
    arr = _img(9, 14, 3, seed=2)
    got = digital._map_rgb(arr, (14, 9))
    monkeypatch.setattr(Image.Image, "__arrow_c_array__", None, raising=False)
    assert got.tobytes() == Image.fromarray(arr).tobytes()
    np.testing.assert_array_equal(np.asarray(got), arr)
    np.testing.assert_array_equal(digital.from_pil(got, 3), arr)


@pytest.mark.parametrize("mode", ["L", "RGB"])
def test_fast_pil_tobytes_outlives_the_image(mode):
    """tobytes works as Pillow's bound method does when the image is gone by the call:
    ``f(x).tobytes()`` (CPython drops the temporary image between the attribute lookup and the
    call) and a stored ``fn = image.tobytes`` after ``del image`` (with the image's final pixels,
    a write included); and the images are still freed by reference counting alone (no
    reference cycle for gc to find)."""
    import gc

    c = 1 if mode == "L" else 3
    arr = _img(17, 11, c, seed=6)
    want = Image.frombuffer(mode, (11, 17), arr, "raw", mode, 0, 1)
    assert digital._fast_ok(mode)
    assert digital.pil_from_buffer(arr, mode).tobytes() == want.tobytes()
    assert digital.pil_from_buffer(arr, mode).tobytes("raw", mode) == want.tobytes()
    other = "L;16" if mode == "L" else "RGBX"  # another raw mode: Pillow's own packer
    assert digital.pil_from_buffer(arr, mode).tobytes("raw", other) == want.tobytes("raw", other)
    src = Image.fromarray(arr[..., 0] if c == 1 else arr)
    aug = AugMedMNISTC("pneumoniamnist" if c == 1 else "bloodmnist", seed=3)
    for i in range(5):
        assert aug(src, index=i).tobytes() == Image.Image.tobytes(aug(src, index=i))
    got = digital.pil_from_buffer(arr, mode)
    want_fn = want.tobytes
    for im in (got, want):
        im.putpixel((3, 2), 7 if mode == "L" else (7, 8, 9))
    fn = got.tobytes
    del got, want
    assert fn() == want_fn() and fn("raw", other) == want_fn("raw", other)
    enabled = gc.isenabled()
    gc.disable()
    try:
        gc.collect()
        for i in range(20):
            im = digital.pil_from_buffer(_img(9, 8, c, seed=i), mode)
            im.tobytes()
            if i % 2:
                im.putpixel((0, 0), 1 if mode == "L" else (1, 1, 1))
            del im
        assert gc.collect() == 0
    finally:
        if enabled:
            gc.enable()
