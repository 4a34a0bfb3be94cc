"""Training augmentation with the digital-pathology suites (``pathology96``, ``pathology224``).

Ranges are recomputed here from the registry tables; a table-entry parameter must give
``corrupt``'s bytes (all but marking, which lands at a random position); marking's boxes, its
random position and the draw laws are checked against their documented definitions.
"""
import math

import numpy as np
import pytest
from scipy import stats

import medmnistc_fast as mf
from medmnistc_fast import registry, rng
from medmnistc_fast.augment import BOX_GRID_POINTS, AugMedMNISTC, Op, param_range
from medmnistc_fast.corruptions import pathology as P

SUITES = {"pathology96": 96, "pathology224": 224}
FLOATS = ("brightness", "saturate", "hue", "bubble")


def _image(side, channels=3, seed=0):
    g = np.random.default_rng(seed)
    img = g.integers(40, 216, (side, side, channels), dtype=np.uint8)
    return img if channels == 3 else img[..., 0]


@pytest.mark.parametrize("suite", SUITES)
def test_choices_and_ranges_from_the_tables(suite):
    aug = AugMedMNISTC(suite, seed=0)
    assert aug.choices == tuple(mf.corruptions(suite)) + ("identity",)
    for c in mf.corruptions(suite):
        rows = registry.TABLES[suite][c]
        cols = list(zip(*rows)) if isinstance(rows[0], tuple) else [rows]
        assert param_range(suite, c) == tuple((min(col), max(col)) for col in cols), c
        assert param_range(suite, c, (2, 3)) == tuple(
            (min(col[1:3]), max(col[1:3])) for col in cols), c


@pytest.mark.parametrize("suite", SUITES)
def test_table_entry_equals_corrupt(suite):
    side = SUITES[suite]
    aug = AugMedMNISTC(suite, seed=0)
    for channels in (3, 1):
        x = _image(side, channels, seed=channels)
        for c in mf.corruptions(suite):
            if c == "marking":
                continue
            s = 4
            param = registry.TABLES[suite][c][s - 1]
            key = int(rng.image_keys(rng.base_key(11, suite, c, s), 5))
            got = aug.apply(x, [Op(c, param, key)])
            want = mf.corrupt(x, c, s, dataset=suite, seed=11, index=5)
            assert np.array_equal(got, want), (c, channels)


@pytest.mark.parametrize("suite", SUITES)
def test_marking_boxes_keep_the_table_proportions(suite):
    (wlo, whi), (hlo, hi) = param_range(suite, "marking")
    # The grid: side = lo + floor(j (hi - lo) / 16 + 1/2), one j for both sides.
    grid = [(wlo + math.floor((whi - wlo) * j / 16 + 0.5),
             hlo + math.floor((hi - hlo) * j / 16 + 0.5)) for j in range(17)]
    assert BOX_GRID_POINTS == 17 and grid[0] == (wlo, hlo) and grid[-1] == (whi, hi)
    aug = AugMedMNISTC(suite, corruptions=["marking"], identity=False, seed=3)
    boxes = [aug.draw(index=i)[0].param for i in range(3400)]
    counts = np.array([boxes.count(b) for b in grid])
    assert counts.sum() == len(boxes)  # nothing off the grid
    assert stats.chisquare(counts).pvalue > 1e-6, counts
    # A box off the grid (a table size between the grid points) is not one this transform draws.
    off = next(b for b in registry.TABLES[suite]["marking"] if b not in grid)
    with pytest.raises(ValueError, match="marking parameter"):
        aug.apply(_image(SUITES[suite]), [Op("marking", off, 1)])


@pytest.mark.parametrize("suite", SUITES)
def test_off_grid_marking_box_error_lists_the_grid(suite):
    # The ranges alone ((10, 54), (10, 57) at 96 px) do not say which boxes are accepted: the
    # table's level-3 box lies inside them and is refused. The message must name the allowed
    # boxes (the grid, derived here from the documented formula), nearest ones included.
    (wlo, whi), (hlo, hi) = param_range(suite, "marking")
    grid = [(wlo + math.floor((whi - wlo) * j / 16 + 0.5),
             hlo + math.floor((hi - hlo) * j / 16 + 0.5)) for j in range(17)]
    off = registry.TABLES[suite]["marking"][2]
    assert off not in grid and wlo <= off[0] <= whi and hlo <= off[1] <= hi
    aug = AugMedMNISTC(suite, corruptions=["marking"], seed=0)
    with pytest.raises(ValueError) as err:
        aug.apply(_image(SUITES[suite]), [Op("marking", off, 1)])
    msg = str(err.value)
    assert "ops[0].param" in msg and repr(off) in msg
    for box in grid:
        assert str(box) in msg, box
    # a grid box is accepted
    aug.apply(_image(SUITES[suite]), [Op("marking", grid[8], 1)])


@pytest.mark.parametrize("suite", SUITES)
def test_marking_lands_at_a_random_position(suite):
    side = SUITES[suite]
    x = np.full((side, side, 3), 230, np.uint8)
    aug = AugMedMNISTC(suite, corruptions=["marking"], identity=False, seed=1)
    corners = set()
    for i in range(60):
        (op,) = aug.draw(index=i)
        out = aug(x, index=i)
        w, h = op.param
        ink = np.argwhere((out != x).any(axis=2))
        mask, _ = P.blot(w, h)
        # The ink is the blot of the drawn box (the table's pixels at the suite's size: scale 1),
        # whole (it fits inside the image), at some corner inside the image.
        assert len(ink) == int(mask.sum())
        y0, x0 = ink.min(axis=0)
        rows, cols = np.nonzero(mask)
        corner = (int(y0 - rows.min()), int(x0 - cols.min()))
        assert 0 <= corner[0] <= side - h and 0 <= corner[1] <= side - w
        corners.add(corner)
    assert len(corners) > 50  # not the benchmark's fixed corner


@pytest.mark.parametrize("suite", SUITES)
def test_float_draws_uniform(suite):
    for c in FLOATS:
        ((lo, hi),) = param_range(suite, c)
        aug = AugMedMNISTC(suite, corruptions=[c], identity=False, seed=7)
        v = np.array([aug.draw(index=i)[0].param for i in range(2000)])
        assert v.min() >= lo and v.max() < hi
        assert stats.kstest(v, stats.uniform(lo, hi - lo).cdf).pvalue > 1e-6, c


@pytest.mark.parametrize("suite", SUITES)
@pytest.mark.parametrize("side", [8, 28, 96, 160])
def test_every_corruption_runs_at_any_size(suite, side):
    aug = AugMedMNISTC(suite, identity=False, seed=2)
    for channels in (3, 1):
        x = _image(side, channels, seed=side)
        for i in range(40):
            out = aug(x, index=i)
            assert out.shape == x.shape and out.dtype == np.uint8
    batch = np.stack([_image(side, 3, seed=k) for k in range(6)])
    np.testing.assert_array_equal(aug.batch(batch, start=10),
                                  np.stack([aug(b, index=10 + k) for k, b in enumerate(batch)]))


def test_pathology_folds():
    aug = AugMedMNISTC("pathology96", folds="color", identity=False, seed=0)
    assert aug.choices == ("brightness", "saturate", "hue")
    aug = AugMedMNISTC("pathology224", folds=["task-specific", "blur"], identity=False, seed=0)
    assert aug.choices == ("defocus_blur", "motion_blur", "marking", "bubble")


def test_unknown_suite_named():
    with pytest.raises(ValueError, match="pathology96"):
        AugMedMNISTC("pathology128")


def test_fold_of_every_name():
    # One mapping for the augmentation's folds and the CLI's fold column: every corruption of
    # every dataset and suite has exactly one fold (the pathology suites' own names by
    # PATHOLOGY_FOLDS, the rest by FOLDS).
    for d in list(mf.DATASETS) + list(mf.PATHOLOGY_SUITES):
        for c in mf.corruptions(d):
            homes = [f for f, names in registry.FOLDS.items() if c in names]
            if not homes:
                homes = [f for f, names in registry.PATHOLOGY_FOLDS.items() if c in names]
            assert len(homes) == 1 and registry.fold_of(d, c) == homes[0], (d, c)
    assert registry.fold_of("pathmnist", "hue") is None  # not a MedMNIST-C name
