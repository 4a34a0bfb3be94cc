"""Noise kernels: the exact per-element law against a Monte-Carlo oracle of the reference's
formulas (written here with NumPy's own generators), and the kernel's samples against the law."""
import numpy as np
import pytest

import medmnistc_fast as mf
from medmnistc_fast.corruptions._graylaw import gray_law
from medmnistc_fast.corruptions._spec import to_gray
from medmnistc_fast.corruptions.noise import apply_law, output_law

N = 200_000


def oracle(noise, v, param, rng):
    """The reference's arithmetic on N elements of value v (reference noise.py / scikit-image)."""
    x = np.full(N, v / 255.0)
    if noise == "gaussian":
        y = x + rng.normal(size=N, scale=param)
    elif noise == "speckle":
        y = x + x * rng.normal(size=N, scale=param)
    elif noise == "shot":
        y = rng.poisson(x * param) / param
    else:  # s&p, as skimage.util.random_noise: Bernoulli(amount) flips, Bernoulli(0.5) salt
        flipped = rng.random(N) <= param
        salted = rng.random(N) <= 0.5
        y = x.copy()
        y[flipped & salted] = 1.0
        y[flipped & ~salted] = 0.0
    return (np.clip(y, 0, 1) * 255).astype(np.uint8)


def assert_same_law(samples, law, n_samples):
    """Pearson chi-square goodness of fit of sampled output values to ``law``, pooling bins
    whose expected count is under 5; the test fails with probability 1e-6 under the law."""
    from scipy.stats import chi2

    observed = np.bincount(samples, minlength=256).astype(float)
    expected = law * n_samples
    big = expected >= 5
    obs = np.append(observed[big], observed[~big].sum())
    exp = np.append(expected[big], expected[~big].sum())
    keep = exp > 0
    stat = ((obs[keep] - exp[keep]) ** 2 / exp[keep]).sum()
    assert stat < chi2.ppf(1 - 1e-6, df=max(keep.sum() - 1, 1)), stat


CASES = [("gaussian", 0.04), ("gaussian", 0.26), ("speckle", 0.05), ("speckle", 0.6),
         ("impulse", 0.01), ("impulse", 0.17), ("shot", 5), ("shot", 60), ("shot", 300)]


@pytest.mark.parametrize("v", [255, 128, 51])
def test_shot_law_non_integer_photons_by_hand(v):
    # photons m = 2.5 (the augmentation draws non-integer values): K ~ Poisson(lam), lam = v / 255 * m,
    # and out = trunc(clip(K / m, 0, 1) * 255): K = 0 -> 0, 1 -> 102, 2 -> 204, K >= 3 -> 255
    # (K / m > 1 clips). So P(0) = e^-lam, P(102) = lam e^-lam, P(204) = lam^2 / 2 e^-lam and
    # P(255) = 1 - the three.
    import math

    lam = v / 255 * 2.5
    p = [math.exp(-lam), lam * math.exp(-lam), lam * lam / 2 * math.exp(-lam)]
    want = np.zeros(256)
    want[[0, 102, 204]] = p
    want[255] = 1 - sum(p)
    np.testing.assert_allclose(output_law("shot", 2.5)[v], want, rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize("noise, param", CASES)
@pytest.mark.parametrize("v", [0, 1, 37, 128, 254, 255])
def test_law_matches_reference_formula(noise, param, v):
    rng = np.random.default_rng(v * 1000 + 7)
    law = output_law(noise, param)[v]
    assert law.sum() == pytest.approx(1.0, abs=1e-12)
    assert_same_law(oracle(noise, v, param, rng), law, N)


@pytest.mark.parametrize("noise, param", CASES)
def test_kernel_samples_follow_law(noise, param):
    v = 100
    img = np.full((224, 224, 3), v, np.uint8)
    out = apply_law(img, noise, param, key=12345)
    assert_same_law(out.ravel(), output_law(noise, param)[v], out.size)


def test_gray_impulse_is_luma_of_three_draws():
    """Impulse noise draws the three virtual channels: the gray output is Pillow's L of the RGB
    output for the same key, bit for bit."""
    img = np.random.default_rng(0).integers(0, 256, (31, 45, 1), dtype=np.uint8)
    for noise, p in CASES:
        if noise != "impulse":
            continue
        gray = apply_law(img, noise, p, key=99)
        rgb = apply_law(np.repeat(img, 3, axis=2), noise, p, key=99)
        assert np.array_equal(gray, to_gray(rgb))


def test_to_gray_is_pillows_rgb_to_l_for_every_colour():
    # to_gray is the oracle of the gray tests here and in test_artifacts.py, so it is checked
    # itself against Pillow's convert("L") on all 2**24 colours: the rounding term only matters
    # where the weighted sum is an odd multiple of 2**15 (no gray colour is), which random images
    # rarely hit (mutation check: 0x8000 -> 0x7FFF passed the rest of the suite).
    from PIL import Image

    g, b = np.meshgrid(np.arange(256, dtype=np.uint8), np.arange(256, dtype=np.uint8),
                       indexing="ij")
    for r in range(256):
        rgb = np.ascontiguousarray(np.stack([np.full_like(g, r), g, b], axis=-1))
        want = np.asarray(Image.fromarray(rgb).convert("L"))
        np.testing.assert_array_equal(to_gray(rgb)[..., 0], want, err_msg=f"r = {r}")


LUMA = np.array([19595, 38470, 7471])


def _brute_gray_row(row):
    """P(L = o) by enumerating all 256**3 channel triples (weights = product of the row)."""
    a = np.arange(256)
    lum = ((LUMA[0] * a[:, None, None] + LUMA[1] * a[None, :, None] + LUMA[2] * a[None, None, :]
            + 0x8000) >> 16).ravel()
    p = (row[:, None, None] * row[None, :, None] * row[None, None, :]).ravel()
    return np.bincount(lum, weights=p, minlength=256)


@pytest.mark.parametrize("noise, param", [c for c in CASES if c[0] != "impulse"])
def test_gray_law_is_the_three_draw_luma_law(noise, param):
    law = output_law(noise, param)
    g = gray_law(law)
    assert g.shape == (256, 256) and np.allclose(g.sum(axis=1), 1.0, atol=1e-12)
    for v in (0, 1, 90, 200, 255):
        np.testing.assert_allclose(g[v], _brute_gray_row(law[v]), rtol=0, atol=1e-12)


@pytest.mark.parametrize("noise, param", [("gaussian", 0.08), ("speckle", 0.3), ("shot", 60)])
@pytest.mark.parametrize("v", [3, 128, 250])
def test_gray_kernel_follows_the_reference_pipeline(noise, param, v):
    """Gray kernel samples against L of three independent draws of the reference's formula."""
    rng = np.random.default_rng(v + 11)
    r, g_, b = (oracle(noise, v, param, rng).astype(np.int64) for _ in range(3))
    ref = (LUMA[0] * r + LUMA[1] * g_ + LUMA[2] * b + 0x8000) >> 16
    law = np.bincount(ref, minlength=256) / ref.size  # Monte-Carlo law of the reference
    img = np.full((448, 448, 1), v, np.uint8)
    ours = apply_law(img, noise, param, key=2024).ravel()
    # Two-sample comparison through the exact law: both must fit it.
    exact = gray_law(output_law(noise, param))[v]
    assert_same_law(ours, exact, ours.size)
    assert_same_law(ref, exact, ref.size)
    assert np.abs(law - exact).max() < 0.01


def test_gray_noise_character():
    """Averaging three draws shrinks the spread to sqrt(w_r^2 + w_g^2 + w_b^2) ~ 0.67 of RGB's,
    and impulse noise on gray gives mostly intermediate values (not 0 / 255)."""
    img = np.full((224, 224), 128, np.uint8)
    g = mf.functional.gaussian_noise(img, 0.08, seed=1).astype(float) - 128
    c = mf.functional.gaussian_noise(np.full((224, 224, 3), 128, np.uint8), 0.08,
                                     seed=1).astype(float) - 128
    w = np.array([19595, 38470, 7471]) / 65536
    assert g.std() / c.std() == pytest.approx(np.sqrt((w**2).sum()), rel=0.03)
    imp = mf.functional.impulse_noise(img, 0.17, seed=2)
    changed = imp[imp != 128]
    assert np.mean((changed != 0) & (changed != 255)) > 0.8


def test_noise_statistics_on_real_image(rgb224):
    """Mean and spread of (out - clean) against the reference formula on a real image."""
    img = rgb224[0]
    rng = np.random.default_rng(5)
    x = img / 255.0
    ref = (np.clip(x + rng.normal(size=x.shape, scale=0.12), 0, 1) * 255).astype(np.uint8)
    ours = mf.corrupt(img, "gaussian_noise", 3, dataset="dermamnist", seed=0)
    d_ref = ref.astype(float) - img
    d_ours = ours.astype(float) - img
    assert d_ours.mean() == pytest.approx(d_ref.mean(), abs=0.3)
    assert d_ours.std() == pytest.approx(d_ref.std(), rel=0.01)


def _splitmix64_np(key, i):
    with np.errstate(over="ignore"):
        z = np.uint64(key) + (i.astype(np.uint64) + np.uint64(1)) * np.uint64(0x9E3779B97F4A7C15)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return z ^ (z >> np.uint64(31))


def _alias_model(image, law, key):
    """The documented sampler written independently: Vose tables from scratch, the SplitMix64
    counter stream, 8 column bits and a 24-bit uniform per element (no packed table)."""
    flat = image.reshape(-1).astype(np.int64)
    j = np.arange(flat.size)
    r = _splitmix64_np(key, j // 2)
    r32 = np.where(j % 2 == 0, r >> np.uint64(32), r & np.uint64(0xFFFFFFFF)).astype(np.int64)
    col, u24 = r32 >> 24, r32 & 0xFFFFFF
    prob = np.ones((256, 256))
    alias = np.zeros((256, 256), np.int64)
    for v in np.unique(flat):
        scaled = law[v] * 256
        small = [i for i in range(256) if scaled[i] < 1.0]
        large = [i for i in range(256) if scaled[i] >= 1.0]
        while small and large:
            s_, g = small.pop(), large[-1]
            prob[v, s_], alias[v, s_] = scaled[s_], g
            scaled[g] = (scaled[g] + scaled[s_]) - 1.0
            if scaled[g] < 1.0:
                large.pop()
                small.append(g)
    thresh = np.minimum(np.floor(prob * 2.0**24), 2.0**24)
    keep = u24 < thresh[flat, col]
    return np.where(keep, col, alias[flat, col]).astype(np.uint8).reshape(image.shape)


@pytest.mark.parametrize("shape", [(1, 1, 3), (3, 5, 3), (17, 9, 3), (40, 33, 1), (64, 64, 3)])
@pytest.mark.parametrize("noise, param", [("gaussian", 0.08), ("shot", 60)])
def test_alias_kernel_is_the_documented_sampler(shape, noise, param):
    from medmnistc_fast import _native
    from medmnistc_fast.corruptions._graylaw import gray_law as _gl
    from medmnistc_fast.corruptions.noise import alias_tables

    img = np.random.default_rng(sum(shape)).integers(0, 256, shape, dtype=np.uint8)
    key = 0xFEDCBA9876543210
    law = output_law(noise, param)
    if shape[2] == 1:
        law = _gl(law)
    expected = _alias_model(img, law, key)
    np.testing.assert_array_equal(apply_law(img, noise, param, key), expected)
    table = alias_tables(noise, param, shape[2] == 1)
    np.testing.assert_array_equal(_native.alias_sample(img, table, key, True), expected)


@pytest.mark.parametrize("noise", ["gaussian", "speckle"])
@pytest.mark.parametrize("sigma", [1e-10, 1e-300, 5e-324])
def test_tiny_sigma_law_without_warnings(noise, sigma):
    """A vanishing sigma gives the identity law (up to the real-number law's half-way split at
    exact level boundaries) without overflow warnings (the suite turns warnings into errors)."""
    law = output_law(noise, sigma)
    assert np.allclose(law.sum(axis=1), 1.0)
    v = np.arange(1, 255)
    assert np.all(law[v, v] + law[v, v - 1] == pytest.approx(1.0))
    assert law[0, 0] == 1.0


def test_alias_sampler_accepts_only_strictly_below_the_threshold():
    """csrc/noise.cpp's documented rule: element j's 24 low bits u accept its column col iff
    u < threshold; at u == threshold the column's alias is drawn. Equality has probability
    2**-24 per element, so random tables never met it (mutation check: <= in the portable loop,
    which also samples the AVX-512 path's tail, passed the whole suite). Here every element reads
    its own table row, whose thresholds are set to that element's u (then u + 1), so each
    element sits on the boundary; the stream is computed from the documented SplitMix64 rule."""
    from medmnistc_fast import _native

    m64 = (1 << 64) - 1

    def word(key, i):  # SplitMix64's finaliser of key + (i + 1) * gamma
        z = (key + (i + 1) * 0x9E3779B97F4A7C15) & m64
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & m64
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & m64
        return z ^ (z >> 31)

    key, n = 0x0123456789ABCDEF, 37  # two 16-element AVX-512 steps and an odd 5-element tail
    r32 = [word(key, j // 2) >> 32 if j % 2 == 0 else word(key, j // 2) & 0xFFFFFFFF
           for j in range(n)]
    col = np.array([r >> 24 for r in r32])
    u24 = np.array([r & 0xFFFFFF for r in r32], np.uint32)
    assert u24.max() < 2**24 - 1  # so that u + 1 is still a 24-bit threshold
    image = np.arange(n, dtype=np.uint8).reshape(1, n, 1)  # element j reads table row j
    alias = (np.arange(256, dtype=np.uint32) + 1) % 256  # column c's alias: c + 1
    for delta, want in ((0, (col + 1) % 256), (1, col)):
        table = np.zeros((256, 256), np.uint32)
        table[:n] = ((u24 + np.uint32(delta))[:, None] << np.uint32(8)) | alias[None, :]
        want = want.astype(np.uint8).reshape(image.shape)
        for portable in (False, True):
            got = _native.alias_sample(image, table, key, portable)
            np.testing.assert_array_equal(got, want, err_msg=f"delta={delta} portable={portable}")
