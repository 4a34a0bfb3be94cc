"""The functional layer: explicit parameters, argument errors, and hand-checkable cases."""
import numpy as np
import pytest
from PIL import Image, ImageDraw

import medmnistc_fast as mf
from medmnistc_fast import functional as F


def test_black_corner_hand_case():
    img = np.full((9, 11), 200, np.uint8)
    out = F.black_corner(img, 2)
    yy, xx = np.mgrid[:9, :11]
    inside = (xx - 5) ** 2 + (yy - 4) ** 2 <= 4
    assert np.array_equal(out, np.where(inside, 200, 0))


def test_stain_deposit_zeroes_only_under_ink(rgb224):
    out = F.stain_deposit(rgb224[0], x=[20], y=[30], ink=[0])
    changed = np.any(out != rgb224[0], axis=-1)
    ys, xs = np.nonzero(changed)
    assert ys.min() >= 30 and ys.max() < 54 and xs.min() >= 20 and xs.max() < 44
    assert np.all(out[changed] == 0)


def test_bubble_matches_pillow_drawing(rgb224):
    img = rgb224[1]
    x, y, r = [60, 150], [70, 120], [9, 14]
    layer = Image.new("RGBA", (224, 224), (255, 255, 255, 0))
    draw = ImageDraw.Draw(layer)
    for cx, cy, rad in zip(x, y, r):
        draw.ellipse((cx - rad - 2, cy - rad - 2, cx + rad + 2, cy + rad + 2),
                     fill=(255, 255, 255, 130))
        draw.ellipse((cx - rad, cy - rad, cx + rad, cy + rad), fill=(255, 255, 255, 100))
    pil = Image.fromarray(img)
    pil.paste(layer, (0, 0), layer)
    assert np.array_equal(F.bubble(img, x, y, r), np.array(pil))


def test_characters_changes_only_near_words(rgb224):
    out = F.characters(rgb224[0], ["abc"], x=[100], y=[100], colors=[[255, 0, 0]], font_size=8)
    ys, xs = np.nonzero(np.any(out != rgb224[0], axis=-1))
    assert ys.size > 0 and ys.max() <= 102 and ys.min() >= 88 and xs.min() >= 99


def test_functional_equals_public_with_same_values(rgb224):
    """mf.corrupt at 224 equals the functional call with the table's physical parameters."""
    img = rgb224[0]
    assert np.array_equal(mf.corrupt(img, "pixelate", 2, dataset="pathmnist"),
                          F.pixelate(img, 0.6))
    assert np.array_equal(mf.corrupt(img, "defocus_blur", 3, dataset="pathmnist"),
                          F.defocus_blur(img, 5, 0.2))
    assert np.array_equal(mf.corrupt(img, "gaussian_blur", 2, dataset="chestmnist"),
                          F.gaussian_blur(img, 5))
    assert np.array_equal(F.gaussian_blur(img, 5), F.gaussian_blur(img, 5, 1.1))  # default sigma
    assert np.array_equal(mf.corrupt(img, "black_corner", 3, dataset="dermamnist"),
                          F.black_corner(img, 112))


@pytest.mark.parametrize("call, match", [
    (lambda x: F.pixelate(x, 0), "factor must be > 0"),
    (lambda x: F.pixelate(x, 1.5), "factor must be > 0 and <= 1"),
    (lambda x: F.jpeg_compression(x, 2.5), "quality must be an int"),
    (lambda x: F.gaussian_noise(x, -0.1), "sigma must be > 0"),
    # inf is > 0: without an upper bound the message must say the number has to be finite
    (lambda x: F.gaussian_noise(x, float("inf")), "sigma must be > 0 and finite; got inf"),
    (lambda x: F.brightness(x, float("inf")), "factor must be > 0 and finite; got inf"),
    (lambda x: F.gaussian_noise(x, 0.1, seed=-2), "seed must be a non-negative int"),
    (lambda x: F.motion_blur(x, 5, 2, "left"), "angle must be a finite real"),
    (lambda x: F.motion_blur(x, 10**7, 5, 30), "radius must be > 0 and <= 1024"),
    # one message, the allowed range, for every out-of-range value (0 used to get "> 0",
    # though 0 < photons < 0.001 is refused too; found by a newcomer trial)
    (lambda x: F.shot_noise(x, 1e6), r"photons must be in \[0.001, 10000\]"),
    (lambda x: F.shot_noise(x, 5e-324), r"photons must be in \[0.001, 10000\]"),
    (lambda x: F.shot_noise(x, 0), r"photons must be in \[0.001, 10000\]; got 0"),
    (lambda x: F.shot_noise(x, float("nan")), r"photons must be in \[0.001, 10000\]"),
    (lambda x: F.defocus_blur(x, 3, -1), r"alias_sigma must be in \[0.001, 1024\]; got -1"),
    (lambda x: F.motion_blur(x, 5, 1e-4, 0), r"sigma must be in \[0.001, 1024\]"),
    (lambda x: F.gaussian_blur(x, 5, float("inf")), r"sigma must be in \[0.001, 1024\]"),
    (lambda x: F.zoom_blur(x, [0.9]), "zooms must be"),
    (lambda x: F.gaussian_blur(x, 4), r"^kernel_size must be an odd int in 1\.\.2049; got 4$"),
    (lambda x: F.gaussian_blur(x, 2051), r"^kernel_size must be an odd int in 1\.\.2049; got 2051$"),
    (lambda x: F.gaussian_blur(x, 0), r"^kernel_size must be an odd int in 1\.\.2049; got 0$"),
    (lambda x: F.saturate(x, 2.0), r"shift must be a real number in \[-1, 1\]"),
    (lambda x: F.black_corner(x, -1), "radius must be a non-negative int"),
    (lambda x: F.stain_deposit(x, [1, 2], [3], [0]), "must have the same length"),
    # the set's ten masks, 0..9, for a value too high or too low (-1 was told "0..1073741824")
    (lambda x: F.stain_deposit(x, [1], [3], [10]), r"^ink must hold ints in 0\.\.9; got \[10\]"),
    (lambda x: F.stain_deposit(x, [1], [3], [-1]), r"^ink must hold ints in 0\.\.9; got \[-1\]"),
    # font_size in [1, 1024] for every out-of-range value (0 and -1 were told "> 0", though
    # 0.5 is refused too)
    (lambda x: F.characters(x, ["a"], [1], [5], [[0, 0, 0]], font_size=0),
     r"^font_size must be in \[1, 1024\]; got 0$"),
    (lambda x: F.characters(x, ["a"], [1], [5], [[0, 0, 0]], font_size=-1.0),
     r"^font_size must be in \[1, 1024\]; got -1\.0$"),
    (lambda x: F.characters(x, ["a"], [1], [5], [[0, 0, 0]], font_size=0.5),
     r"^font_size must be in \[1, 1024\]; got 0\.5$"),
    (lambda x: F.bubble(x, [1], [1], [-3]), "radius must hold ints in 0..1024"),
    (lambda x: F.characters(x, "abc", [1], [1], [[0, 0, 0]]), "texts must be a sequence"),
    (lambda x: F.characters(x, ["abc"], [1], [1], [[0, 0, 300]]), "colors must be"),
])
def test_argument_errors(call, match, rgb224):
    img = rgb224[0].copy()
    with pytest.raises((TypeError, ValueError), match=match):
        call(img)
    assert np.array_equal(img, rgb224[0])


@pytest.mark.parametrize("call, match", [
    (lambda x: F.saturate(x, "0.1"), "shift must be a real number"),
    (lambda x: F.black_corner(x, 2.5), "radius must be a non-negative int"),
    (lambda x: F.bubble(x, [1], [1], [3], border=2.0), "border must be a non-negative int"),
    (lambda x: F.stain_deposit(x, [1], [3], [0], ink_side=24.0), "ink_side must be an int"),
    (lambda x: F.characters(x, ["abc"], [1], [1], [[0.0, 0.0, 0.0]]), "colors must be"),
    (lambda x: F.characters(x, ["abc"], [1], [1], [["red", 0, 0]]), "colors must be"),
    (lambda x: F.characters(x, (t for t in ["abc"]), [1], [1], [[0, 0, 0]]),
     "texts must be a sequence"),
    # float() used to accept these items silently
    (lambda x: F.zoom_blur(x, ["1.5"]), "zooms must be a sequence of real numbers"),
    (lambda x: F.zoom_blur(x, [True]), "zooms must be a sequence of real numbers"),
    # np.asarray turned a bool beside ints into an int: [True, 2] was read as [1, 2]
    (lambda x: F.stain_deposit(x, [True, 2], [3, 4], [0, 1]), "^x must be .* not bools"),
    (lambda x: F.bubble(x, [1], (np.True_,), [3]), "^y must be .* not bools"),
    (lambda x: F.characters(x, ["abc"], [1], [1], [[True, 2, 3]]), "^colors must be .* not bools"),
    (lambda x: F.characters(x, ["abc"], [1], [1], ([0, 2, 3], (4, False, 6))),
     "^colors must be .* not bools"),
])
def test_wrong_types_are_type_errors(call, match, rgb224):
    """A wrong type is a TypeError naming the argument (a wrong value is a ValueError); found
    by a newcomer trial."""
    img = rgb224[0].copy()
    with pytest.raises(TypeError, match=match):
        call(img)
    assert np.array_equal(img, rgb224[0])


@pytest.mark.parametrize("call, match", [
    # the TypeError states the allowed values as the ValueError does (it said only "must be a
    # real number" / "an int"); ranges from the docstrings
    (lambda x: F.pixelate(x, "0.5"), r"^factor must be a real number > 0 and <= 1\.0; got '0\.5'"),
    (lambda x: F.jpeg_compression(x, 50.0), r"^quality must be an int > 0 and <= 95; got 50\.0"),
    (lambda x: F.gaussian_blur(x, 3.0), r"^kernel_size must be an odd int in 1\.\.2049; got 3\.0 \(float\)$"),
    (lambda x: F.shot_noise(x, None), r"^photons must be a real number in \[0\.001, 10000\];"),
    (lambda x: F.defocus_blur(x, 3, "1"),
     r"^alias_sigma must be a real number in \[0\.001, 1024\];"),
    (lambda x: F.gaussian_noise(x, [0.1]), r"^sigma must be a real number > 0 and finite;"),
    (lambda x: F.characters(x, ["a"], [1], [5], [[0, 0, 0]], font_size="6"),
     r"^font_size must be a real number in \[1, 1024\];"),
    (lambda x: F.bubble(x, [1], [1], [3], border=2.0),
     r"^border must be a non-negative int <= 1024;"),
    (lambda x: F.stain_deposit(x, [1], [1], [0], side=3.0),
     r"^side must be an int > 0 and <= 1024;"),
])
def test_type_errors_state_the_allowed_values(call, match, rgb224):
    with pytest.raises(TypeError, match=match):
        call(rgb224[0])


def test_marking_size_bound(rgb224):
    with pytest.raises(ValueError, match=r"size must be a pair of ints in 1..1024"):
        F.marking(rgb224[0], (1025, 10), (0, 0))


def test_bubble_radii_above_the_shared_table_match_pillow():
    """Radii above the cached table (64 px) get rows of their own, still Pillow's disks; a
    bubble of radius 1024 with a border of 1024 on a tiny image used to draw every disk up to
    2048 first."""
    from tests.test_artifacts import _pillow_bubbles

    img = np.random.default_rng(3).integers(0, 256, (200, 230, 3), dtype=np.uint8)
    x, y, r = [100, 20], [90, 170], [70, 5]
    v = {"x": np.array(x), "y": np.array(y), "inner": np.array(r), "outer": np.array(r) + 3}
    assert np.array_equal(F.bubble(img, x, y, r, border=3), _pillow_bubbles(img, v))
    tiny = np.random.default_rng(4).integers(0, 256, (8, 8, 3), dtype=np.uint8)
    v = {"x": np.array([4]), "y": np.array([4]), "inner": np.array([1024]),
         "outer": np.array([2048])}
    assert np.array_equal(F.bubble(tiny, [4], [4], [1024], border=1024), _pillow_bubbles(tiny, v))


def test_non_finite_angle_is_a_value_error(rgb224):
    with pytest.raises(ValueError, match="angle must be a finite real"):
        F.motion_blur(rgb224[0], 5, 2, float("nan"))
    with pytest.raises(TypeError, match="angle must be a finite real"):
        F.motion_blur(rgb224[0], 5, 2, "left")


def test_huge_finite_angle_is_its_residue_modulo_360(rgb224):
    """A finite angle whose radians overflow (|angle| > ~5.7e307) used to fail with a bare
    'math domain error' naming no argument; it now blurs as its exact residue modulo 360."""
    import math

    x = rgb224[0][:40, :40]
    for angle in (1e308, -1.7e308):
        want = F.motion_blur(x, 5, 2, math.fmod(angle, 360.0))
        assert np.array_equal(F.motion_blur(x, 5, 2, angle), want)


def test_int_angle_beyond_the_float_range_is_its_residue_modulo_360(rgb224):
    """The angle is documented as any finite value: an int too large for a float (10**400)
    was refused as 'must be a finite real number'; it blurs as its exact residue, with its
    sign (10**400 = 280 mod 360: 0 mod 40 and 1 mod 9)."""
    x = rgb224[0][:40, :40]
    assert np.array_equal(F.motion_blur(x, 5, 2, 10 ** 400), F.motion_blur(x, 5, 2, 280))
    assert np.array_equal(F.motion_blur(x, 5, 2, -10 ** 400), F.motion_blur(x, 5, 2, -280))
    # sigma 20 weighs every tap about alike, so the radius shows: the residue (280) once
    # replaced the radius (5) there, a blur 57 times as long
    assert np.array_equal(F.motion_blur(x, 5, 20, 10 ** 400), F.motion_blur(x, 5, 20, 280))
    assert np.array_equal(F.motion_blur(x, 3, 20, 360 * 10 ** 400), F.motion_blur(x, 3, 20, 0))


def test_ints_beyond_the_float_range_are_value_errors():
    """A Python int too large for a float is out of range, a ValueError naming the argument
    (``float(10**400)`` used to escape as OverflowError)."""
    from medmnistc_fast.corruptions import pathology as P

    x = np.zeros((16, 16, 3), np.uint8)
    cases = [
        (lambda: F.gaussian_noise(x, 10 ** 400, seed=0), "sigma"),
        (lambda: F.brightness(x, 10 ** 400), "factor"),
        (lambda: F.pixelate(x, -10 ** 400), "factor"),
        (lambda: F.defocus_blur(x, 10 ** 400, 1), "radius"),
        (lambda: P.hsv_shift(x, "hue", 10 ** 400), "amount"),
        (lambda: P.pathology_bubble(x, -10 ** 400), "strength"),
    ]
    for call, name in cases:
        with pytest.raises(ValueError, match=name):
            call()


@pytest.mark.parametrize("call, match", [
    (lambda x: F.bubble(x, [2 ** 64], [1], [3]),
     r"^x must hold ints in -1073741824\.\.1073741824; got \[18446744073709551616\]$"),
    (lambda x: F.bubble(x, [1, 2], [1, 1], [3, 2 ** 70]), r"^radius must hold ints in 0\.\.1024;"),
    (lambda x: F.characters(x, ["a"], [1], [-2 ** 70], [[0, 0, 0]]),
     r"^y must hold ints in -1073741824\.\.1073741824;"),
    (lambda x: F.stain_deposit(x, [1], [1], [np.int64(0), 2 ** 64][1:]),
     r"^ink must hold ints in 0\.\.9;"),
])
def test_ints_past_uint64_are_out_of_range_not_a_type_error(call, match, rgb224):
    """Ints beyond the uint64 range make NumPy build an object array; they are a ValueError
    stating the range, as 2**63 (a uint64 array) is, not the TypeError "must be a 1-D sequence
    of ints" they got."""
    with pytest.raises(ValueError, match=match):
        call(rgb224[0])


def test_out_of_range_parameters_rejected_clearly():
    # Found by a newcomer trial: each used to segfault, wrap silently, end in MemoryError or
    # raise from deep inside a kernel.
    import medmnistc_fast as mf
    from medmnistc_fast.augment import AugMedMNISTC
    from medmnistc_fast.corruptions import pathology as P

    x = np.zeros((32, 32, 3), np.uint8)
    frozen = x.copy()
    cases = [
        (lambda: F.bubble(x, x=[-2 ** 62], y=[10], radius=[5]), ValueError, "x must hold ints"),
        (lambda: F.bubble(x, x=[2 ** 63 - 1], y=[10], radius=[5]), ValueError, "x must hold"),
        (lambda: F.bubble(x, [10], [10], [5], border=2 ** 63 - 1), ValueError, "border"),
        (lambda: F.bubble(x, [10], [10], [10 ** 6]), ValueError, "radius must hold"),
        (lambda: F.stain_deposit(x, [10], [10], np.array([2 ** 63 + 5], np.uint64)),
         ValueError, "ink must hold"),
        (lambda: F.stain_deposit(x, np.array([2 ** 64 - 10], np.uint64), [10], [0]),
         ValueError, "x must hold"),
        (lambda: F.stain_deposit(x, [0], [0], [0], side=10 ** 6), ValueError, "side"),
        (lambda: P.marking(x, (10 ** 5, 10 ** 5)), ValueError, "size must be a pair"),
        (lambda: P.marking(x, (10, 10), (2 ** 62, 0)), ValueError, "position"),
        (lambda: F.defocus_blur(x, 1, 1e-200), ValueError, "alias_sigma"),
        (lambda: F.motion_blur(x, 5, 1e-200, 0), ValueError, "sigma"),
        (lambda: F.gaussian_blur(x, 3, 1e-300), ValueError, "sigma"),
        (lambda: F.gaussian_blur(x, 3, 1e39), ValueError, "sigma"),
        (lambda: F.zoom_blur(x, "12"), TypeError, "zooms"),
        (lambda: F.zoom_blur(x, [1.0, 2e6]), ValueError, "zooms"),
        # unordered or one-shot containers, and 2-D arrays, are not sequences of factors
        (lambda: F.zoom_blur(x, {1.0: 1}), TypeError, "zooms"),
        (lambda: F.zoom_blur(x, {1.1, 1.2}), TypeError, "zooms"),
        (lambda: F.zoom_blur(x, (z for z in (1.1, 1.2))), TypeError, "zooms"),
        (lambda: F.zoom_blur(x, np.array([[1.1, 1.2]])), TypeError, "zooms"),
        (lambda: F.characters(x, ["ab"], [1], [10], [[0, 0, 0]], font_size=1e6), ValueError,
         "font_size"),
        (lambda: F.characters(x, ["ab"], [1], [10], [[0, 0, 0]], font_size=1e-300), ValueError,
         "font_size"),
        (lambda: AugMedMNISTC("pathmnist", n_ops=10 ** 9), ValueError, "n_ops"),
    ]
    for call, exc, msg in cases:
        with pytest.raises(exc, match=msg):
            call()
    assert np.array_equal(x, frozen)
    # out= overlapping the caller's (non-contiguous) images is refused too.
    base = np.stack([np.arange(32 * 32 * 3, dtype=np.uint8).reshape(32, 32, 3)] * 2)
    view = base[..., ::-1]
    with pytest.raises(ValueError, match="share memory"):
        mf.corrupt_batch(view, "pixelate", 3, dataset="pathmnist", seed=0, out=base)


def test_zoom_blur_takes_list_tuple_or_1d_array_alike():
    x = (np.arange(40 * 40 * 3) % 251).astype(np.uint8).reshape(40, 40, 3)
    want = F.zoom_blur(x, [1.1, 1.2])
    assert np.array_equal(F.zoom_blur(x, (1.1, 1.2)), want)
    assert np.array_equal(F.zoom_blur(x, np.array([1.1, 1.2])), want)


def test_characters_with_no_words_returns_the_image():
    # Empty lists for every per-word argument (colors too, like x and y) write nothing.
    x = (np.arange(32 * 40 * 3) % 253).astype(np.uint8).reshape(32, 40, 3)
    for colors in ([], np.zeros((0, 3), np.uint8)):
        out = F.characters(x, [], [], [], colors)
        assert np.array_equal(out, x) and out is not x
    with pytest.raises(ValueError, match="colors"):
        F.characters(x, ["ab"], [1], [10], [])  # one word needs one colour


def test_check_positive_lower_bound_without_upper():
    """``lower`` alone is a half-open range [lower, inf] (it used to compare with None)."""
    from medmnistc_fast._validation import check_positive

    assert check_positive(2, "x", lower=0.5) == 2.0
    assert check_positive(float("inf"), "x", lower=0.5) == float("inf")
    for bad in (0.25, float("nan"), -1):
        with pytest.raises(ValueError, match=r"^x must be in \[0.5, inf\]; got "):
            check_positive(bad, "x", lower=0.5)
