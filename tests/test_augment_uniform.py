"""Augmentation draws follow the documented laws, not only the documented bounds.

tests/test_augment.py checks that every drawn parameter lies between the smallest and largest
table value and that both halves of the range occur. A skewed law (a triangular draw, a
reversed ``uniform(first, last)`` clipped to the range, an integer draw that drops an end) would
pass that. Here, for every (dataset, corruption) pair and for a restricted ``levels`` range:

- float components: Kolmogorov-Smirnov against U[lo, hi), lo and hi computed here from the
  registry table (not from :func:`param_range`);
- int / odd components: chi-square against the uniform law on the (odd) integers of [lo, hi];
- noise parameters: chi-square against the uniform law on the 17-point grid of [lo, hi];
- zoom_blur: the step is U[lo, hi) of the levels' steps, the zooms are 1, 1 + step, ...

2000 keyed draws per pair; a test fails below p = 1e-6 (about 250 tests, so a false alarm has
probability about 2.5e-4; a triangular law gives a KS distance of 0.125, p about 1e-27).
"""
import numpy as np
import pytest
from scipy import stats

import medmnistc_fast as mf
from medmnistc_fast import registry
from medmnistc_fast.augment import AUG_INK_SIDE, NOISE_GRID_POINTS, AugMedMNISTC

N_DRAWS = 2000
P_MIN = 1e-6
NOISES = ("gaussian_noise", "speckle_noise", "impulse_noise", "shot_noise")
#: Component kinds, written from the augment module docstring's table.
INT_COMPONENTS = {"jpeg_compression": ("int",), "gaussian_blur": ("odd",),
                  "stain_deposit": ("int",), "bubble": ("int", "int"),
                  "characters": ("int", "int", "float")}
CASES = [(d, c, levels) for d in mf.DATASETS for c in mf.corruptions(d)
         for levels in ((1, 5), (2, 4))]


def _columns(corruption, entries):
    """Table entries -> list of per-component value lists (zoom_blur: largest zoom, step)."""
    if corruption == "zoom_blur":
        rows = [(max(z), z[1] - z[0]) for z in entries]
    else:
        rows = [z if isinstance(z, tuple) else (z,) for z in entries]
    return [list(col) for col in zip(*rows)]


@pytest.mark.parametrize("dataset,corruption,levels", CASES)
def test_draws_follow_the_documented_law(dataset, corruption, levels):
    entries = registry.TABLES[dataset][corruption][levels[0] - 1:levels[1]]
    cols = _columns(corruption, entries)
    aug = AugMedMNISTC(dataset, corruptions=[corruption], identity=False, levels=levels,
                       seed=20261201)
    params = [aug.draw(index=i)[0].param for i in range(N_DRAWS)]

    if corruption == "zoom_blur":
        lo, hi = min(cols[1]), max(cols[1])
        steps = np.array([p[1] - p[0] for p in params])
        for p in params:
            assert p[0] == 1.0
            np.testing.assert_allclose(np.diff(p), p[1] - p[0], rtol=1e-9)
            assert p[-1] <= max(cols[0]) + 1e-12
        assert steps.min() >= lo and steps.max() < hi
        assert stats.kstest(steps, stats.uniform(lo, hi - lo).cdf).pvalue > P_MIN
        return
    if corruption == "stain_deposit":
        assert {p[1] for p in params} == {AUG_INK_SIDE}
        params = [p[0] for p in params]
    kinds = INT_COMPONENTS.get(corruption, ("float",) * len(cols))
    values = np.array([p if isinstance(p, tuple) else (p,) for p in params], dtype=np.float64)
    assert values.shape == (N_DRAWS, len(cols))
    for j, (kind, col) in enumerate(zip(kinds, cols)):
        lo, hi = min(col), max(col)
        v = values[:, j]
        if corruption in NOISES:
            grid = lo + (hi - lo) * np.arange(NOISE_GRID_POINTS) / (NOISE_GRID_POINTS - 1)
            idx = np.abs(v[:, None] - grid[None, :]).argmin(axis=1)
            np.testing.assert_allclose(v, grid[idx], rtol=1e-12)
            counts = np.bincount(idx, minlength=NOISE_GRID_POINTS)
            assert stats.chisquare(counts).pvalue > P_MIN, counts
        elif kind == "float":
            if hi == lo:
                assert np.all(v == lo)
                continue
            assert v.min() >= lo and v.max() < hi, (j, v.min(), v.max(), lo, hi)
            assert stats.kstest(v, stats.uniform(lo, hi - lo).cdf).pvalue > P_MIN, j
        else:
            support = np.arange(int(lo), int(hi) + 1)
            if kind == "odd":
                support = support[support % 2 == 1]
            assert all(type(p[j] if isinstance(p, tuple) else p) is int for p in params)
            counts = np.array([(v == k).sum() for k in support])
            assert counts.sum() == N_DRAWS, (j, sorted(set(v) - set(support)))
            if support.size > 1:
                assert stats.chisquare(counts).pvalue > P_MIN, dict(zip(support, counts))
