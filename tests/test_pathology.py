"""The digital-pathology suite (``pathology96``, ``pathology224``; spec/pathology.md).

Test images: scikit-image's bundled immunohistochemistry image (512 x 512 RGB) cut into
patches: 25 of 96 px, 4 of 224 px, and crops of 28 x 28 and 50 x 70 px.

- every corruption of both suites at 96, 224, 28 and 50 x 70 px (RGB and gray): shape and dtype
  kept, input untouched, deterministic, ``corrupt_batch`` equal to ``corrupt``;
- monotone degradation over severity (mean absolute change non-decreasing; motion averaged over
  seeds);
- independent NumPy / Pillow / scikit-image oracles written here from the spec: pixelate
  (Pillow BOX), defocus (naive convolution with the spec's disk, reflect-101), motion (naive
  shift-and-add with the spec's tap formula), brightness / saturate / hue (scikit-image
  rgb2hsv / hsv2rgb);
- the synthetic marking blot and bubble: determinism, sizes and areas, colour statistics.
"""
from __future__ import annotations

import hashlib
import math
import subprocess
import sys

import numpy as np
import pytest
import scipy.ndimage
import skimage.color
import skimage.data
from PIL import Image

import medmnistc_fast as mf
from medmnistc_fast import api, functional, registry, rng
from medmnistc_fast.corruptions import kind_of
from medmnistc_fast.corruptions import pathology as P
from medmnistc_fast.corruptions._spec import Context, to_gray

SUITES = ("pathology96", "pathology224")
NAMES = ("pixelate", "jpeg_compression", "defocus_blur", "motion_blur", "brightness", "saturate",
         "hue", "marking", "bubble")
REF = {"pathology96": 96, "pathology224": 224}
SHAPES = [(96, 96, 3), (224, 224, 3), (28, 28, 3), (50, 70, 3), (50, 70), (96, 96, 1)]


# ---------------------------------------------------------------------------------------------
# Images
# ---------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def ihc():
    return skimage.data.immunohistochemistry()


@pytest.fixture(scope="module")
def patches96(ihc):
    """25 patches of 96 x 96 (a 5 x 5 grid of the top-left 480 x 480)."""
    return np.stack([ihc[r:r + 96, c:c + 96] for r in range(0, 480, 96) for c in range(0, 480, 96)])


@pytest.fixture(scope="module")
def patches224(ihc):
    return np.stack([ihc[r:r + 224, c:c + 224] for r in (0, 224) for c in (0, 224)])


def image_of_shape(ihc, shape):
    """A real crop with the given shape ((H, W), (H, W, 1) or (H, W, 3))."""
    h, w = shape[:2]
    r0, c0 = min(300, 512 - h), min(200, 512 - w)
    crop = np.ascontiguousarray(ihc[r0:r0 + h, c0:c0 + w])
    assert crop.shape[:2] == (h, w)
    if len(shape) == 2:
        return np.array(Image.fromarray(crop).convert("L"))
    if shape[2] == 1:
        return np.array(Image.fromarray(crop).convert("L"))[..., None]
    return crop


def batch_for(ihc, dataset):
    return image_of_shape(ihc, (REF[dataset], REF[dataset], 3))


# ---------------------------------------------------------------------------------------------
# Registry and public contract
# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("dataset", SUITES)
def test_names_and_kinds(dataset):
    assert mf.corruptions(dataset) == NAMES
    for name in ("brightness", "hue", "marking", "bubble"):
        assert kind_of(dataset, name) is P.PATHOLOGY_KINDS[name]
    for name in ("pixelate", "jpeg_compression", "defocus_blur", "motion_blur", "saturate"):
        assert kind_of(dataset, name) is kind_of("pathmnist", name)
    assert registry.REFERENCE_SIZES[dataset] == REF[dataset]


def test_tables_equal_the_spec():
    # Hand-copied from spec/pathology.md ("The nine corruptions"). Marking: the spec's sizes
    # "A x B" are height x width; the registry stores (width, height).
    common = {"pixelate": (0.6, 0.5, 0.4, 0.3, 0.25), "jpeg_compression": (25, 18, 15, 10, 7),
              "brightness": (0.05, 0.10, 0.15, 0.20, 0.25), "bubble": (0.1, 0.3, 0.5, 0.7, 0.9)}
    want = {
        "pathology96": dict(
            common,
            defocus_blur=((3, 0.05), (4, 0.3), (5, 0.3), (6, 0.3), (7, 0.3)),
            motion_blur=((5, 1), (5, 2), (5, 3), (5, 4), (6, 5)),
            saturate=(0.05, 0.10, 0.15, 0.20, 0.25),
            hue=(0.02, 0.04, 0.06, 0.08, 0.10),
            marking_hw=((10, 10), (22, 21), (34, 31), (45, 42), (57, 54))),
        "pathology224": dict(
            common,
            defocus_blur=((3, 0.1), (4, 0.5), (6, 0.5), (8, 0.5), (10, 0.5)),
            motion_blur=((10, 3), (15, 5), (15, 8), (15, 12), (20, 15)),
            saturate=(0.02, 0.04, 0.06, 0.08, 0.10),
            hue=(0.03, 0.06, 0.09, 0.12, 0.15),
            marking_hw=((26, 24), (53, 49), (80, 75), (107, 101), (135, 126))),
    }
    for dataset, table in want.items():
        hw = table.pop("marking_hw")
        assert set(registry.TABLES[dataset]) == set(table) | {"marking"}
        for name, values in table.items():
            assert registry.TABLES[dataset][name] == values, (dataset, name)
        assert registry.TABLES[dataset]["marking"] == tuple((w, h) for h, w in hw)


def test_public_contract_example(patches96):
    img = patches96[7]
    out = mf.corrupt(img, "hue", 3, dataset="pathology96", seed=0)
    assert out.shape == img.shape and out.dtype == np.uint8 and not np.array_equal(out, img)
    batch = mf.corrupt_batch(patches96[:4], "hue", 3, dataset="pathology96", seed=0)
    assert np.array_equal(batch[0], mf.corrupt(patches96[0], "hue", 3, dataset="pathology96",
                                               seed=0))


@pytest.mark.parametrize("dataset", SUITES)
@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_every_corruption_every_size(ihc, dataset, name, shape):
    img = image_of_shape(ihc, shape)
    img.setflags(write=False)
    before = img.copy()
    for s in range(1, 6):
        out = mf.corrupt(img, name, s, dataset=dataset, seed=11, index=3)
        assert out.shape == img.shape and out.dtype == np.uint8 and out.flags.c_contiguous
        assert np.shares_memory(out, img) is False
        again = mf.corrupt(img, name, s, dataset=dataset, seed=11, index=3)
        assert np.array_equal(out, again)
    assert np.array_equal(img, before)


@pytest.mark.parametrize("dataset", SUITES)
@pytest.mark.parametrize("name", NAMES)
def test_batch_equals_single(ihc, dataset, name):
    imgs = np.stack([image_of_shape(ihc, (50, 70, 3))] * 2
                    + [np.ascontiguousarray(ihc[:50, :70, :])] * 2)
    view = imgs[:, ::-1]  # non-contiguous input
    out = mf.corrupt_batch(view, name, 4, dataset=dataset, seed=5, start=10, num_threads=2)
    for i in range(len(imgs)):
        assert np.array_equal(out[i], mf.corrupt(view[i], name, 4, dataset=dataset, seed=5,
                                                 index=10 + i))


@pytest.mark.parametrize("dataset", SUITES)
@pytest.mark.parametrize("name", ["brightness", "hue", "marking", "bubble"])
def test_public_equals_kernel_with_sampled_values(ihc, dataset, name):
    img = batch_for(ihc, dataset)
    kind = P.PATHOLOGY_KINDS[name]
    for s in range(1, 6):
        param = registry.TABLES[dataset][name][s - 1]
        key = rng.image_keys(rng.base_key(9, dataset, name, s), 4)
        values = api.sample_values(kind, param, (s, REF[dataset]), img.shape, key)
        expected = kind.kernel(img, **values)
        assert np.array_equal(mf.corrupt(img, name, s, dataset=dataset, seed=9, index=4), expected)


# ---------------------------------------------------------------------------------------------
# Monotone degradation
# ---------------------------------------------------------------------------------------------

def mean_abs_change(clean, dataset, name, seeds=(0,)):
    """Mean |corrupted - clean| over the images and seeds, per severity 1..5."""
    out = []
    for s in range(1, 6):
        total = 0.0
        for seed in seeds:
            cor = mf.corrupt_batch(clean, name, s, dataset=dataset, seed=seed)
            total += np.abs(cor.astype(np.int16) - clean).mean()
        out.append(total / len(seeds))
    return np.array(out)


@pytest.mark.parametrize("dataset", SUITES)
@pytest.mark.parametrize("name", NAMES)
def test_monotone_over_severity(patches96, patches224, dataset, name):
    clean = patches96[::2] if dataset == "pathology96" else patches224
    seeds = tuple(range(8)) if name == "motion_blur" else (0,)
    change = mean_abs_change(clean, dataset, name, seeds)
    assert np.all(np.diff(change) >= 0), change
    assert change[0] > 0


@pytest.mark.parametrize("dataset", SUITES)
@pytest.mark.parametrize("name", NAMES)
def test_monotone_at_other_size(ihc, dataset, name):
    clean = np.stack([ihc[r:r + 50, c:c + 70] for r in (0, 150, 300) for c in (0, 200, 400)])
    seeds = tuple(range(8)) if name == "motion_blur" else (0,)
    change = mean_abs_change(clean, dataset, name, seeds)
    assert np.all(np.diff(change) >= 0), change


# ---------------------------------------------------------------------------------------------
# Oracles written from the spec
# ---------------------------------------------------------------------------------------------

def oracle_pixelate(img, factor):
    pil = Image.fromarray(img)
    w, h = pil.size
    small = pil.resize((max(1, int(w * factor)), max(1, int(h * factor))), Image.BOX)
    return np.array(small.resize((w, h), Image.BOX))


@pytest.mark.parametrize("dataset", SUITES)
@pytest.mark.parametrize("shape", [(96, 96, 3), (224, 224, 3), (50, 70, 3)])
def test_pixelate_oracle(ihc, dataset, shape):
    img = image_of_shape(ihc, shape)
    for s, f in enumerate(registry.TABLES[dataset]["pixelate"], 1):
        got = mf.corrupt(img, "pixelate", s, dataset=dataset)
        assert np.array_equal(got, oracle_pixelate(img, f))


def oracle_disk(radius, alias):
    """The spec's defocus kernel: aliased disk on -half..half (half = 8 when radius <= 8, else
    the radius), / sum in float32, then an OpenCV GaussianBlur (3x3 if radius <= 8 else 5x5,
    sigma = alias) with reflect-101 borders, not renormalised."""
    half = 8 if radius <= 8 else math.ceil(radius)
    ksize = 3 if radius <= 8 else 5
    ax = np.arange(-half, half + 1)
    disk = ((ax[None, :] ** 2 + ax[:, None] ** 2) <= radius * radius).astype(np.float32)
    disk /= disk.sum()
    x = np.arange(ksize) - (ksize - 1) / 2
    g = np.exp(-x**2 / (2 * alias**2))
    g /= g.sum()
    pad = ksize // 2
    k = disk.astype(np.float64)
    for axis in (0, 1):
        padded = np.pad(k, [(pad, pad) if a == axis else (0, 0) for a in (0, 1)], mode="reflect")
        k = sum(g[i] * np.take(padded, np.arange(i, i + k.shape[axis]), axis=axis)
                for i in range(ksize))
    return k.astype(np.float32)


def oracle_scaled_disk(radius, alias, scale):
    """The documented rule at other sizes (``blur.scaled_defocus_kernel``): the reference kernel
    as a piecewise-constant function on unit cells centred on -h..h, integrated over cells of
    width 1 / scale centred on j / scale (j = -H..H, H = ceil((h + 0.5) scale - 0.5)); if the
    variance of its row profile is then below scale**2 times the reference's, each axis is
    convolved with (a, 1 - 2a, a), 2a the shortfall; rescaled to the reference kernel's sum.
    Written with plain loops."""
    ref = oracle_disk(radius, alias).astype(np.float64)
    h = ref.shape[0] // 2
    big_h = max(0, math.ceil((h + 0.5) * scale - 0.5))
    n = 2 * big_h + 1
    out = np.zeros((n, n))
    for i in range(n):
        for j in range(n):
            yi, xj = (i - big_h) / scale, (j - big_h) / scale
            for a in range(2 * h + 1):
                oy = min(yi + 0.5 / scale, a - h + 0.5) - max(yi - 0.5 / scale, a - h - 0.5)
                if oy <= 0:
                    continue
                for b in range(2 * h + 1):
                    ox = min(xj + 0.5 / scale, b - h + 0.5) - max(xj - 0.5 / scale, b - h - 0.5)
                    if ox > 0:
                        out[i, j] += oy * ox * ref[a, b]

    def variance(kernel):
        half = kernel.shape[0] // 2
        total = moment = 0.0
        for i in range(kernel.shape[0]):
            for j in range(kernel.shape[1]):
                total += kernel[i, j]
                moment += kernel[i, j] * (i - half) ** 2
        return moment / total

    shortfall = scale * scale * variance(ref) - variance(out)
    if shortfall > 0:
        a = shortfall / 2
        wide = np.zeros((n + 2, n + 2))
        for i in range(n):
            for j in range(n):
                for di, wi in ((-1, a), (0, 1 - 2 * a), (1, a)):
                    for dj, wj in ((-1, a), (0, 1 - 2 * a), (1, a)):
                        wide[i + 1 + di, j + 1 + dj] += wi * wj * out[i, j]
        out = wide
    return (out * (ref.sum() / out.sum())).astype(np.float32)


def oracle_filter(img, kernel):
    """Naive correlation of x / 255 (float64) with reflect-101 borders, clip, * 255, truncate."""
    x = img.astype(np.float64) / 255.0
    half = kernel.shape[0] // 2
    padded = np.pad(x, ((half, half), (half, half), (0, 0)), mode="reflect")
    h, w = img.shape[:2]
    acc = np.zeros_like(x)
    for dy in range(kernel.shape[0]):
        for dx in range(kernel.shape[1]):
            acc += float(kernel[dy, dx]) * padded[dy:dy + h, dx:dx + w]
    return (np.clip(acc, 0, 1) * 255).astype(np.uint8)


@pytest.mark.parametrize("dataset", SUITES)
@pytest.mark.parametrize("shape", [None, (50, 70, 3), (13, 11, 3), "larger"])
def test_defocus_oracle(ihc, dataset, shape):
    # Below the reference size the carried kernel (oracle_scaled_disk); above it the spec's
    # kernel made with radius and alias sigma scaled.
    if shape == "larger":
        shape = (REF[dataset] * 5 // 4, REF[dataset] * 3 // 2, 3)
    shape = shape or (REF[dataset], REF[dataset], 3)
    img = image_of_shape(ihc, shape)
    scale = min(shape[:2]) / REF[dataset]
    for s, (radius, alias) in enumerate(registry.TABLES[dataset]["defocus_blur"], 1):
        got = mf.corrupt(img, "defocus_blur", s, dataset=dataset)
        kernel = (oracle_disk(radius * scale, alias * scale) if scale >= 1
                  else oracle_scaled_disk(radius, alias, scale))
        want = oracle_filter(img, kernel)
        assert np.abs(got.astype(int) - want).max() <= 1, (s, radius, alias)


def oracle_motion_taps(radius, sigma, angle):
    """Spec: n = 2 ceil(radius) + 1 taps, w_k ~ exp(-k^2 / (2 sigma^2)), offsets
    dx = ceil(k cos t - 0.5), dy = ceil(k sin t - 0.5)."""
    n = 2 * math.ceil(radius) + 1
    t = math.radians(angle)
    w = np.array([math.exp(-k * k / (2 * sigma * sigma)) for k in range(n)])
    w /= w.sum()
    return [(w[k], math.ceil(k * math.cos(t) - 0.5), math.ceil(k * math.sin(t) - 0.5))
            for k in range(n)]


def oracle_apply_taps(img, taps):
    """out = sum_k w_k img(y + dy_k, x + dx_k), edges replicated, rounded."""
    h, wd = img.shape[:2]
    rows, cols = np.arange(h), np.arange(wd)
    acc = np.zeros(img.shape, np.float64)
    for wk, dx, dy in taps:
        r = np.clip(rows + dy, 0, h - 1)
        c = np.clip(cols + dx, 0, wd - 1)
        acc += wk * img[r][:, c]
    return np.floor(acc + 0.5).astype(np.uint8)


def oracle_motion(img, radius, sigma, angle):
    return oracle_apply_taps(img, oracle_motion_taps(radius, sigma, angle))


def oracle_motion_scaled(img, radius, sigma, angle, scale):
    """The documented rule below the reference size (``blur.motion_taps_scaled``): every tap's
    offset times ``scale``, its weight split bilinearly over the four surrounding pixels,
    weights on the same pixel added. Written with a dict."""
    spread = {}
    for wk, dx, dy in oracle_motion_taps(radius, sigma, angle):
        x, y = dx * scale, dy * scale
        fx, fy = math.floor(x), math.floor(y)
        for px, wx in ((fx, 1 - (x - fx)), (fx + 1, x - fx)):
            for py, wy in ((fy, 1 - (y - fy)), (fy + 1, y - fy)):
                spread[(px, py)] = spread.get((px, py), 0.0) + wk * wx * wy
    return oracle_apply_taps(img, [(wk, px, py) for (px, py), wk in spread.items()])


@pytest.mark.parametrize("dataset", SUITES)
@pytest.mark.parametrize("angle", [0.0, 30.0, -45.0, 17.3, 44.9])
def test_motion_oracle_fixed_angle(ihc, dataset, angle):
    img = batch_for(ihc, dataset)
    for radius, sigma in registry.TABLES[dataset]["motion_blur"]:
        got = functional.motion_blur(img, radius=radius, sigma=sigma, angle=angle)
        want = oracle_motion(img, radius, sigma, angle)
        assert np.abs(got.astype(int) - want).max() <= 1, (radius, sigma, angle)


@pytest.mark.parametrize("dataset", SUITES)
@pytest.mark.parametrize("shape", [None, (50, 70, 3), (13, 11, 3)])
def test_motion_registry_uses_scaled_table(ihc, dataset, shape):
    """corrupt() = the spec's motion blur with the angle drawn in [-45, 45] degrees: at the
    reference size with the table's radius and sigma, below it with the reference size's taps
    shrunk by min(H, W) / ref (oracle_motion_scaled)."""
    shape = shape or (REF[dataset], REF[dataset], 3)
    img = image_of_shape(ihc, shape)
    scale = min(shape[:2]) / REF[dataset]
    for s, (radius, sigma) in enumerate(registry.TABLES[dataset]["motion_blur"], 1):
        key = rng.image_keys(rng.base_key(3, dataset, "motion_blur", s), 0)
        values = api.sample_values(kind_of(dataset, "motion_blur"),
                                   (radius, sigma), (s, REF[dataset]), img.shape, key)
        assert -45 <= values["angle"] <= 45
        assert (values["radius"], values["scale"]) == (radius, scale)
        got = mf.corrupt(img, "motion_blur", s, dataset=dataset, seed=3)
        want = oracle_motion_scaled(img, radius, sigma, values["angle"], scale)
        assert np.abs(got.astype(int) - want).max() <= 1


def oracle_hsv(img, channel, amount):
    """Spec: x / 255 float64, rgb2hsv, shift (S, V clipped; H minus 1 above 1), hsv2rgb,
    clip, * 255, truncate."""
    hsv = skimage.color.rgb2hsv(img / 255.0)
    if channel == 0:
        h = hsv[..., 0] + amount
        h[h > 1] -= 1
        h[h < 0] += 1
        hsv[..., 0] = h
    else:
        hsv[..., channel] = np.clip(hsv[..., channel] + amount, 0, 1)
    return (np.clip(skimage.color.hsv2rgb(hsv), 0, 1) * 255).astype(np.uint8)


HSV_OF = {"hue": 0, "saturate": 1, "brightness": 2}


@pytest.mark.parametrize("dataset", SUITES)
@pytest.mark.parametrize("name", sorted(HSV_OF))
def test_hsv_oracle(patches96, patches224, ihc, dataset, name):
    imgs = list(patches96[:6]) + list(patches224[:2]) + [image_of_shape(ihc, (50, 70, 3))]
    for img in imgs:
        for s, amount in enumerate(registry.TABLES[dataset][name], 1):
            got = mf.corrupt(img, name, s, dataset=dataset)
            np.testing.assert_array_equal(got, oracle_hsv(img, HSV_OF[name], amount))


@pytest.mark.parametrize("name", sorted(HSV_OF))
def test_hsv_oracle_gray_goes_through_rgb(ihc, name):
    img = image_of_shape(ihc, (96, 96))
    for s, amount in enumerate(registry.TABLES["pathology96"][name], 1):
        rgb = np.array(Image.fromarray(img).convert("RGB"))
        want = np.array(Image.fromarray(oracle_hsv(rgb, HSV_OF[name], amount)).convert("L"))
        np.testing.assert_array_equal(mf.corrupt(img, name, s, dataset="pathology96"), want)


def test_hsv_shift_all_colours_and_negative_shifts():
    """Every 3-bit-per-channel colour corner plus random colours, positive and negative shifts,
    against the scikit-image oracle (ties between channels, grays, pure colours)."""
    levels = np.array([0, 1, 2, 64, 127, 128, 254, 255], np.uint8)
    grid = np.stack(np.meshgrid(levels, levels, levels, indexing="ij"), -1).reshape(-1, 3)
    rand = np.random.default_rng(0).integers(0, 256, (4096 - grid.shape[0], 3), dtype=np.uint8)
    img = np.concatenate([grid, rand]).reshape(64, 64, 3)
    for channel, name in ((0, "hue"), (1, "s"), (2, "value")):
        for amount in (-1.0, -0.55, -0.02, 0.0, 0.013, 0.5, 0.999, 1.0):
            np.testing.assert_array_equal(P.hsv_shift(img, name, amount),
                                          oracle_hsv(img, channel, amount))


def _all_colours():
    """Every 24-bit colour once, as a (4096, 4096, 3) image."""
    k = np.arange(2 ** 24, dtype=np.uint32)
    return np.stack([k >> 16, (k >> 8) & 255, k & 255], -1).astype(np.uint8).reshape(4096, 4096, 3)


@pytest.mark.slow
def test_hsv_kernel_builds_agree_on_every_colour():
    """The AVX-512, AVX2 and baseline builds of the C++ kernel (those this CPU runs) give the
    same bytes on all 2^24 colours, RGB and gray, for shifts at and inside the ends of [-1, 1];
    and the chosen build equals the scikit-image oracle on one colour in 64 (a 2^18 sample
    covering every value of each channel)."""
    from medmnistc_fast import _native

    isas = _native._hsv_isas()
    assert isas[-1] == "baseline"
    img = _all_colours()
    gray = np.arange(256, dtype=np.uint8).reshape(16, 16, 1)
    odd = img[1000:1037, 77:106]  # 37 x 29: the last block is partial
    for channel in (0, 1, 2):
        for amount in (-1.0, -0.37, 0.05, 1.0):
            want = _native.hsv_shift(img, channel, amount, "baseline")
            for isa in isas[:-1]:
                assert np.array_equal(_native.hsv_shift(img, channel, amount, isa), want), \
                    (isa, channel, amount)
            for isa in isas:
                for x in (gray, np.ascontiguousarray(odd)):
                    assert np.array_equal(_native.hsv_shift(x, channel, amount, isa),
                                          _native.hsv_shift(x, channel, amount, "baseline"))
            sample = img.reshape(-1, 3)[::64].reshape(512, 512, 3)
            np.testing.assert_array_equal(_native.hsv_shift(sample, channel, amount),
                                          oracle_hsv(sample, channel, amount))


def test_hsv_kernel_rejects_what_it_cannot_run():
    from medmnistc_fast import _native

    img = np.zeros((8, 8, 3), np.uint8)
    with pytest.raises(ValueError, match="channel must be 0 .hue., 1 .saturation. or 2"):
        _native.hsv_shift(img, 3, 0.1)
    with pytest.raises(ValueError, match="1 or 3 channels"):
        _native.hsv_shift(np.zeros((8, 8, 2), np.uint8), 1, 0.1)
    with pytest.raises(ValueError, match="isa 'sse9' is not available"):
        _native.hsv_shift(img, 1, 0.1, "sse9")


def test_saturate_is_the_generic_hsv_kernel(patches96):
    """MedMNIST-C's saturate kind (used by the suite) equals hsv_shift on the S channel."""
    for amount in registry.TABLES["pathology224"]["saturate"]:
        np.testing.assert_array_equal(functional.saturate(patches96[3], amount),
                                      P.hsv_shift(patches96[3], "saturation", amount))


# ---------------------------------------------------------------------------------------------
# marking
# ---------------------------------------------------------------------------------------------

def blot_hash(width, height):
    mask, colour = P.blot(width, height)
    return hashlib.sha256(mask.tobytes() + colour.tobytes()).hexdigest()


def test_blot_deterministic_across_processes():
    code = ("from medmnistc_fast.corruptions import pathology as P; import hashlib;"
            "m, c = P.blot(54, 57); print(hashlib.sha256(m.tobytes() + c.tobytes()).hexdigest())")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == blot_hash(54, 57)
    P.blot.cache_clear()
    assert blot_hash(54, 57) == out.stdout.strip()


@pytest.mark.parametrize("dataset", SUITES)
def test_blot_sizes_areas_colours(dataset):
    side = REF[dataset]
    for s, (w, h) in enumerate(registry.TABLES[dataset]["marking"], 1):
        mask, colour = P.blot(w, h)
        assert mask.shape == (h, w) and colour.shape == (h, w, 3) and colour.dtype == np.uint8
        rows, cols = np.nonzero(mask)
        assert (cols.max() - cols.min() + 1, rows.max() - rows.min() + 1) == (w, h)
        # Spec: area about (s / 10)^2 of the image.
        assert mask.sum() == pytest.approx((s / 10) ** 2 * side * side, rel=0.10)
        ink = colour[mask].astype(np.float64)
        np.testing.assert_allclose(ink.mean(axis=0), P.INK_MEAN, atol=1.0)
        np.testing.assert_array_equal(ink.min(axis=0), P.INK_DARKEST)
        assert tuple(colour[mask][np.argmin(ink.sum(1))]) == (15, 10, 8)
        light = ink[:, 0] > 60
        assert 0 < light.mean() < 0.08  # a few lighter pixels ...
        # ... on the rim: within the outer 15 % of the half-size of the blot (at least 2 px)
        # from a non-ink pixel or the box border.
        depth = scipy.ndimage.distance_transform_edt(np.pad(mask, 1))[1:-1, 1:-1]
        assert (depth[mask][light] <= max(2.0, 0.15 * max(w, h) / 2)).all()
        assert light.any() and ink[:, 0].max() > 2 * P.INK_MEAN[0]


@pytest.mark.parametrize("dataset, side", [("pathology96", 14), ("pathology224", 12)])
def test_one_pixel_blot_takes_the_mean_ink(dataset, side):
    # Level 1 on a tiny image: the table box scaled by side / reference rounds to 1 x 1
    # (10 * 14 / 96 = 1.46, 26 * 12 / 224 = 1.39); its only ink pixel is the spec's mean ink,
    # at the corner scaled the same way, round half up.
    (w, h), ref = registry.TABLES[dataset]["marking"][0], REF[dataset]
    assert max(w, h) * side / ref < 1.5
    x0, y0 = P.MARKING_POSITIONS[ref]
    img = np.full((side, side, 3), 255, np.uint8)
    out = mf.corrupt(img, "marking", 1, dataset=dataset)
    ink = np.argwhere((out != 255).any(axis=2))
    assert ink.tolist() == [[math.floor(y0 * side / ref + 0.5), math.floor(x0 * side / ref + 0.5)]]
    assert tuple(out[tuple(ink[0])]) == (34, 21, 18)


CAPPED_INK = (148, 87, 78)  # INK_DARKEST + 7 * (INK_MEAN - INK_DARKEST), rounded half up


@pytest.mark.parametrize("width, height", [(100, 1), (1, 100), (24, 1), (60, 2), (3, 40)])
def test_thin_blots_stay_ink(width, height):
    # Boxes far thinner than wide put all their ink on the rim band, whose normalised shade has
    # no natural bound: capped, no ink pixel is lighter than CAPPED_INK (a 100 x 1 box was
    # (255, 255, 232) before the cap).
    mask, colour = P.blot(width, height)
    ink = colour[mask]
    assert ink.size and (ink <= CAPPED_INK).all()
    assert (ink >= P.INK_DARKEST).all()


@pytest.mark.parametrize("dataset", SUITES)
@pytest.mark.parametrize("side", [8, 33, 50, 96, 160, 224, 517])
def test_blot_shade_cap_never_binds_in_the_registry(dataset, side):
    # The cap only changes degenerate boxes: every blot the registry draws (the table's sizes
    # scaled to the image) stays strictly below it.
    img = np.zeros((side, side, 3), np.uint8)
    for s, (w, h) in enumerate(registry.TABLES[dataset]["marking"], 1):
        out = mf.corrupt(img, "marking", s, dataset=dataset, seed=0)
        ink = out[out.any(axis=2)]
        assert ink.size and (ink[:, 0] < CAPPED_INK[0]).all(), (side, s)


@pytest.mark.parametrize("dataset", SUITES)
def test_marking_position_and_paste(ihc, dataset):
    side = REF[dataset]
    img = batch_for(ihc, dataset)
    x0, y0 = P.MARKING_POSITIONS[side]
    for s, (w, h) in enumerate(registry.TABLES[dataset]["marking"], 1):
        out = mf.corrupt(img, "marking", s, dataset=dataset, seed=s)
        mask, colour = P.blot(w, h)
        box = out[y0:y0 + h, x0:x0 + w]
        np.testing.assert_array_equal(box[mask], colour[mask])
        untouched = np.ones(img.shape[:2], bool)
        untouched[y0:y0 + h, x0:x0 + w] = ~mask
        np.testing.assert_array_equal(out[untouched], img[untouched])


def test_marking_scales_with_image(ihc):
    img = image_of_shape(ihc, (50, 70, 3))
    s = 50 / 96
    for lvl, (w, h) in enumerate(registry.TABLES["pathology96"]["marking"], 1):
        values = P.marking_sample((w, h), Context(img.shape, 0, lvl, 96))
        assert values == {"width": max(1, math.floor(w * s + 0.5)),
                          "height": max(1, math.floor(h * s + 0.5)),
                          "x": math.floor(17 * s + 0.5), "y": math.floor(10 * s + 0.5)}


def test_marking_functional_and_random_variant(ihc):
    img = image_of_shape(ihc, (96, 96, 3))
    fixed = P.marking(img, (42, 45), (17, 10))
    np.testing.assert_array_equal(fixed, mf.corrupt(img, "marking", 4, dataset="pathology96"))
    a = P.marking(img, (30, 20), seed=1)
    assert np.array_equal(a, P.marking(img, (30, 20), seed=1))
    corners = set()
    for key in range(40):
        v = P.MARKING_RANDOM.sample((42, 45), Context(img.shape, key, 4, 96))
        assert 0 <= v["x"] <= 96 - 42 and 0 <= v["y"] <= 96 - 45
        corners.add((v["x"], v["y"]))
    assert len(corners) > 30
    # Partly outside the image: cropped, never an error.
    edge = P.marking(img, (30, 30), (80, -10))
    assert not np.array_equal(edge, img)
    assert np.array_equal(P.marking(img, (30, 30), (200, 200)), img)
    gray = P.marking(img[..., 0], (30, 20), (5, 5))
    assert gray.shape == (96, 96)


def test_marking_random_corner_covers_every_position_inclusive():
    # Documented: x uniform on 0..W - width and y on 0..H - height, both ends included (and
    # W - width..0 when the blot is wider than the image). 3000 keys over 23 and 19 positions.
    xs, ys = set(), set()
    wide_x, tall_y = set(), set()
    for key in range(3000):
        v = P._random_corner(key, (20, 24, 3), 2, 2)
        xs.add(v["x"])
        ys.add(v["y"])
        v = P._random_corner(key, (20, 24, 3), 30, 26)
        wide_x.add(v["x"])
        tall_y.add(v["y"])
    assert xs == set(range(0, 23)) and ys == set(range(0, 19))
    assert wide_x == set(range(-6, 1)) and tall_y == set(range(-6, 1))


def test_marking_random_blot_larger_than_image(ihc):
    # A blot box larger than the image: the drawn corner keeps the image inside the box, so
    # the image always gets ink (a corner at 0 would show only the box's empty corner).
    img = image_of_shape(ihc, (16, 24, 3))
    w, h = 60, 50
    mask = P.blot(w, h)[0]
    for seed in range(30):
        v = P._random_corner(rng.key_from_seed(seed), img.shape, w, h)
        assert 24 - w <= v["x"] <= 0 and 16 - h <= v["y"] <= 0
        out = P.marking(img, (w, h), seed=seed)
        window = mask[-v["y"]:-v["y"] + 16, -v["x"]:-v["x"] + 24]
        changed = np.any(out != img, axis=2)
        assert np.all(changed <= window)           # ink only under the blot's mask
        assert changed.any() == window.any()       # unless the ink equals the pixels there
    assert sum(np.any(P.marking(img, (w, h), seed=s) != img) for s in range(30)) >= 25


# ---------------------------------------------------------------------------------------------
# bubble
# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("shape", [(96, 96), (224, 224), (50, 70), (28, 28)])
def test_bubble_layer_statistics(shape):
    bubble, mask = P.bubble_layer(*shape)
    again = P.bubble_layer.__wrapped__(*shape)
    assert np.array_equal(bubble, again[0]) and np.array_equal(mask, again[1])
    assert bubble.shape == shape + (3,) and mask.shape == shape
    assert 0.0 <= mask.min() and mask.max() == 1.0
    # About 65 % of the patch (spec).
    assert (mask >= 0.5).mean() == pytest.approx(0.65, abs=0.02)
    inside = mask == 1.0
    h, w = shape
    yy, xx = np.mgrid[:h, :w] + 0.5
    rho = np.hypot((xx - 0.48 * w) / (0.46 * w), (yy - 0.52 * h) / (0.45 * h))
    interior = bubble[inside & (rho < 0.8)].astype(float)
    # Light near-neutral interior, about 229.
    assert abs(np.median(interior) - 229) <= 3
    assert np.ptp(np.median(interior, axis=0)) <= 4
    if min(shape) >= 96:
        # Dark rim, minimum about 29; two dark lines along a horizontal ray from the centre.
        assert bubble[mask > 0].min() <= 32
        row = int(0.52 * h)
        profile = bubble[row, : int(0.48 * w), 1].astype(int)
        dips = [i for i in range(1, len(profile) - 1) if profile[i] < 200
                and profile[i] <= profile[i - 1] and profile[i] < profile[i + 1]]
        assert len(dips) == 2, profile[:20]


def oracle_blend(img, bubble, mask, r):
    x = img.astype(np.float64)
    return (x + mask[..., None] * r * (bubble.astype(np.float64) - x)).astype(np.uint8)


@pytest.mark.parametrize("dataset", SUITES)
def test_bubble_blend(ihc, dataset):
    img = batch_for(ihc, dataset)
    bubble, mask = P.bubble_layer(*img.shape[:2])
    for s, r in enumerate(registry.TABLES[dataset]["bubble"], 1):
        got = mf.corrupt(img, "bubble", s, dataset=dataset)
        np.testing.assert_array_equal(got, oracle_blend(img, bubble, mask, r))
    assert np.array_equal(P.pathology_bubble(img, 0.0), img)
    full = P.pathology_bubble(img, 1.0)
    np.testing.assert_array_equal(full[mask == 1], bubble[mask == 1])
    np.testing.assert_array_equal(full[mask == 0], img[mask == 0])
    gray = image_of_shape(ihc, (96, 96))
    want = to_gray(oracle_blend(np.repeat(gray[..., None], 3, 2), *P.bubble_layer(96, 96), 0.5))
    np.testing.assert_array_equal(P.pathology_bubble(gray, 0.5), want[..., 0])


# ---------------------------------------------------------------------------------------------
# Functional-layer validation and helpers
# ---------------------------------------------------------------------------------------------

def test_functional_validation(patches96):
    img = patches96[0]
    with pytest.raises(ValueError, match="channel"):
        P.hsv_shift(img, "x", 0.1)
    for bad in (None, 3, b"v"):   # not names: a TypeError (it was a ValueError)
        with pytest.raises(TypeError, match=r"^channel must be a str"):
            P.hsv_shift(img, bad, 0.1)
    with pytest.raises(ValueError, match="amount"):
        P.hsv_shift(img, "hue", 1.5)
    with pytest.raises(ValueError, match="amount"):
        P.hsv_shift(img, "hue", float("nan"))
    with pytest.raises(TypeError, match="amount"):
        P.hsv_shift(img, "hue", True)
    with pytest.raises(ValueError, match="size"):
        P.marking(img, (0, 5), (1, 1))
    with pytest.raises(TypeError, match="size"):
        P.marking(img, (2.5, 5), (1, 1))
    with pytest.raises(TypeError, match="position"):
        P.marking(img, (5, 5), (1, "a"))
    with pytest.raises(ValueError, match="seed"):
        P.marking(img, (5, 5), seed=-1)
    # an invalid seed is refused with an explicit position too (it used to be ignored)
    with pytest.raises(ValueError, match="seed"):
        P.marking(img, (5, 5), (1, 1), seed=-1)
    with pytest.raises(TypeError, match="seed"):
        P.marking(img, (5, 5), (1, 1), seed="7")
    with pytest.raises(ValueError, match="strength"):
        P.pathology_bubble(img, 1.01)
    with pytest.raises(TypeError, match="image"):
        P.pathology_bubble(img.astype(np.float32), 0.5)
    before = img.copy()
    P.hsv_shift(img, "v", 0.2), P.marking(img, (9, 9), (0, 0)), P.pathology_bubble(img, 0.5)
    assert np.array_equal(img, before)


def test_marking_pairs_from_arrays(patches96):
    img = patches96[0]
    # A 0-d array has no len(): it raised "len() of unsized object", naming no argument.
    with pytest.raises(TypeError, match=r"size must be a pair of ints in 1\.\.1024"):
        P.marking(img, np.array(5), (1, 1))
    with pytest.raises(TypeError, match=r"position must be a pair of ints"):
        P.marking(img, (5, 5), np.array(1))
    with pytest.raises(TypeError, match=r"size must be a pair of ints"):
        P.marking(img, np.array([[5, 5], [5, 5]]), (1, 1))
    # 1-D integer arrays are pairs like tuples
    np.testing.assert_array_equal(P.marking(img, np.array([9, 7]), np.array([3, 4])),
                                  P.marking(img, (9, 7), (3, 4)))


def test_suite_for_size():
    assert P.suite_for_size(96, 96) == "pathology96"
    assert P.suite_for_size(28, 300) == "pathology96"
    assert P.suite_for_size(160, 160) == "pathology96"
    assert P.suite_for_size(161, 200) == "pathology224"
    assert P.suite_for_size(224, 224) == "pathology224"


@pytest.mark.parametrize("func, names", [(P.suite_for_size, ("height", "width")),
                                         (P.blot, ("width", "height")),
                                         (P.bubble_layer, ("height", "width"))])
def test_size_helpers_validate_their_arguments(func, names):
    # Bad sizes are named in the error (they used to surface as NumPy's "attempt to get argmax
    # of an empty sequence" / "invalid literal for int()", or as a silent answer for -5 or 2.5).
    for i, name in enumerate(names):
        for bad, exc in [(0, ValueError), (-5, ValueError), (2.5, TypeError), ("96", TypeError),
                         (True, TypeError), (None, TypeError)]:
            args = [12, 12]
            args[i] = bad
            with pytest.raises(exc, match=name):
                func(*args)
    # True == 1 and 12.0 == 12 must not slip through a cache entry made with a valid int.
    func(1, 1), func(12, 12)
    with pytest.raises(TypeError, match=names[0]):
        func(True, 1)
    with pytest.raises(TypeError, match=names[0]):
        func(12.0, 12)
    # a NumPy integer is accepted and gives the same answer as the Python int
    got, want = func(np.int64(12), 12), func(12, 12)
    if isinstance(want, str):
        assert got == want == "pathology96"  # 12 px is nearer 96 than 224
    else:
        assert len(got) == len(want) and all(np.array_equal(g, w) for g, w in zip(got, want))


def test_hsv_shift_channel_names_case_insensitive(patches96):
    # Documented: the channel name is case-insensitive; the shift equals scikit-image's.
    img = patches96[1]
    hsv = skimage.color.rgb2hsv(img / 255.0)
    hsv[..., 2] = np.clip(hsv[..., 2] + 0.2, 0, 1)
    want = (np.clip(skimage.color.hsv2rgb(hsv), 0, 1) * 255).astype(np.uint8)
    for name in ("v", "V", "value", "Value", "VALUE"):
        assert np.array_equal(P.hsv_shift(img, name, 0.2), want)
