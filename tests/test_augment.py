"""Training-time augmentation (issue 4): draws, types, randomness, DataLoader behaviour."""
import pickle
import random

import numpy as np
import pytest
from PIL import Image

import medmnistc_fast as mf
from medmnistc_fast import registry, rng
from medmnistc_fast.augment import (AUG_INK_SIDE, IDENTITY, NOISE_GRID_POINTS, AugMedMNISTC,
                                    AugmentedDataset, EpochSampler, Op, param_range)
from medmnistc_fast.corruptions.artifacts import stain_param

ALL_PAIRS = [(d, c) for d in mf.DATASETS for c in mf.corruptions(d)]
NOISES = ("gaussian_noise", "speckle_noise", "impulse_noise", "shot_noise")


def _image(size, rgb, seed=0, width=None):
    g = np.random.default_rng(seed)
    shape = (size, width or size) + ((3,) if rgb else ())
    # Smooth content plus texture, so that every corruption visibly changes it.
    yy, xx = np.mgrid[0:shape[0], 0:shape[1]]
    base = 128 + 60 * np.sin(xx / 5.0) * np.cos(yy / 7.0)
    if rgb:
        base = base[..., None] + np.array([0, 30, -30])
    return np.clip(base + g.normal(0, 20, shape), 0, 255).astype(np.uint8)


def _only(dataset, corruption, **kw):
    return AugMedMNISTC(dataset, corruptions=[corruption], identity=False, **kw)


# ---------------------------------------------------------------------------------------------
# Parameter draws
# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("dataset,corruption", ALL_PAIRS)
def test_draws_within_table_range_and_valid(dataset, corruption):
    table = registry.TABLES[dataset][corruption]
    aug = _only(dataset, corruption, seed=1)
    params = [aug.draw()[0].param for _ in range(300)]
    (lo, hi), *_ = param_range(dataset, corruption)
    if corruption == "zoom_blur":
        tops = [max(z) for z in table]
        steps = [z[1] - z[0] for z in table]
        for zs in params:
            assert zs[0] == 1.0 and all(b > a for a, b in zip(zs, zs[1:]))
            assert min(tops) - max(steps) - 1e-9 <= max(zs) <= max(tops) + 1e-9
            assert min(steps) - 1e-12 <= zs[1] - zs[0] <= max(steps) + 1e-12
        return
    if corruption == "stain_deposit":
        assert all(p[1] == AUG_INK_SIDE for p in params)
        params = [p[0] for p in params]
    comps = np.array([p if isinstance(p, tuple) else (p,) for p in params], dtype=float)
    flat = [np.ravel(t) for t in table]
    for j in range(comps.shape[1]):
        col_lo = min(float(np.ravel(t if isinstance(t, tuple) else (t,))[j]) for t in table)
        col_hi = max(float(np.ravel(t if isinstance(t, tuple) else (t,))[j]) for t in table)
        assert comps[:, j].min() >= col_lo and comps[:, j].max() <= col_hi, j
        # Both halves of the range are used (a reversed uniform(first, last) would still pass
        # the bounds; this checks the spread too).
        mid = (col_lo + col_hi) / 2
        if col_hi > col_lo:
            assert (comps[:, j] < mid).any() and (comps[:, j] > mid).any()
    assert len(flat) == registry.N_SEVERITIES
    # Integer parameters stay ints, and hit both ends of the inclusive range.
    int_components = {"jpeg_compression": [0], "gaussian_blur": [0], "stain_deposit": [0],
                      "bubble": [0, 1], "characters": [0, 1]}.get(corruption, [])
    for j in int_components:
        vals = [p[j] if isinstance(p, tuple) else p for p in params]
        assert all(type(v) is int for v in vals)
        if corruption != "gaussian_blur":
            assert min(vals) == int(comps[:, j].min()) and max(vals) == int(comps[:, j].max())
    if corruption == "gaussian_blur":
        assert all(v % 2 == 1 for v in params)
        odd = range(min(table), max(table) + 1, 2)
        assert set(params) == set(odd)
    if corruption in NOISES:
        grid = lo + (hi - lo) * np.arange(NOISE_GRID_POINTS) / (NOISE_GRID_POINTS - 1)
        assert all(np.isclose(grid, p).any() for p in params)


def test_odd_draws_cover_exactly_the_odd_values_between_the_bounds():
    # Rule "odd": uniform over the odd integers of [lo, hi], also when a bound is even (the
    # tables' gaussian_blur bounds are odd, so this is the only place the rounding-up of an even
    # lower bound shows): [4, 10] -> {5, 7, 9}; [3, 3] -> {3}; [2, 7] -> {3, 5, 7}.
    from medmnistc_fast.augment import _draw_component

    g = np.random.default_rng(0)
    for (lo, hi), want in (((4, 10), {5, 7, 9}), ((3, 3), {3}), ((2, 7), {3, 5, 7})):
        got = [_draw_component(g, "odd", lo, hi) for _ in range(200)]
        assert all(type(v) is int for v in got)
        assert set(got) == want, (lo, hi)


def test_descending_tables_fixed():
    # Reference: uniform(first, last) with first > last (e.g. JPEG quality 50 -> 7).
    assert param_range("pathmnist", "jpeg_compression") == ((7, 50),)
    assert param_range("dermamnist", "shot_noise") == ((5, 60),)
    assert param_range("pathmnist", "pixelate") == ((0.25, 0.8),)
    # Non-monotone tables use the smallest and largest entries, not the first and last.
    assert param_range("dermamnist", "black_corner") == ((0.9, 1.1),)
    assert param_range("octmnist", "defocus_blur") == ((0.5, 2.5), (0.1, 0.6))
    assert param_range("pathmnist", "jpeg_compression", levels=(2, 3)) == ((15, 30),)


def test_levels_restrict_the_draws():
    aug = _only("pathmnist", "brightness_up", levels=(5, 5), seed=0)
    assert {op.param for _ in range(20) for op in aug.draw()} == {1.25}


def test_choice_frequencies_uniform():
    aug = AugMedMNISTC("octmnist", seed=3)
    names = [aug.draw()[0].corruption for _ in range(7000)]
    assert set(names) == set(mf.corruptions("octmnist")) | {IDENTITY}
    counts = np.array([names.count(c) for c in aug.choices])
    assert np.all(np.abs(counts - 1000) < 150)


def test_selection_weights_folds_nops():
    aug = AugMedMNISTC("chestmnist", folds=["noise"], identity=False, seed=0)
    assert aug.choices == NOISES
    aug = AugMedMNISTC("chestmnist", corruptions=["pixelate", "gaussian_noise"], folds="noise")
    assert aug.choices == ("gaussian_noise", IDENTITY)
    # A 1-D array of names selects like a list (reference order kept).
    aug = AugMedMNISTC("chestmnist", corruptions=np.array(["gaussian_noise", "pixelate"]))
    assert aug.choices == ("pixelate", "gaussian_noise", IDENTITY)
    aug = AugMedMNISTC("chestmnist", weights={"identity": 0, "pixelate": 0}, seed=0)
    names = {aug.draw()[0].corruption for _ in range(500)}
    assert IDENTITY not in names and "pixelate" not in names
    only_id = AugMedMNISTC("chestmnist", weights={c: 0 for c in mf.corruptions("chestmnist")})
    x = _image(28, False)
    assert np.array_equal(only_id(x), x)
    aug = AugMedMNISTC("pathmnist", n_ops=3, seed=5)
    ops = aug.draw()
    assert len(ops) == 3
    # apply == sequential application of the single operations
    seq = x3 = _image(28, True)
    for op in ops:
        seq = aug.apply(seq, [op])
    assert np.array_equal(aug.apply(x3, ops), seq)


def test_n_ops_choices_are_independent():
    # Each of the n_ops operations picks its choice independently (uniform over the 12 choices of
    # pathmnist: 11 corruptions + identity): the two picks agree with probability 1/12 and every
    # ordered pair occurs. Under a shared uniform they would always agree. Seeded: deterministic.
    aug = AugMedMNISTC("pathmnist", n_ops=2, seed=4)
    k = len(aug.choices)
    assert k == 12
    pairs = [tuple(op.corruption for op in aug.draw()) for _ in range(6000)]
    same = sum(a == b for a, b in pairs) / len(pairs)
    assert abs(same - 1 / k) < 0.03  # binomial sd about 0.0036
    assert len(set(pairs)) == k * k
    for j in range(2):
        counts = np.array([sum(p[j] == c for p in pairs) for c in aug.choices])
        assert np.all(np.abs(counts - 500) < 110)


# ---------------------------------------------------------------------------------------------
# Faithfulness: a drawn parameter equal to a table entry is the benchmark's corruption
# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("size", [28, 224])
@pytest.mark.parametrize("dataset", mf.DATASETS)
def test_table_entry_equals_corrupt(dataset, size):
    x = _image(size, registry.RGB[dataset], seed=size)
    aug = AugMedMNISTC(dataset, seed=0)
    for corruption in mf.corruptions(dataset):
        s = 4
        param = registry.TABLES[dataset][corruption][s - 1]
        if corruption == "stain_deposit":
            param = stain_param(param, s)
        key = int(rng.image_keys(rng.base_key(11, dataset, corruption, s), 5))
        got = aug.apply(x, [Op(corruption, param, key)])
        want = mf.corrupt(x, corruption, s, dataset=dataset, seed=11, index=5)
        assert np.array_equal(got, want), corruption


# ---------------------------------------------------------------------------------------------
# Types, shapes, dtypes
# ---------------------------------------------------------------------------------------------

def _as(kind, x):
    if kind == "numpy":
        return x
    if kind == "numpy_float":
        return x.astype(np.float32) / 255
    if kind == "pil":
        return Image.fromarray(x)
    torch = pytest.importorskip("torch")
    hwc = np.ascontiguousarray(x if x.ndim == 3 else x[..., None])
    chw = torch.from_numpy(hwc).permute(2, 0, 1)
    return chw if kind == "tensor" else chw.float() / 255


def _check_same_type(out, inp):
    assert type(out) is type(inp)
    if isinstance(inp, Image.Image):
        assert out.mode == inp.mode and out.size == inp.size
    else:
        assert tuple(out.shape) == tuple(inp.shape) and out.dtype == inp.dtype
    if isinstance(inp, np.ndarray) and inp.dtype.kind == "f":
        assert out.min() >= 0 and out.max() <= 1


def test_float_images_quantised_half_up():
    # Float input is quantised as floor(x * 255 + 0.5) (round to nearest) before the op: with only
    # identity enabled the output is that level / 255. x = (k + f) / 255 for f = .3, .7 gives
    # levels k and k + 1 (truncation would give k for both).
    aug = AugMedMNISTC("chestmnist", weights={c: 0 for c in mf.corruptions("chestmnist")}, seed=0)
    k = np.arange(0, 255, dtype=np.float64).reshape(15, 17)
    for f, shift in ((0.3, 0), (0.7, 1)):
        x = (k + f) / 255
        np.testing.assert_allclose(aug(x), (k + shift) / 255, rtol=0, atol=1e-12)
        torch = pytest.importorskip("torch")
        t = aug(torch.from_numpy(x)[None])
        np.testing.assert_allclose(t.numpy()[0], (k + shift) / 255, rtol=0, atol=1e-12)
    assert aug(np.ones((8, 8))).tolist() == np.ones((8, 8)).tolist()


@pytest.mark.parametrize("kind", ["numpy", "numpy_float", "pil", "tensor", "tensor_float"])
@pytest.mark.parametrize("rgb", [False, True])
@pytest.mark.parametrize("size", [28, 224])
def test_round_trip_types(kind, rgb, size):
    dataset = "dermamnist" if rgb else "chestmnist"
    x = _image(size, rgb)
    inp = _as(kind, x)
    before = np.array(inp) if not kind.startswith("tensor") else inp.clone()
    aug = AugMedMNISTC(dataset, n_ops=2, seed=size)
    changed = False
    for _ in range(6):
        out = aug(inp)
        _check_same_type(out, inp)
        assert out is not inp
        changed |= not np.array_equal(np.asarray(out), np.asarray(inp))
    assert changed
    after = np.array(inp) if not kind.startswith("tensor") else inp
    assert (np.array_equal(before, after) if not kind.startswith("tensor")
            else bool((before == after).all()))


def test_all_types_agree(rgb224):
    """The same draw gives the same pixels whatever the container."""
    x = rgb224[0][:64, :48]  # non-square
    aug = AugMedMNISTC("pathmnist", n_ops=2, seed=0)
    for i in range(8):
        ref = aug(x, index=i)
        assert np.array_equal(np.asarray(aug(Image.fromarray(x), index=i)), ref)
        f = aug(x.astype(np.float64) / 255, index=i)
        assert np.array_equal(np.floor(f * 255 + 0.5).astype(np.uint8), ref)


@pytest.mark.parametrize("dataset, rgb", [("chestmnist", False), ("dermamnist", True)])
def test_pil_calls_draw_like_arrays(dataset, rgb):
    """One operation per call on a PIL image takes a shorter path (no Op tuples, no adapter);
    it must draw the same choices, parameters and keys as the array path, in stream and keyed
    mode, and leave the stream where the array path leaves it."""
    x = _image(40, rgb, seed=3, width=36)
    pil = Image.fromarray(x)
    a, b = AugMedMNISTC(dataset, seed=11), AugMedMNISTC(dataset, seed=11)
    seen = set()
    for i in range(120):  # 120 calls meet every choice, identity included, with near certainty
        got = np.asarray(a(pil))
        want = b(x)
        assert np.array_equal(got, want), i
        seen.add(bool(np.array_equal(want, x)))
        assert np.array_equal(np.asarray(a(pil, index=i, epoch=2)), b(x, index=i, epoch=2))
    assert seen == {True, False}  # identity and real corruptions were both drawn
    assert a.draw() == b.draw()
    assert np.array_equal(pil, x)  # the input image is untouched


def test_gray_shapes_kept(gray224):
    aug = AugMedMNISTC("organamnist", seed=0)
    x = gray224[0]
    assert aug(x).shape == (224, 224)
    assert aug(x[..., None]).shape == (224, 224, 1)
    assert aug(Image.fromarray(x)).mode == "L"


@pytest.mark.parametrize("size", [28, 224])
@pytest.mark.parametrize("dataset", ["pathmnist", "dermamnist", "chestmnist", "tissuemnist",
                                     "octmnist"])
def test_every_corruption_runs(dataset, size):
    x = _image(size, registry.RGB[dataset], width=size + 12)
    for c in mf.corruptions(dataset):
        aug = _only(dataset, c, seed=0)
        for _ in range(2):
            out = aug(x)
            assert out.shape == x.shape and out.dtype == np.uint8


def test_read_only_and_non_contiguous_inputs_not_modified():
    x = _image(64, True)
    ro = x.copy()
    ro.setflags(write=False)
    nc = np.asfortranarray(x)[:, ::-1]
    aug = AugMedMNISTC("pathmnist", seed=0)
    for i in range(10):
        assert aug(ro, index=i).shape == x.shape
        assert np.array_equal(aug(nc, index=i), aug(np.ascontiguousarray(nc), index=i))
    assert np.array_equal(ro, x)


# ---------------------------------------------------------------------------------------------
# Errors
# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("kwargs,exc,match", [
    (dict(dataset="nope"), ValueError, "valid datasets"),
    (dict(dataset=3), TypeError, "dataset must be a str"),
    (dict(dataset="pathmnist", corruptions=["gaussian_noise"]), ValueError, "valid corruptions"),
    (dict(dataset="pathmnist", corruptions="pixelate"), TypeError, "corruptions must be"),
    (dict(dataset="pathmnist", folds=["colour"]), ValueError, "valid folds"),
    (dict(dataset="pathmnist", weights={"bogus": 1}), ValueError, "valid choices"),
    (dict(dataset="pathmnist", identity=False, weights={"identity": 2}), ValueError,
     r"unknown choice .identity. \(identity=False leaves it out; valid choices"),
    (dict(dataset="pathmnist", weights={"identity": -1}), ValueError, ">= 0"),
    (dict(dataset="pathmnist", weights=[1, 2]), TypeError, "weights must be a mapping"),
    # a weight of the wrong type is a TypeError, like severity=True (it used to be ValueError)
    (dict(dataset="pathmnist", weights={"identity": True}), TypeError, r"weights\['identity'\]"),
    (dict(dataset="pathmnist", weights={"identity": np.True_}), TypeError, r"weights\['identity'\]"),
    (dict(dataset="pathmnist", weights={"identity": "2"}), TypeError, r"weights\['identity'\]"),
    (dict(dataset="pathmnist", weights={"identity": None}), TypeError, r"weights\['identity'\]"),
    (dict(dataset="pathmnist", n_ops=0), ValueError, "n_ops"),
    (dict(dataset="pathmnist", n_ops=1.5), TypeError, "n_ops"),
    (dict(dataset="pathmnist", levels=(0, 5)), ValueError, "levels"),
    (dict(dataset="pathmnist", levels=(4, 2)), ValueError, "levels"),
    (dict(dataset="pathmnist", levels=3), TypeError, "levels"),
    (dict(dataset="pathmnist", levels=np.array(3)), TypeError, "levels must be a pair"),
    (dict(dataset="pathmnist", levels=(1.0, 5)), TypeError, "levels must be a pair"),
    # a non-str fold raised "unhashable type: 'list'"
    (dict(dataset="pathmnist", folds=[["noise"]]), TypeError, "folds must hold fold names"),
    (dict(dataset="pathmnist", folds=[3]), TypeError, "folds must hold fold names"),
    (dict(dataset="pathmnist", corruptions=[3]), TypeError, "corruptions must hold corruption"),
    (dict(dataset="pathmnist", corruptions=[["pixelate"]]), TypeError, "corruptions must hold"),
    (dict(dataset="pathmnist", seed=-1), ValueError, "seed"),
    (dict(dataset="pathmnist", corruptions=[], identity=False), ValueError, "at least one"),
    (dict(dataset="pathmnist", corruptions=[]), ValueError, "at least one"),
    (dict(dataset="pathmnist", folds="noise"), ValueError, "select none of"),
    # an int beyond the float range used to escape as OverflowError
    (dict(dataset="pathmnist", weights={"identity": 10 ** 400}), ValueError,
     r"weights\['identity'\]"),
])
def test_constructor_errors(kwargs, exc, match):
    with pytest.raises(exc, match=match):
        AugMedMNISTC(**kwargs)


def test_levels_accept_numpy_pairs():
    # like levels=(1, 5): NumPy integers and a 1-D integer array (it was a TypeError)
    for levels in [np.array([2, 4]), (np.int64(2), np.uint8(4)), [2, 4]]:
        assert AugMedMNISTC("pathmnist", levels=levels).levels == (2, 4)
    assert param_range("pathmnist", "jpeg_compression", levels=np.array([2, 3])) == ((15, 30),)


def test_call_errors():
    aug = AugMedMNISTC("pathmnist", seed=0)
    x = _image(28, True)
    with pytest.raises(ValueError, match="mode 'L' or 'RGB'"):
        aug(Image.fromarray(x).convert("RGBA"))
    with pytest.raises(TypeError, match="uint8"):
        aug(x.astype(np.int16))
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        aug(x.astype(np.float32))
    with pytest.raises(ValueError, match="finite"):
        aug(np.full((28, 28), np.nan))
    # a 0-d float array is a shape error (it used to be "must be a numpy.ndarray ... got uint8")
    for bad in (np.array(0.5), np.array(0.5, np.float32)):
        with pytest.raises(ValueError, match=r"image must have shape .*got shape \(\)"):
            aug(bad)
    with pytest.raises(TypeError, match="PIL image"):
        aug([[1, 2], [3, 4]])
    with pytest.raises(ValueError, match="at least 8"):
        aug(x[:4, :4])
    with pytest.raises(ValueError, match="epoch is only used with index"):
        aug(x, epoch=1)
    with pytest.raises(ValueError, match="index"):
        aug(x, index=-1)
    with pytest.raises(ValueError, match="not among"):
        aug.apply(x, [Op("zoom_blur", (1.0, 1.1), 0)])
    with pytest.raises(TypeError, match="ndarray"):
        aug.batch(Image.fromarray(x))


@pytest.mark.parametrize("dtype", [np.uint8, np.float64])
@pytest.mark.parametrize("batched", [False, True])
def test_masked_arrays_are_rejected(dtype, batched):
    # A masked array is a TypeError, whatever its dtype: a float one used to go through the
    # [0, 1] conversion, which dropped its mask silently, and came back as a plain ndarray.
    aug = AugMedMNISTC("pathmnist", seed=0)
    x = _image(28, True)[None] if batched else _image(28, True)
    data = x if dtype == np.uint8 else x / 255.0
    masked = np.ma.masked_array(data, mask=x > 100)
    name = "images" if batched else "image"
    with pytest.raises(TypeError, match=f"{name} must be a plain numpy.ndarray, not a masked"):
        aug.batch(masked, start=0) if batched else aug(masked, index=0)


def test_apply_checks_hand_made_ops():
    """Ops built by hand used to reach the kernels unchecked: a JPEG quality of -5, a NaN
    noise sigma or a negative corner radius returned garbage images, a negative key a pybind
    error, a plain triple an AttributeError. Bounds here come from the severity tables."""
    aug = AugMedMNISTC("dermamnist", seed=0)
    x = _image(28, True)
    frozen = x.copy()
    tables = registry.TABLES["dermamnist"]
    bad = [
        Op("jpeg_compression", -5, 0),
        Op("jpeg_compression", max(tables["jpeg_compression"]) + 1, 0),
        Op("jpeg_compression", 20.0, 0),                 # the table's ints are ints
        Op("pixelate", max(tables["pixelate"]) * 2, 0),
        Op("pixelate", float("nan"), 0),
        Op("gaussian_noise", float("nan"), 1),
        Op("gaussian_noise", -0.1, 1),
        Op("shot_noise", 0.0, 1),
        Op("brightness_up", float("inf"), 0),
        Op("black_corner", -5.0, 0),
        Op("black_corner", True, 0),
        Op("defocus_blur", (1e9, 0.3), 0),
        Op("defocus_blur", 6.0, 0),                      # a pair is needed
        Op("zoom_blur", (0.5,), 0),
        Op("zoom_blur", (), 0),
        # dermamnist's zoom tables: largest zooms 1.11-1.30 (arange tops), steps 0.01-0.03
        Op("zoom_blur", (1.0, 1.1), 0),                  # step 0.1
        Op("zoom_blur", (1.0,), 0),                      # would need a step above 0.11
        Op("zoom_blur", (1.0, 1.02), 0),                 # stops short: the top is >= 1.11
        Op("zoom_blur", (1.0, 1.02, 1.05), 0),           # not evenly spaced
        Op("zoom_blur", (1.01, 1.03, 1.05), 0),          # does not start at 1
        Op("characters", (1, 7, -3.0), 5),
    ]
    for op in bad:
        with pytest.raises(ValueError, match=r"ops\[0\]\.param"):
            aug.apply(x, [op])
    for key, exc in ((-1, ValueError), (2**64, ValueError), (0.5, TypeError)):
        with pytest.raises(exc, match=r"ops\[0\]\.key"):
            aug.apply(x, [Op("gaussian_noise", tables["gaussian_noise"][0], key)])
    for op in (("pixelate", 0.5), "pixelate", None):
        with pytest.raises(TypeError, match=r"ops\[0\] must be an Op"):
            aug.apply(x, [op])
    # ops itself must be a sequence of ops: a bare Op (a 3-sequence), a str or None used to
    # fail on "ops[0]" with its first element, or with "'NoneType' object is not iterable".
    for ops in (Op("pixelate", tables["pixelate"][0], 0), "identity", None, 3):
        with pytest.raises(TypeError, match=r"ops must be a sequence of Op"):
            aug.apply(x, ops)
    with pytest.raises(TypeError, match=r"a single Op: pass \[op\]"):
        aug.apply(x, Op("pixelate", tables["pixelate"][0], 0))
    assert np.array_equal(aug.apply(x, ()), x)
    # an identity op is ("identity", None, 0), as draw() returns it; a shifted or hand-filled
    # triple used to pass silently
    assert np.array_equal(aug.apply(x, [Op("identity", None, 0)]), x)
    for op in (("identity", "garbage", "key"), ("identity", None, 5), ("identity", 3, 0),
               ("identity", None, 0.0)):
        with pytest.raises(ValueError, match=r"ops\[0\] is an identity op"):
            aug.apply(x, [op])
    assert np.array_equal(aug.apply(x, iter([Op("pixelate", tables["pixelate"][0], 0)])),
                          aug.apply(x, [Op("pixelate", tables["pixelate"][0], 0)]))
    assert np.array_equal(x, frozen)
    # A plain triple with a table value works and equals the Op form; every table entry of
    # every level is accepted (the draws bound them).
    triple = ("pixelate", tables["pixelate"][2], 0)
    assert np.array_equal(aug.apply(x, [triple]), aug.apply(x, [Op(*triple)]))
    for corruption in aug.choices[:-1]:
        for s, entry in enumerate(tables[corruption], start=1):
            param = stain_param(entry, s) if corruption == "stain_deposit" else entry
            aug.apply(x, [Op(corruption, param, 7)])
    # What draw() gives always passes, at every level range.
    for levels in ((1, 1), (2, 4), (5, 5)):
        aug = AugMedMNISTC("dermamnist", seed=1, levels=levels, n_ops=3)
        for _ in range(300):
            for i, op in enumerate(aug.draw()):
                aug._check_op(op, i)


def test_tensor_errors():
    torch = pytest.importorskip("torch")
    aug = AugMedMNISTC("pathmnist", seed=0)
    with pytest.raises(ValueError, match=r"\(C, H, W\)"):
        aug(torch.zeros(28, 28, 3, dtype=torch.uint8))
    with pytest.raises(TypeError, match="torch.uint8"):
        aug(torch.zeros(3, 28, 28, dtype=torch.int32))
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        aug(torch.full((3, 28, 28), 2.0))


def test_tensor_errors_layouts_devices_float8():
    # These failed inside torch (TypeError naming no argument, RuntimeError, or
    # NotImplementedError) instead of naming the argument and what it accepts.
    torch = pytest.importorskip("torch")
    aug = AugMedMNISTC("pathmnist", seed=0)
    dense = torch.zeros(3, 28, 28)
    with pytest.raises(TypeError, match=r"^image \(a torch tensor\) must be a dense \(strided\) "
                                        r"tensor; got layout torch.sparse_coo"):
        aug(dense.to_sparse())
    with pytest.raises(TypeError, match=r"^images \(a torch tensor\) must be a dense"):
        aug.batch(dense[None].to_sparse(), start=0)
    nested = torch.nested.nested_tensor([dense], layout=torch.jagged)
    with pytest.raises(TypeError, match=r"^image \(a torch tensor\) must be a dense.*nested"):
        aug(nested)
    for dtype in (torch.uint8, torch.float32):
        meta = torch.empty(3, 28, 28, dtype=dtype, device="meta")
        with pytest.raises(ValueError, match=r"^image \(a torch tensor\) must hold data.*'meta'"):
            aug(meta, index=0)
        with pytest.raises(ValueError, match=r"^images \(a torch tensor\) must hold data"):
            aug.batch(meta[None], start=0)
    for name in ("float8_e4m3fn", "float8_e5m2"):
        if hasattr(torch, name):
            f8 = dense.to(getattr(torch, name))
            with pytest.raises(TypeError, match=r"float16, bfloat16, float32, float64\) with "
                                                rf"values in \[0, 1\]; got torch.{name}$"):
                aug(f8, index=0)
    # the four floating dtypes still work, and give the uint8 result / 255
    x = torch.arange(3 * 28 * 28, dtype=torch.int64).remainder(256).to(torch.uint8)
    x = x.reshape(3, 28, 28)
    want = aug(x, index=4).to(torch.float64) / 255
    for dtype in (torch.float16, torch.bfloat16, torch.float32, torch.float64):
        got = aug(x.to(dtype) / 255, index=4)
        assert got.dtype == dtype
        assert torch.equal(got, want.to(dtype)), dtype


# ---------------------------------------------------------------------------------------------
# Randomness
# ---------------------------------------------------------------------------------------------

def test_stream_seeded_and_fresh():
    x = _image(28, True)
    a = [_only("pathmnist", "motion_blur", seed=4)(x) for _ in range(2)]
    assert np.array_equal(a[0], a[1])  # same seed, same first draw
    s1, s2 = _only("pathmnist", "bubble", seed=4), _only("pathmnist", "bubble", seed=4)
    seq1 = [s1(x) for _ in range(5)]
    seq2 = [s2(x) for _ in range(5)]
    assert all(np.array_equal(p, q) for p, q in zip(seq1, seq2))
    assert not all(np.array_equal(seq1[0], q) for q in seq1[1:])
    f1, f2 = _only("pathmnist", "bubble"), _only("pathmnist", "bubble")
    assert not np.array_equal(f1(x), f2(x))


def test_impulse_noise_mask_differs_per_call():
    # Reference bug: rng=np.random.default_rng(99999) on every call -> the same mask.
    aug = _only("chestmnist", "impulse_noise", seed=0, levels=(5, 5))
    x = np.full((64, 64), 128, np.uint8)
    m1, m2 = aug(x) != 128, aug(x) != 128
    assert m1.any() and not np.array_equal(m1, m2)


def test_keyed_mode_pure_function():
    x = _image(28, True)
    aug = AugMedMNISTC("dermamnist", n_ops=2, seed=9)
    a = [aug(x, index=i, epoch=1) for i in range(6)]
    aug(x)  # stream calls in between change nothing
    b = [aug(x, index=i, epoch=1) for i in reversed(range(6))][::-1]
    assert all(np.array_equal(p, q) for p, q in zip(a, b))
    other_epoch = [aug.draw(index=i, epoch=2) for i in range(6)]
    assert other_epoch != [aug.draw(index=i, epoch=1) for i in range(6)]
    clone = pickle.loads(pickle.dumps(aug))
    assert all(np.array_equal(clone(x, index=i, epoch=1), a[i]) for i in range(6))
    # seed=None: keyed mode still consistent within the object and its copies
    anon = AugMedMNISTC("dermamnist")
    copy = pickle.loads(pickle.dumps(anon))
    assert [anon.draw(index=i) for i in range(5)] == [copy.draw(index=i) for i in range(5)]


def test_keyed_mode_every_index_draws_its_own_ops():
    # Keyed draws are independent across indices: the 64-bit image keys of 500 indices (and of
    # the same indices in another epoch) are all distinct (a repeat has probability ~1e-14).
    aug = _only("pathmnist", "motion_blur", seed=3)
    keys = [aug.draw(index=i, epoch=0)[0].key for i in range(500)]
    keys += [aug.draw(index=i, epoch=1)[0].key for i in range(500)]
    assert len(set(keys)) == 1000
    params = [aug.draw(index=i)[0].param for i in range(500)]  # (radius, sigma) floats
    assert len(set(params)) == 500


def test_batch_matches_single_calls():
    X = np.stack([_image(32, True, seed=s) for s in range(7)])
    aug = AugMedMNISTC("pathmnist", n_ops=2, seed=2)
    out = aug.batch(X, start=10, epoch=3, num_threads=1)
    assert out.shape == X.shape and out.dtype == np.uint8
    for i in range(7):
        assert np.array_equal(out[i], aug(X[i], index=10 + i, epoch=3))
    assert np.array_equal(aug.batch(X, start=10, epoch=3, num_threads=3), out)
    assert np.array_equal(aug.batch(X[2:], start=12, epoch=3), out[2:])
    # stream mode: independent draws per image, reproducible from the seed
    s1 = AugMedMNISTC("pathmnist", seed=8, identity=False).batch(X)
    s2 = AugMedMNISTC("pathmnist", seed=8, identity=False).batch(X, num_threads=2)
    assert np.array_equal(s1, s2)
    # gray (N, H, W) and float
    G = np.stack([_image(28, False, seed=s) for s in range(3)])
    g = AugMedMNISTC("chestmnist", seed=1).batch(G.astype(np.float32) / 255, start=0)
    assert g.shape == G.shape and g.dtype == np.float32


def test_batch_of_one_image_names_the_transform():
    # batch() given one (H, W, C) image points to the transform's own call, not corrupt().
    aug = AugMedMNISTC("pathmnist", seed=2)
    with pytest.raises(ValueError, match=r"looks like one \(H, W, C\) image.*use the "
                                         r"transform itself \(aug\(image\)\)"):
        aug.batch(_image(32, True, seed=0))


def test_batch_tensor():
    torch = pytest.importorskip("torch")
    X = np.stack([_image(28, True, seed=s) for s in range(4)])
    T = torch.from_numpy(X).permute(0, 3, 1, 2)
    aug = AugMedMNISTC("pathmnist", seed=2)
    out = aug.batch(T, start=0)
    assert isinstance(out, torch.Tensor) and out.shape == T.shape and out.dtype == torch.uint8
    assert np.array_equal(out.permute(0, 2, 3, 1).numpy(), aug.batch(X, start=0))


def test_single_tensor_equals_the_numpy_path():
    """A (C, H, W) tensor gives the numpy call's pixels for the same keyed draw: uint8 as is,
    float through floor(x * 255 + 0.5) in and / 255 out (the documented conversions, written
    out here), for 1 and 3 channels, with and without an independent draw per index."""
    torch = pytest.importorskip("torch")
    for flag, rgb in (("pathmnist", True), ("chestmnist", False)):
        aug = AugMedMNISTC(flag, seed=3, n_ops=2)
        for i in range(12):
            x = _image(32, rgb, seed=i)
            hwc = x if x.ndim == 3 else x[:, :, None]
            t = torch.from_numpy(np.ascontiguousarray(hwc.transpose(2, 0, 1)))
            expected = aug(x, index=i, epoch=1)
            expected = expected if expected.ndim == 3 else expected[:, :, None]
            got = aug(t, index=i, epoch=1)
            assert got.dtype == torch.uint8 and got.shape == t.shape
            assert np.array_equal(got.permute(1, 2, 0).numpy(), expected), (flag, i)
            # float in [0, 1]: k / 255 maps back to k exactly, so the pixels must agree
            tf = t.to(torch.float32) / 255
            gotf = aug(tf, index=i, epoch=1)
            assert gotf.dtype == torch.float32 and gotf.shape == t.shape
            want = torch.from_numpy(expected.transpose(2, 0, 1).astype(np.float32)) / 255
            assert torch.equal(gotf, want), (flag, i)


def test_no_global_random_state_touched():
    np_state = np.random.get_state()[1].copy()
    py_state = random.getstate()
    aug = AugMedMNISTC("dermamnist", n_ops=2)
    x = _image(28, True)
    for i in range(30):
        aug(x)
        aug(x, index=i)
    assert np.array_equal(np.random.get_state()[1], np_state)
    assert random.getstate() == py_state


# ---------------------------------------------------------------------------------------------
# torch / torchvision
# ---------------------------------------------------------------------------------------------

def test_compose_with_torchvision():
    torch = pytest.importorskip("torch")
    T = pytest.importorskip("torchvision.transforms")
    x = _image(28, True)
    aug = AugMedMNISTC("pathmnist", seed=0)
    twin = AugMedMNISTC("pathmnist", seed=0)  # the same stream: the same draws, call by call
    pipe = T.Compose([aug, T.ToTensor(), T.Normalize(mean=[0.5] * 3, std=[0.5] * 3)])
    out = pipe(Image.fromarray(x))
    assert isinstance(out, torch.Tensor) and out.shape == (3, 28, 28)
    assert out.dtype == torch.float32
    # ToTensor then Normalize, written out: (HWC uint8 -> CHW / 255 - 0.5) / 0.5
    alone = np.asarray(twin(Image.fromarray(x)))
    want = (torch.from_numpy(alone.copy()).permute(2, 0, 1).float() / 255 - 0.5) / 0.5
    torch.testing.assert_close(out, want, rtol=0, atol=1e-6)
    pipe2 = T.Compose([T.ToTensor(), aug, T.RandomHorizontalFlip(p=1.0)])
    out2 = pipe2(Image.fromarray(x))
    assert out2.shape == (3, 28, 28) and out2.dtype == torch.float32
    assert float(out2.min()) >= 0 and float(out2.max()) <= 1
    # the float tensor is corrupted as the transform alone does it, then mirrored
    want2 = twin(torch.from_numpy(x.copy()).permute(2, 0, 1).float() / 255).flip(-1)
    torch.testing.assert_close(out2, want2, rtol=0, atol=0)


def test_compose_with_torchvision_v2_keeps_tv_tensor():
    torch = pytest.importorskip("torch")
    v2 = pytest.importorskip("torchvision.transforms.v2")
    tv_tensors = pytest.importorskip("torchvision.tv_tensors")
    aug = AugMedMNISTC("chestmnist", seed=0)
    pipe = v2.Compose([v2.ToImage(), aug, v2.ToDtype(torch.float32, scale=True)])
    img = Image.fromarray(_image(28, False))
    out = pipe(img)
    assert isinstance(out, tv_tensors.Image) and out.shape == (1, 28, 28)
    # the pixels are the transform's alone (same seed, first call), scaled to [0, 1]
    alone = AugMedMNISTC("chestmnist", seed=0)(_image(28, False))
    torch.testing.assert_close(out.as_subclass(torch.Tensor)[0],
                               torch.from_numpy(alone).float() / 255, rtol=0, atol=1e-6)
    assert isinstance(aug(v2.ToImage()(img)), tv_tensors.Image)


def test_torchvision_v2_compose_with_image_and_target():
    # v2.Compose calls every transform with all of a sample's inputs: aug(image, label) used to
    # raise "__call__() takes 2 positional arguments but 3 were given". The image is corrupted
    # as alone (keyed mode: compared with the same index), the target passes through untouched.
    torch = pytest.importorskip("torch")
    v2 = pytest.importorskip("torchvision.transforms.v2")
    aug = AugMedMNISTC("dermamnist", seed=5, identity=False)
    x = _image(28, True)
    label = torch.tensor([3])
    pipe = v2.Compose([v2.ToImage(), v2.ToDtype(torch.uint8)])
    img = pipe(Image.fromarray(x))
    out, target = aug(img, label, index=7)
    assert target is label
    assert torch.equal(out, aug(img, index=7)) and not torch.equal(out, img)
    out2, target2, extra = aug(x, 3, "meta", index=7)
    assert (target2, extra) == (3, "meta")
    np.testing.assert_array_equal(out2, aug(x, index=7))
    # inside a v2 pipeline, in stream mode: the pair comes back as a pair
    img2, lab2 = v2.Compose([v2.ToImage(), aug, v2.ToDtype(torch.float32, scale=True)])(
        Image.fromarray(x), 4)
    assert lab2 == 4 and img2.dtype == torch.float32 and img2.shape == (3, 28, 28)


class _ConstantStream:
    """Every item is the same image through the transform in stream mode."""

    def __init__(self, aug, n):
        self.aug, self.n = aug, n
        self.x = np.full((16, 16, 3), 128, np.uint8)

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        return self.aug(self.x)


def _epoch(loader):
    import torch

    return torch.cat([b for b in loader]).numpy()


@pytest.mark.parametrize("seed", [None, 5])
def test_dataloader_workers_distinct_and_repeatable(seed):
    torch = pytest.importorskip("torch")
    from torch.utils.data import DataLoader

    aug = AugMedMNISTC("dermamnist", corruptions=["gaussian_noise"], identity=False, seed=seed)
    ds = _ConstantStream(aug, 8)
    ds[0]  # compile kernels in the parent before forking
    loader = DataLoader(ds, batch_size=2, num_workers=2)
    torch.manual_seed(1234)
    e1 = _epoch(loader)
    e2 = _epoch(loader)
    torch.manual_seed(1234)
    e1_again = _epoch(loader)
    # batches alternate between the workers: items 0-1, 4-5 from worker 0; 2-3, 6-7 from worker 1
    assert not np.array_equal(e1[0], e1[2]) and not np.array_equal(e1[1], e1[3])
    assert len({e.tobytes() for e in e1}) == 8
    assert np.array_equal(e1, e1_again)
    assert not np.array_equal(e1, e2)


class _TwoViews:
    """Every item is two stream-mode views of one image, by two transforms."""

    def __init__(self, first, second, n):
        self.first, self.second, self.n = first, second, n
        self.x = np.full((16, 16, 3), 128, np.uint8)

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        return self.first(self.x), self.second(self.x)


def test_dataloader_workers_two_unseeded_transforms_draw_distinct_streams():
    # Two seed=None transforms in one worker derived their streams from the worker seed alone,
    # so the two views of every image were identical (SimCLR-style pairs never differed).
    torch = pytest.importorskip("torch")
    from torch.utils.data import DataLoader

    def make():
        return AugMedMNISTC("dermamnist", corruptions=["gaussian_noise"], identity=False)

    ds = _TwoViews(make(), make(), 8)
    ds[0]  # compile kernels in the parent before forking
    loader = DataLoader(ds, batch_size=2, num_workers=2)
    torch.manual_seed(99)
    first = [(a.numpy(), b.numpy()) for a, b in loader]
    torch.manual_seed(99)
    again = [(a.numpy(), b.numpy()) for a, b in loader]
    # Gaussian noise on a flat gray image: two independent draws cannot coincide.
    for a, b in first:
        for k in range(len(a)):
            assert not np.array_equal(a[k], b[k])
    for (a, b), (a2, b2) in zip(first, again):  # still repeatable under torch.manual_seed
        assert np.array_equal(a, a2) and np.array_equal(b, b2)


def test_keyed_mode_independent_of_num_workers():
    pytest.importorskip("torch")
    from torch.utils.data import DataLoader

    X = np.stack([_image(16, True, seed=s) for s in range(10)])
    aug = AugMedMNISTC("pathmnist", n_ops=2)  # seed=None: drawn once, shared with workers
    ds = AugmentedDataset(X, aug)
    ref = np.stack([aug(X[i], index=i, epoch=0) for i in range(10)])
    for workers in (0, 2):
        got = _epoch(DataLoader(ds, batch_size=3, num_workers=workers))
        assert np.array_equal(got, ref), workers
    ds.set_epoch(1)
    e1 = _epoch(DataLoader(ds, batch_size=4, num_workers=2))
    assert np.array_equal(e1, np.stack([aug(X[i], index=i, epoch=1) for i in range(10)]))
    assert not np.array_equal(e1, ref)
    # Persistent workers: the epoch travels with the indices.
    sampler = EpochSampler(len(ds))
    loader = DataLoader(ds, batch_size=5, num_workers=2, sampler=sampler, persistent_workers=True)
    got = []
    for epoch in (0, 1):
        sampler.set_epoch(epoch)
        got.append(_epoch(loader))
    assert np.array_equal(got[0], ref) and np.array_equal(got[1], e1)
    del loader


def test_reprs_show_weights_dataset_and_epoch():
    # Weighted and unweighted transforms printed the same; AugmentedDataset and EpochSampler
    # had object.__repr__ (an address), useless in a logged training config.
    kw = dict(seed=1, corruptions=["pixelate", "black_corner"])
    plain = AugMedMNISTC("dermamnist", **kw)
    weighted = AugMedMNISTC("dermamnist", weights={"identity": 3}, **kw)
    assert "probabilities" not in repr(plain)
    # weights 1, 1, 3 over (pixelate, black_corner, identity): 1/5, 1/5, 3/5
    assert repr(weighted) == ("AugMedMNISTC(dataset='dermamnist', choices=['pixelate', "
                              "'black_corner', 'identity'], probabilities=[0.2, 0.2, 0.6], "
                              "n_ops=1, levels=(1, 5), seed=1)")
    ds = AugmentedDataset(np.zeros((5, 16, 16, 3), np.uint8), weighted, transform=np.asarray,
                          epoch=2)
    assert repr(ds) == (f"AugmentedDataset(ndarray of 5, {weighted!r}, "
                        f"transform={np.asarray!r}, epoch=2)")
    assert repr(EpochSampler(7, epoch=3)) == "EpochSampler(range(0, 7), epoch=3)"


def test_augmented_dataset_tuples_and_transform():
    data = [(Image.fromarray(_image(28, True, seed=i)), np.array([i])) for i in range(3)]
    aug = AugMedMNISTC("pathmnist", seed=0)
    ds = AugmentedDataset(data, aug, transform=np.asarray, epoch=2)
    img, label = ds[1]
    assert isinstance(img, np.ndarray) and label[0] == 1
    assert np.array_equal(img, np.asarray(aug(data[1][0], index=1, epoch=2)))
    assert np.array_equal(ds[(1, 2)][0], img)
    with pytest.raises(IndexError, match=r"^index 3 out of range for a dataset of 3$"):
        ds[3]
    with pytest.raises(TypeError, match="augment must be"):
        AugmentedDataset(data, lambda im: im)


def test_augmented_dataset_takes_zero_d_and_negative_indices():
    """A 0-d integer array or tensor is an index (it used to be a TypeError, though EpochSampler
    accepted it); 0-d floats and bools stay TypeErrors, as plain ones are. A negative index
    counts from the end (it used to be a ValueError, while CorruptedSet[-1] worked)."""
    torch = pytest.importorskip("torch")
    data = [_image(16, True, seed=i) for i in range(3)]
    ds = AugmentedDataset(data, AugMedMNISTC("pathmnist", seed=0), epoch=1)
    want = ds[2]
    for item in (np.array(2), np.int64(2), torch.tensor(2), (torch.tensor(2), torch.tensor(1)),
                 (np.array(2), 1)):
        assert np.array_equal(ds[item], want), item
    assert not np.array_equal(ds[(2, np.array(0))], want)  # the epoch is read too
    for item in (np.array(2.0), torch.tensor(2.0), torch.tensor(True), np.array(True), 2.0,
                 True, "2"):
        with pytest.raises(TypeError, match=r"index must be an int in -3\.\.2"):
            ds[item]
    with pytest.raises(TypeError, match="epoch must be a non-negative int"):
        ds[(2, torch.tensor(1.0))]
    # Negative indices count from the end, as in a sequence, and are keyed by the positive one.
    for item in (-1, torch.tensor(-1), np.int8(-1), (-1, 1)):
        assert np.array_equal(ds[item], want), item
    assert np.array_equal(ds[-3], ds[0])
    for item in (-4, 3, (torch.tensor(-4), 0)):
        with pytest.raises(IndexError, match=r"out of range for a dataset of 3$"):
            ds[item]


def test_warm_up_leaves_streams_alone():
    a, b = AugMedMNISTC("chestmnist", seed=3), AugMedMNISTC("chestmnist", seed=3)
    assert a.warm_up() is a
    assert [a.draw() for _ in range(5)] == [b.draw() for _ in range(5)]



def test_huge_finite_weights_keep_their_ratio():
    """Weights are scaled by their maximum before normalising: a sum of huge finite weights
    must not overflow (found by a newcomer trial: it made every choice's probability 0)."""
    aug = AugMedMNISTC("pathmnist", weights={c: 0 for c in mf.corruptions("pathmnist")}
                       | {"identity": 1e308, "pixelate": 1e308})
    probs = dict(zip(aug.choices, aug.probabilities))
    assert probs["identity"] == pytest.approx(0.5) and probs["pixelate"] == pytest.approx(0.5)


def test_keyed_index_bound_matches_corrupt():
    """Keyed mode accepts the indices corrupt() accepts (< 2**63), and no larger ones (they
    would wrap onto small indices)."""
    aug = AugMedMNISTC("pathmnist", seed=0)
    x = _image(28, True)
    aug(x, index=2**63 - 1)
    for call in (lambda: aug(x, index=2**63), lambda: aug.draw(index=2**64 + 5),
                 lambda: aug.batch(np.stack([x, x]), start=2**63 - 1)):
        with pytest.raises(ValueError, match=r"(index|start) must be a non-negative int <="):
            call()
    aug.batch(np.stack([x, x]), start=2**63 - 2)


def test_folds_and_sampler_types_checked_up_front():
    with pytest.raises(TypeError, match="folds must be a fold name or a sequence"):
        AugMedMNISTC("pathmnist", folds=3)
    for sampler in (3.5, "abc", b"ab"):  # a string is iterable, but never of indices
        with pytest.raises(TypeError, match="sampler must be an iterable of indices"):
            EpochSampler(sampler)


def test_epoch_sampler_refuses_non_integer_indices():
    """A float index used to be truncated silently (1.7 -> 1), a string to fail in int()."""
    assert list(EpochSampler([np.int64(2), 0], epoch=3)) == [(2, 3), (0, 3)]
    assert all(type(i) is int for i, _ in EpochSampler(np.arange(3)))
    for sampler in ([1.7], ["a"], [None]):
        with pytest.raises(TypeError, match="sampler must yield int indices"):
            list(EpochSampler(sampler))


def test_epoch_sampler_takes_0d_integer_arrays_and_tensors():
    # torch.tensor(3) passed the Iterable check, then failed only when iterated.
    torch = pytest.importorskip("torch")
    assert list(EpochSampler(torch.tensor(3))) == [(0, 0), (1, 0), (2, 0)]
    assert list(EpochSampler(np.array(2), epoch=np.array(5))) == [(0, 5), (1, 5)]
    es = EpochSampler(range(2), epoch=torch.tensor(1))
    assert es.epoch == 1 and type(es.epoch) is int
    es.set_epoch(torch.tensor(4))
    assert list(es) == [(0, 4), (1, 4)]
    for bad in (torch.tensor(2.5), np.array(True)):  # refused when made, as 2.5 and True are
        with pytest.raises(TypeError, match="sampler must be an iterable of indices"):
            EpochSampler(bad)
    with pytest.raises(ValueError, match="sampler must be a non-negative int"):
        EpochSampler(torch.tensor(-1))


def test_epoch_sampler_needs_a_reiterable_sampler():
    # A one-shot iterator gave its indices once, then silently nothing from the second epoch.
    for sampler in (iter([0, 1]), (i for i in range(2)), map(int, "01")):
        with pytest.raises(TypeError, match="sampler must be re-iterable"):
            EpochSampler(sampler)

    class NoLen:  # re-iterable but without a length (len() raised Python's unnamed error)
        def __iter__(self):
            return iter([1, 0])

    es = EpochSampler(NoLen(), epoch=2)
    assert list(es) == [(1, 2), (0, 2)] and list(es) == [(1, 2), (0, 2)]
    with pytest.raises(TypeError, match="sampler with a length; NoLen has none"):
        len(es)
    assert len(EpochSampler(range(4))) == 4 and len(EpochSampler(7)) == 7
