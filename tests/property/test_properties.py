"""Hypothesis property tests over sizes 8..256, 1 or 3 channels, non-square shapes."""
import numpy as np
import pytest
from hypothesis import assume, given, note
from hypothesis import strategies as st

import medmnistc_fast as mf
from medmnistc_fast import registry
from medmnistc_fast.corruptions import kind_of
from medmnistc_fast.corruptions._spec import Context
from tests.strategies import dataset_corruption, images, pathology_corruption, seeds, severities

RANDOM = {"gaussian_noise", "speckle_noise", "impulse_noise", "shot_noise", "motion_blur",
          "stain_deposit", "bubble", "characters"}

#: Where the reference's own tables make the degradation not grow with the level.
#: black_corner: dermamnist's multipliers are 1.10, 1.05, 1.00, 0.90, 0.95, so level 5 keeps a
#: larger disk than level 4 (spec/medmnistc.md, quirks kept).
#: octmnist defocus_blur: the table's anti-alias sigmas alternate (0.6, 0.5, 0.1, 0.5, 0.1) while
#: the radius grows by 0.5 px, so the reference itself is not monotone on some images at 224 px
#: (level 3 < level 2), and below 224 px, where the radius growth is sub-pixel, the alternating
#: sigma dominates.
#: pixelate: the reference's BOX down-and-up resize changes an image less when the reduced side
#: divides the original exactly (0.5 -> clean 2 x 2 blocks) than at a larger non-integer ratio
#: (e.g. bloodmnist at 28 px: 28 -> 16 -> 28 changes more than 28 -> 14 -> 28).
#: jpeg_compression: quantisation at qualities 7 -> 5 does not always change an image more
#: (octmnist levels 4 -> 5 at 224 px on real CT content).
_ALL = {(1, 2), (2, 3), (3, 4), (4, 5)}
NON_MONOTONE = {("dermamnist", "black_corner"): {(4, 5)}, ("octmnist", "defocus_blur"): _ALL}
NON_MONOTONE.update({(d, c): _ALL for d in registry.DATASETS
                     for c in ("pixelate", "jpeg_compression")})


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


def _changes(img, dataset, corruption, level):
    """Mean absolute change from the clean image: one value per draw (one for deterministic)."""
    if corruption == "motion_blur":
        # Its only randomness is the angle: use a fixed grid of angles in [-45, 45] instead of
        # seeds (levels 2 and 3 differ by a few percent in expectation). The grid avoids the
        # measure-zero angles (0, +-30, +-45 degrees) where ImageMagick's tap offsets sit on
        # exact half-integers and flip with the tap count. The registry's own sampled values
        # with the angle replaced: below 224 px they are the shrunk 224 px streak
        # (blur.motion_taps_scaled), which scaling radius and sigma does not give.
        kind = kind_of(dataset, corruption)
        param = mf.severity_table(dataset, corruption)[level - 1]
        values = kind.sample(param, Context(img.shape, 0, level))
        outs = [kind.kernel(img, **{**values, "angle": float(a)})
                for a in np.linspace(-44, 44, 12)]
        return np.array([np.mean([np.abs(o.astype(np.int16) - img).mean() for o in outs])])
    n = 40 if corruption in RANDOM else 1
    batch = np.repeat(img[None], n, axis=0)
    outs = mf.corrupt_batch(batch, corruption, level, dataset=dataset, seed=3)
    return np.abs(outs.astype(np.int16) - batch).reshape(n, -1).mean(axis=1)


@given(img=images(min_side=24, noise=False), dc=dataset_corruption())
def test_severity_monotone(img, dc):
    """Mean absolute change from the clean image does not decrease from level to level.

    Random corruptions are compared in expectation: the mean over 40 draws may fall by at most
    4.5 standard errors of the difference (motion blur: a fixed grid of angles). The
    reference's own exceptions are skipped here and asserted to be real below.
    """
    dataset, corruption = dc
    changes = [_changes(img, dataset, corruption, s) for s in range(1, 6)]
    note(f"mean changes {[float(c.mean()) for c in changes]}")
    exceptions = NON_MONOTONE.get((dataset, corruption), set())
    for s in range(1, 5):
        if (s, s + 1) in exceptions:
            continue
        lo, hi = changes[s - 1], changes[s]
        se = np.sqrt(lo.var() / len(lo) + hi.var() / len(hi))
        # 2 % slack: below 224 px two levels can scale to practically the same blur, and then
        # only the rounding of negligible extra taps differs (seen with the earlier motion rule,
        # radius and sigma scaled: retinamnist 1 -> 2 at -1.4 %; the shrunk streak measured
        # monotone without slack on 4 real images at 9 sizes 24..256 px).
        # Below one gray level of mean change the measure is the truncation floor, not the
        # blur: the reference truncates the filtered image, so a kernel summing to 1 - 6e-8
        # (float32) takes one level off about half the pixels and one summing to 1 + 1e-3 none
        # (seen at 25 x 25 px, dermamnist defocus 1 -> 2, radius 0.45 -> 0.56 px: mean change
        # 0.549 -> 0.531 while the kernel's centre tap fell from 0.998 to 0.944): 1/20 level.
        floor = 0.05 if lo.mean() < 1.0 else 0.0
        assert hi.mean() >= lo.mean() * 0.98 - 4.5 * se - floor - 1e-9, (
            s, lo.mean(), hi.mean(), se)


def _change(img, dataset, corruption, level):
    return np.abs(mf.corrupt(img, corruption, level, dataset=dataset).astype(int) - img).mean()


@pytest.mark.parametrize("img_source", ["rgb224", "gray224"])
def test_black_corner_exception_is_real(img_source, request):
    img = request.getfixturevalue(img_source)[0]
    assert _change(img, "dermamnist", "black_corner", 5) < _change(img, "dermamnist",
                                                                    "black_corner", 4)


@pytest.mark.parametrize("dataset, corruption, size, rgb, index, lower, higher", [
    ("octmnist", "jpeg_compression", 224, False, 2, 5, 4),
    ("bloodmnist", "pixelate", 28, True, 2, 2, 1),
])
def test_digital_exceptions_are_real(dataset, corruption, size, rgb, index, lower, higher):
    from medmnistc_fast.sample import sample_images

    img = sample_images(index + 1, size, rgb=rgb)[index]
    assert _change(img, dataset, corruption, lower) < _change(img, dataset, corruption, higher)


def test_octmnist_defocus_exception_is_real():
    """At 224 px (where we follow the reference within one gray level) the reference's
    level 3 changes a real gray image less than its level 2."""
    from medmnistc_fast.sample import sample_images

    img = sample_images(4, 224, rgb=False)[3]
    assert _change(img, "octmnist", "defocus_blur", 3) < _change(img, "octmnist",
                                                                  "defocus_blur", 2)


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


# The digital-pathology suite (spec/pathology.md): the same contract at any size >= 8, non-square,
# 1 or 3 channels; its only random corruption is motion_blur (the angle).

@given(img=images(), dc=pathology_corruption(), severity=severities, seed=seeds,
       index=st.integers(0, 10**9), start=st.integers(0, 1000))
def test_pathology_contract(img, dc, severity, seed, index, start):
    dataset, corruption = dc
    frozen = img.copy()
    frozen.setflags(write=False)
    # 2-D gray, or a non-contiguous read-only view with the same pixels.
    view = frozen[..., 0] if frozen.shape[2] == 1 else np.repeat(frozen, 2, axis=1)[:, ::2]
    view.setflags(write=False)
    out = mf.corrupt(view, corruption, severity, dataset=dataset, seed=seed, index=index)
    assert out.shape == view.shape and out.dtype == np.uint8 and out.flags.c_contiguous
    assert np.array_equal(frozen, img)
    again = mf.corrupt(view, corruption, severity, dataset=dataset, seed=seed, index=index)
    assert out.tobytes() == again.tobytes()
    batch = np.stack([img, np.roll(img, 3, axis=0)])
    outs = mf.corrupt_batch(batch, corruption, severity, dataset=dataset, seed=seed, start=start)
    for i in range(2):
        assert np.array_equal(outs[i], mf.corrupt(batch[i], corruption, severity, dataset=dataset,
                                                  seed=seed, index=start + i))
    if corruption != "motion_blur":
        other = mf.corrupt(view, corruption, severity, dataset=dataset, seed=seed + 1,
                           index=index + 1)
        assert np.array_equal(out, other)
