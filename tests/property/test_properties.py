"""Hypothesis property tests over sizes 8..256, 1 or 3 channels, non-square shapes."""
import numpy as np
import pytest
from hypothesis import assume, given, note
from hypothesis import strategies as st

import medmnistc_fast as mf
from medmnistc_fast import registry
from tests.strategies import dataset_corruption, images, seeds, severities

RANDOM = {"gaussian_noise", "speckle_noise", "impulse_noise", "shot_noise", "motion_blur",
          "stain_deposit", "bubble", "characters"}

#: Where the reference's own tables make the degradation not grow with the level.
#: black_corner: dermamnist's multipliers are 1.10, 1.05, 1.00, 0.90, 0.95, so level 5 keeps a
#: larger disk than level 4 (spec/medmnistc.md, quirks kept).
NON_MONOTONE = {("dermamnist", "black_corner"): {(4, 5)}}


@given(img=images(), dc=dataset_corruption(), severity=severities, seed=seeds,
       index=st.integers(0, 10**9))
def test_shape_dtype_range_untouched_deterministic(img, dc, severity, seed, index):
    dataset, corruption = dc
    frozen = img.copy()
    frozen.setflags(write=False)
    gray2d = frozen[..., 0] if frozen.shape[2] == 1 else frozen
    out = mf.corrupt(gray2d, corruption, severity, dataset=dataset, seed=seed, index=index)
    assert out.shape == gray2d.shape and out.dtype == np.uint8
    assert np.array_equal(frozen, img)
    again = mf.corrupt(gray2d, corruption, severity, dataset=dataset, seed=seed, index=index)
    assert out.tobytes() == again.tobytes()


@given(img=images(max_side=96), dc=dataset_corruption(), severity=severities, seed=seeds,
       start=st.integers(0, 1000), n=st.integers(1, 4))
def test_batch_equals_single(img, dc, severity, seed, start, n):
    dataset, corruption = dc
    batch = np.stack([np.roll(img, k, axis=1) for k in range(n)])
    out = mf.corrupt_batch(batch, corruption, severity, dataset=dataset, seed=seed, start=start,
                           num_threads=2)
    for i in range(n):
        single = mf.corrupt(batch[i], corruption, severity, dataset=dataset, seed=seed,
                            index=start + i)
        assert np.array_equal(out[i], single)


def _mean_change(img, dataset, corruption, level, keys):
    return np.mean([np.abs(mf.corrupt(img, corruption, level, dataset=dataset, seed=k)
                           .astype(np.int16) - img).mean() for k in keys])


@given(img=images(min_side=24, noise=False), dc=dataset_corruption())
def test_severity_monotone(img, dc):
    """Mean absolute change from the clean image does not decrease from level to level.

    Random corruptions are compared in expectation (mean over 6 seeds, with a tolerance of
    5 % of the change for sampling error); the reference's own exceptions are asserted to be
    exceptions.
    """
    dataset, corruption = dc
    keys = range(6) if corruption in RANDOM else range(1)
    changes = [_mean_change(img, dataset, corruption, s, keys) for s in range(1, 6)]
    note(f"changes {changes}")
    tol = 0.05 if corruption in RANDOM else 0.0
    exceptions = NON_MONOTONE.get((dataset, corruption), set())
    for s in range(1, 5):
        if (s, s + 1) in exceptions:
            continue
        assert changes[s] >= changes[s - 1] * (1 - tol) - 1e-9, (s, changes)


@pytest.mark.parametrize("img_source", ["rgb224", "gray224"])
def test_black_corner_exception_is_real(img_source, request):
    img = request.getfixturevalue(img_source)[0]
    c4 = np.abs(mf.corrupt(img, "black_corner", 4, dataset="dermamnist").astype(int) - img).mean()
    c5 = np.abs(mf.corrupt(img, "black_corner", 5, dataset="dermamnist").astype(int) - img).mean()
    assert c5 < c4


@given(img=images(), dc=dataset_corruption(), severity=severities)
def test_deterministic_corruptions_ignore_seed(img, dc, severity):
    dataset, corruption = dc
    assume(corruption not in RANDOM)
    a = mf.corrupt(img, corruption, severity, dataset=dataset, seed=1)
    b = mf.corrupt(img, corruption, severity, dataset=dataset, seed=2, index=7)
    assert np.array_equal(a, b)


def test_registry_covers_every_dataset():
    assert set(registry.DATASETS) == set(registry.TASKS)
    assert set(registry.TABLES) == set(registry.RGB) == set(registry.REFERENCE_SIZES)
