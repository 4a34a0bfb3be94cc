"""Kernels that write into a given output (Kind.into, the ``out=`` of the C++ kernels): the same
bytes as the kernel's own new array, in the array passed."""
import numpy as np
import pytest

from medmnistc_fast import _native, api, registry
from medmnistc_fast.corruptions import KINDS, kind_of

_PAIRS = [(d, c) for d in registry.TABLES for c in registry.TABLES[d]
          if kind_of(d, c).into]


def test_into_kinds_cover_the_cheap_kernels():
    # The kinds whose per-image work is a few microseconds: their output copy mattered.
    names = {k.name for k in KINDS.values() if k.into} | {kind_of(d, c).name for d, c in _PAIRS}
    assert {"brightness", "contrast", "gamma", "black_corner", "stain_deposit", "bubble",
            "characters", "gaussian_noise", "speckle_noise", "impulse_noise",
            "shot_noise", "saturate", "hue"} <= names


@pytest.mark.parametrize("dataset,corruption", _PAIRS)
@pytest.mark.parametrize("shape", [(224, 224, 3), (40, 64, 1), (28, 28, 3)])
def test_kernel_into_out_equals_new_array(dataset, corruption, shape):
    kind, param, base, ctx = api._plan(dataset, corruption, 5, 11)
    images = np.random.default_rng(shape[0]).integers(0, 256, (3,) + shape, dtype=np.uint8)
    for i, image in enumerate(images):
        values = api.sample_values(kind, param, ctx, shape, (base + i) % 2**64)
        want = kind.kernel(image, **values)
        out = np.full(shape, 7, np.uint8)  # stale bytes must all be overwritten
        got = kind.kernel(image, out=out, **values)
        assert got is out and np.array_equal(out, want)


@pytest.mark.parametrize("call", [
    lambda img, out: _native.brightness(img, 1.3, out=out),
    lambda img, out: _native.contrast(img, 0.6, out=out),
    lambda img, out: _native.gamma(img, 1.4, out=out),
    lambda img, out: _native.hsv_shift(img, 0, -0.3, out=out),
    lambda img, out: _native.alias_sample(
        img, np.zeros((256, 256), np.uint32) | np.uint32(0xFFFFFF00), 5, out=out),
])
def test_native_out_argument(call):
    img = np.random.default_rng(2).integers(0, 256, (9, 13, 3), dtype=np.uint8)
    want = call(img, None)
    out = np.empty_like(img)
    assert call(img, out) is out and np.array_equal(out, want)
    bad = [np.empty((9, 13, 1), np.uint8), np.empty((9, 13, 3), np.int16),
           np.empty((13, 9, 3), np.uint8).transpose(1, 0, 2)]
    read_only = np.empty_like(img)
    read_only.setflags(write=False)
    for arr in bad + [read_only]:
        with pytest.raises((ValueError, TypeError), match="out"):
            call(img, arr)
