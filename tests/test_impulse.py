"""Impulse (salt and pepper) noise kernel: its documented random stream against an independent
NumPy oracle, its law (rates, salt/pepper split, independence, gaps) against the Bernoulli
model of scikit-image's ``random_noise(mode='s&p')``, the gray L -> RGB -> noise -> L
invariant with Pillow as oracle, and edge cases."""
from fractions import Fraction

import numpy as np
import pytest
from PIL import Image
from scipy import stats

import medmnistc_fast as mf
from medmnistc_fast.corruptions import noise
from medmnistc_fast.corruptions.noise import IMPULSE_NOISE, apply_law, impulse, impulse_cuts

GAMMA = 0x9E3779B97F4A7C15
#: Every statistical test below fails with probability about 1e-6 under the law.
ALPHA = 1e-6
AMOUNTS = [0.005, 0.01, 0.03, 0.09, 0.17, 0.5]


# ---------------------------------------------------------------------------------------------
# Oracle of the documented stream (impulse() Notes), written independently with NumPy
# ---------------------------------------------------------------------------------------------

def splitmix64(key, counters):
    """splitmix64(key + (i + 1) * GAMMA) for a uint64 array of counters i (Steele et al. 2014)."""
    with np.errstate(over="ignore"):
        z = np.uint64(key) + (counters.astype(np.uint64) + np.uint64(1)) * np.uint64(GAMMA)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return z ^ (z >> np.uint64(31))


def oracle_elements(values, amount, key):
    """Outputs for the element stream ``values`` (flat uint8): U_j = (u_j 2**64 + w_j) / 2**80,
    pepper iff U_j < amount / 2, salt iff amount / 2 <= U_j < amount (exact comparisons), and the
    number of elements whose 16-bit part alone did not decide."""
    j = np.arange(values.size, dtype=np.uint64)
    u = (splitmix64(key, j // np.uint64(4)) >> (np.uint64(16) * (j % np.uint64(4)))) \
        & np.uint64(0xFFFF)
    w = splitmix64(key, j + np.uint64(2**63))

    def below(c):  # U_j < c  <=>  u_j 2**64 + w_j < ceil(c 2**80) (integers)
        k = -((-c * 2**80) // 1)
        hi, lo = np.uint64(k >> 64), np.uint64(k & (2**64 - 1))
        return (u < hi) | ((u == hi) & (w < lo)), (u == hi)

    a = Fraction(float(amount))
    pepper, tie1 = below(a / 2)
    hit, tie2 = below(a)
    out = values.copy()
    out[hit] = 255
    out[pepper] = 0
    return out, int((tie1 | tie2).sum())


def pillow_gray(rgb):
    return np.array(Image.fromarray(np.ascontiguousarray(rgb)).convert("L"))[..., None]


# ---------------------------------------------------------------------------------------------
# Exactness of the cut points and of the stream
# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("amount", [0.0, 1e-9, 0.005, 0.01, 0.013, 0.1, 0.17, 1 / 3, 0.5,
                                    0.999999, 1.0])
def test_cut_points_within_2_pow_minus_80(amount):
    t1, f1, t2, f2 = impulse_cuts(amount)
    a = Fraction(amount)
    for t, f, c in ((t1, f1, a / 2), (t2, f2, a)):
        p = Fraction(t * 2**64 + f, 2**80)
        assert 0 <= f < 2**64 and 0 <= t <= 2**16
        assert c <= p < c + Fraction(1, 2**80)


@pytest.mark.parametrize("shape", [(224, 224, 3), (37, 53, 3), (1, 1, 3), (5, 7, 3),
                                   (171, 3, 3)])
def test_rgb_matches_stream_oracle(shape):
    img = np.random.default_rng(shape[0]).integers(0, 256, shape, dtype=np.uint8)
    for amount, key in zip([0.01, 0.17, 0.5, 1.0], [0, 7, 2**64 - 1, 123456789]):
        want, _ = oracle_elements(img.ravel(), amount, key)
        assert np.array_equal(impulse(img, amount, key), want.reshape(shape))


def test_refinement_path_matches_oracle():
    """Over ~3 M elements some u_j fall on a cut point (probability 2 / 65536 each): those are
    decided by the 64 refinement bits, and must still agree with the exact comparison."""
    img = np.full((224, 224, 3), 100, np.uint8)
    ties = 0
    for key in range(20):
        want, t = oracle_elements(img.ravel(), 0.06, key)
        ties += t
        assert np.array_equal(impulse(img, 0.06, key).ravel(), want)
    assert ties > 40  # expected ~ 92


@pytest.mark.parametrize("shape", [(224, 224, 1), (37, 53, 1), (1, 1, 1), (9, 8, 1),
                                   (3, 171, 1)])
def test_gray_is_pillow_luma_of_rgb_stream(shape):
    """L -> RGB -> noise -> L: gray output == Pillow's convert('L') of the replicated RGB image's
    noisy output for the same key (oracle stream and our RGB kernel)."""
    img = np.random.default_rng(shape[1]).integers(0, 256, shape, dtype=np.uint8)
    rgb = np.repeat(img, 3, axis=2)
    for amount, key in zip([0.005, 0.06, 0.17, 1.0], [3, 99, 2**63, 42]):
        gray = impulse(img, amount, key)
        want, _ = oracle_elements(rgb.ravel(), amount, key)
        assert np.array_equal(gray, pillow_gray(want.reshape(rgb.shape)))
        assert np.array_equal(gray, pillow_gray(impulse(rgb, amount, key)))


def test_big_endian_branch_gives_same_stream(monkeypatch):
    """The byte-order fallback (quarters extracted one by one) fills the same uniforms: run
    the kernels' Python code with it forced on (small images; pure Python is slow). The
    compiled results are taken first: once the helpers are patched, a kernel compiled
    afterwards would see Python functions (the test used to pass only after other tests)."""
    cases = []
    for shape, body in (((4, 300, 1), noise._impulse_gray_body),
                        ((2, 200, 3), noise._impulse_elements_body)):
        img = np.random.default_rng(1).integers(0, 256, shape, dtype=np.uint8)
        cases.append((img, body.py_func, impulse(img, 0.17, 5)))
    monkeypatch.setattr(noise, "_LITTLE_ENDIAN", False)
    for name in ("_uniforms16", "_uniform_planes16", "_impulse_fix_elements",
                 "_impulse_fix_gray", "_impulse_exact", "_fast_cuts", "_impulse_pick",
                 "_luma", "_splitmix"):
        monkeypatch.setattr(noise, name, getattr(noise, name).py_func)
    t1, f1, t2, f2 = impulse_cuts(0.17)
    with np.errstate(over="ignore"):
        for img, fn, want in cases:
            out = fn(img, np.empty_like(img), np.uint64(5), t1, np.uint64(f1), t2, np.uint64(f2))
            assert np.array_equal(out, want)


# ---------------------------------------------------------------------------------------------
# The law
# ---------------------------------------------------------------------------------------------

def chi2_ok(observed, expected, ddof=0):
    observed = np.asarray(observed, float)
    expected = np.asarray(expected, float)
    stat = ((observed - expected) ** 2 / expected).sum()
    return stat < stats.chi2.ppf(1 - ALPHA, observed.size - 1 - ddof), stat


@pytest.mark.parametrize("amount", AMOUNTS)
@pytest.mark.parametrize("channels", [3, 1])
def test_rates_and_split(amount, channels):
    """Pepper / salt / unchanged counts over 4 images of 224 x 224 (x 3 virtual channels for
    gray): multinomial (a/2, a/2, 1-a) for RGB; for gray the exact law of the Pillow luma of
    three such draws (27 channel patterns enumerated here)."""
    v = 100
    img = np.full((224, 224, channels), v, np.uint8)
    outs = np.concatenate([impulse(img, amount, k).ravel() for k in range(4)])
    if channels == 3:
        obs = [(outs == 0).sum(), (outs == 255).sum(), (outs == v).sum()]
        assert sum(obs) == outs.size
        ok, stat = chi2_ok(obs, np.array([amount / 2, amount / 2, 1 - amount]) * outs.size)
    else:
        law = np.zeros(256)
        probs = {0: amount / 2, 255: amount / 2, v: 1 - amount}
        for r, pr in probs.items():
            for g, pg in probs.items():
                for b, pb in probs.items():
                    law[(19595 * r + 38470 * g + 7471 * b + 0x8000) >> 16] += pr * pg * pb
        support = law > 0
        counts = np.bincount(outs, minlength=256)
        assert counts[~support].sum() == 0
        ok, stat = chi2_ok(counts[support], law[support] * outs.size)
    assert ok, stat


@pytest.mark.parametrize("amount", [0.01, 0.17])
def test_hits_per_position_homogeneous(amount):
    """Each of the 768 elements of a 16 x 16 x 3 image is hit Binomial(K, a) times over K keys,
    independently of its position (block boundaries, word quarters, tail handling)."""
    k = 600
    img = np.full((16, 16, 3), 100, np.uint8)
    hits = sum((impulse(img, amount, key) != 100).astype(int) for key in range(k)).ravel()
    var = k * amount * (1 - amount)
    stat = ((hits - k * amount) ** 2 / var).sum()
    assert stat < stats.chi2.ppf(1 - ALPHA, hits.size), stat


@pytest.mark.parametrize("d", [1, 2, 3, 4, 5, 8, 512])
def test_independence_of_neighbours(d):
    """Outcomes (pepper, salt, unchanged) of elements j and j + d are independent: 3 x 3
    contingency chi-square on disjoint pairs (same or neighbouring 16-bit quarters, SplitMix64
    numbers, gray pixel channels, blocks)."""
    img = np.full((224, 224, 3), 100, np.uint8)
    out = np.concatenate([impulse(img, 0.17, key).ravel() for key in range(3)])
    code = np.select([out == 0, out == 255], [0, 1], 2)
    j = np.arange(code.size - d)
    j = j[(j // d) % 2 == 0]  # disjoint pairs
    table = np.zeros((3, 3))
    np.add.at(table, (code[j], code[j + d]), 1)
    assert stats.chi2_contingency(table, correction=False).pvalue > ALPHA


@pytest.mark.parametrize("amount", [0.01, 0.09, 0.17])
def test_gaps_are_geometric(amount):
    """Runs of unchanged elements between hits follow Geometric(amount) (P(gap = g) =
    (1 - a)^g a), the signature of i.i.d. Bernoulli(amount) flips along the stream."""
    img = np.full((224, 224, 3), 100, np.uint8)
    gaps = np.concatenate([np.diff(np.flatnonzero(impulse(img, amount, k).ravel() != 100)) - 1
                           for k in range(6)])
    g_max = int(np.log(5 / (gaps.size * amount)) / np.log(1 - amount))  # expected >= 5 below
    pmf = (1 - amount) ** np.arange(g_max) * amount
    obs = np.append(np.bincount(np.minimum(gaps, g_max), minlength=g_max + 1)[:g_max],
                    (gaps >= g_max).sum())
    exp = np.append(pmf, (1 - amount) ** g_max) * gaps.size
    ok, stat = chi2_ok(obs, exp)
    assert ok, stat


# ---------------------------------------------------------------------------------------------
# Contract and edge cases
# ---------------------------------------------------------------------------------------------

def test_deterministic_and_input_untouched():
    img = np.random.default_rng(3).integers(0, 256, (40, 30, 3), dtype=np.uint8)
    img.flags.writeable = False
    keep = img.copy()
    a, b = impulse(img, 0.09, 11), impulse(img, 0.09, 11)
    assert np.array_equal(a, b) and a is not img and not np.shares_memory(a, img)
    assert not np.array_equal(a, impulse(img, 0.09, 12))
    assert np.array_equal(img, keep)
    gray = np.ascontiguousarray(img[..., :1])
    assert np.array_equal(impulse(gray, 0.09, 11), impulse(gray, 0.09, 11))


def test_amount_zero_and_one():
    img = np.random.default_rng(4).integers(1, 255, (50, 61, 3), dtype=np.uint8)
    assert np.array_equal(impulse(img, 0.0, 1), img)
    assert np.array_equal(impulse(img[..., :1].copy(), 0.0, 1), img[..., :1])
    full = impulse(img, 1.0, 1)
    assert np.isin(full, [0, 255]).all()
    assert abs((full == 255).mean() - 0.5) < 5 * 0.5 / np.sqrt(full.size)
    combos = {(19595 * r + 38470 * g + 7471 * b + 0x8000) >> 16
              for r in (0, 255) for g in (0, 255) for b in (0, 255)}
    assert set(np.unique(impulse(img[..., :1].copy(), 1.0, 1))) <= combos


def _mix64(x):
    """splitmix64's finaliser on Python ints (the documented image-key rule, test_api)."""
    m = (1 << 64) - 1
    z = (x + GAMMA) & m
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & m
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & m
    return z ^ (z >> 31)


def test_kind_kernel_and_public_api_small_non_square():
    import zlib

    rng = np.random.default_rng(5)
    img = rng.integers(0, 256, (9, 8, 3), dtype=np.uint8)
    want, _ = oracle_elements(img.ravel(), 0.3, 77)
    assert np.array_equal(IMPULSE_NOISE.kernel(img, param=0.3, key=77), want.reshape(img.shape))
    assert np.array_equal(apply_law(img, "impulse", 0.3, 77), want.reshape(img.shape))
    # Functional layer, 2-D gray input: key = SeedSequence(seed).generate_state(1) (documented
    # in rng.key_from_seed), noise on the L -> RGB image, back to L with Pillow.
    gray = rng.integers(0, 256, (8, 13), dtype=np.uint8)
    key = int(np.random.SeedSequence(3).generate_state(1, np.uint64)[0])
    noisy, _ = oracle_elements(np.repeat(gray[..., None], 3, axis=2).ravel(), 0.2, key)
    out = mf.functional.impulse_noise(gray, 0.2, seed=3)
    assert out.shape == gray.shape and out.dtype == np.uint8
    assert np.array_equal(out, pillow_gray(noisy.reshape(8, 13, 3))[..., 0])
    # Public API: dermamnist level 5 is amount 0.17 (spec table: .01, .03, .06, .09, .17); the
    # key of image 4 is splitmix64(base ^ splitmix64(4)), base from the SeedSequence rule.
    rgb = rng.integers(0, 256, (28, 28, 3), dtype=np.uint8)
    base = int(np.random.SeedSequence(0, spawn_key=(zlib.crc32(b"dermamnist"),
                                                    zlib.crc32(b"impulse_noise"), 5))
               .generate_state(1, np.uint64)[0])
    want, _ = oracle_elements(rgb.ravel(), 0.17, _mix64(base ^ _mix64(4)))
    c = mf.corrupt(rgb, "impulse_noise", 5, dataset="dermamnist", seed=0, index=4)
    assert np.array_equal(c, want.reshape(rgb.shape))
