"""The binding public contract (design.md section 2): names, errors, randomness, batches."""
import os
import threading
import time
import zlib

import numpy as np
import pytest

import medmnistc_fast as mf
from medmnistc_fast import registry, rng
from medmnistc_fast.api import _plan, sample_values
from medmnistc_fast.corruptions import KINDS

ALL_PAIRS = [(d, c) for d in mf.DATASETS for c in mf.corruptions(d)]


def test_datasets_and_corruption_order():
    assert len(mf.DATASETS) == 12
    assert len(ALL_PAIRS) == 131  # counted from the reference's CORRUPTIONS_DS
    assert mf.corruptions("retinamnist") == (
        "pixelate", "jpeg_compression", "gaussian_noise", "speckle_noise", "defocus_blur",
        "motion_blur", "brightness_down", "contrast_down")
    assert set(c for cs in mf.FOLDS.values() for c in cs) == set(KINDS)


def test_tables_spot_values():
    # Hand-copied from spec/medmnistc.md.
    assert mf.severity_table("octmnist", "defocus_blur") == (
        (0.5, 0.6), (1, 0.5), (1.5, 0.1), (2.0, 0.5), (2.5, 0.1))
    assert mf.severity_table("chestmnist", "gaussian_blur") == (3, 5, 7, 9, 11)
    zooms = mf.severity_table("dermamnist", "zoom_blur")
    assert [len(z) for z in zooms] == [12, 16, 11, 13, 11]
    assert zooms[0][-1] == float(np.arange(1, 1.11, 0.01)[-1])


@pytest.mark.parametrize("bad", [0, 6, -1, 2.5, True, "3", None, np.float64(2.0)])
def test_bad_severity(bad, rgb224):
    with pytest.raises((ValueError, TypeError), match="severity must be an int in 1..5"):
        mf.corrupt(rgb224[0], "pixelate", bad, dataset="pathmnist")


def test_numpy_int_severity_ok(rgb224):
    a = mf.corrupt(rgb224[0], "pixelate", np.int64(2), dataset="pathmnist")
    b = mf.corrupt(rgb224[0], "pixelate", 2, dataset="pathmnist")
    assert np.array_equal(a, b)


def test_unknown_names_list_valid(rgb224):
    with pytest.raises(ValueError, match="valid datasets: 'pathmnist'"):
        mf.corrupt(rgb224[0], "pixelate", 1, dataset="mnist")
    with pytest.raises(ValueError, match="valid corruptions: 'pixelate', 'jpeg_compression'"):
        mf.corrupt(rgb224[0], "zoom_blur", 1, dataset="pathmnist")
    with pytest.raises(TypeError, match="dataset must be a str"):
        mf.corrupt(rgb224[0], "pixelate", 1, dataset=3)
    with pytest.raises(ValueError, match="valid datasets"):
        mf.corruptions("nope")


@pytest.mark.parametrize("dataset, corruption", [
    ("pathmnist", "gaussian_noise"),       # a MedMNIST-C corruption of other datasets
    ("pathmnist", "hue"),                  # a pathology-suite corruption
    ("pathology96", "brightness_up"),      # a MedMNIST-C name on a suite
    ("pathmnist", "pixelation"),           # no dataset defines it: no hint
])
def test_corruption_of_other_datasets_names_them(dataset, corruption):
    # The datasets that define it, found by asking every key for its corruptions.
    owners = [d for d in mf.DATASETS + mf.PATHOLOGY_SUITES if corruption in mf.corruptions(d)]
    with pytest.raises(ValueError) as ei:
        mf.corrupt(np.zeros((32, 32, 3), np.uint8), corruption, 1, dataset=dataset)
    msg = str(ei.value)
    assert "valid corruptions: " + ", ".join(map(repr, mf.corruptions(dataset))) in msg
    if owners:
        assert msg.endswith(f"({corruption!r} belongs to other datasets: "
                            + ", ".join(map(repr, owners)) + ")")
    else:
        assert "belongs to" not in msg


@pytest.mark.parametrize("bad, exc, msg", [
    (np.zeros((32, 32, 3), np.float32), TypeError, "dtype uint8"),
    (np.zeros((32, 32, 3), np.int16), TypeError, "dtype uint8"),
    ([[0] * 32] * 32, TypeError, "numpy.ndarray"),
    (np.zeros((32, 32, 2), np.uint8), ValueError, "1 or 3 channels"),
    (np.zeros((32, 32, 4), np.uint8), ValueError, "1 or 3 channels"),
    (np.zeros((7, 32), np.uint8), ValueError, "at least 8 x 8"),
    (np.zeros((32,), np.uint8), ValueError, "shape"),
    (np.zeros((2, 32, 32, 3), np.uint8), ValueError, "shape"),
    # a mask would be ignored without a word
    (np.ma.masked_array(np.zeros((32, 32, 3), np.uint8), mask=True), TypeError, "masked array"),
])
def test_bad_images(bad, exc, msg):
    with pytest.raises(exc, match=msg):
        mf.corrupt(bad, "pixelate", 1, dataset="pathmnist")


@pytest.mark.parametrize("name, value", [("seed", -1), ("seed", 1.5), ("index", -3),
                                         ("index", "0")])
def test_bad_seed_index(name, value, rgb224):
    with pytest.raises((ValueError, TypeError), match=f"{name} must be a non-negative int"):
        mf.corrupt(rgb224[0], "motion_blur", 1, dataset="pathmnist", **{name: value})


def test_bad_batch_args(rgb224):
    with pytest.raises(ValueError, match="start must be a non-negative int"):
        mf.corrupt_batch(rgb224, "pixelate", 1, dataset="pathmnist", start=-1)
    with pytest.raises(ValueError, match=r"num_threads must be an int in 1\.\.1024"):
        mf.corrupt_batch(rgb224, "pixelate", 1, dataset="pathmnist", num_threads=0)
    with pytest.raises(ValueError, match=r"looks like one \(H, W, C\) image"):
        mf.corrupt_batch(rgb224[0], "pixelate", 1, dataset="pathmnist")


@pytest.mark.parametrize("dataset, corruption", ALL_PAIRS)
def test_every_pair_contract(dataset, corruption, rgb224, gray224):
    """Shape/dtype kept, input untouched (read-only, non-contiguous), seeded determinism,
    batch == single, for all 131 (dataset, corruption) pairs on real images."""
    imgs = rgb224 if registry.RGB[dataset] else gray224
    view = np.asfortranarray(imgs[1])  # non-contiguous input
    view.setflags(write=False)
    before = view.copy()
    out = mf.corrupt(view, corruption, 3, dataset=dataset, seed=11, index=5)
    assert out.shape == view.shape and out.dtype == np.uint8 and out.flags.c_contiguous
    assert np.array_equal(view, before)
    again = mf.corrupt(before, corruption, 3, dataset=dataset, seed=11, index=5)
    assert np.array_equal(out, again)
    batch = mf.corrupt_batch(imgs, corruption, 3, dataset=dataset, seed=11, start=4,
                             num_threads=2)
    assert np.array_equal(batch[1], out)
    assert np.array_equal(batch[0], mf.corrupt(imgs[0], corruption, 3, dataset=dataset,
                                               seed=11, index=4))


@pytest.mark.parametrize("corruption", ["gaussian_noise", "motion_blur", "characters", "bubble"])
def test_random_corruptions_depend_on_key(corruption, rgb224):
    img = rgb224[0]
    ds = "pathmnist" if corruption == "bubble" else "dermamnist"
    base = mf.corrupt(img, corruption, 5, dataset=ds, seed=1, index=0)
    assert not np.array_equal(base, mf.corrupt(img, corruption, 5, dataset=ds, seed=1, index=1))
    assert not np.array_equal(base, mf.corrupt(img, corruption, 5, dataset=ds, seed=2, index=0))
    assert not np.array_equal(base, mf.corrupt(img, corruption, 5, dataset=ds))  # fresh entropy


def test_gray_shapes_2d_and_3d(gray224):
    a = mf.corrupt(gray224[0], "speckle_noise", 2, dataset="octmnist", seed=3)
    b = mf.corrupt(gray224[0][..., None], "speckle_noise", 2, dataset="octmnist", seed=3)
    assert a.shape == (224, 224) and b.shape == (224, 224, 1)
    assert np.array_equal(a, b[..., 0])


def test_batch_independent_of_split_and_threads(rgb224):
    imgs = np.concatenate([rgb224] * 5)
    full = mf.corrupt_batch(imgs, "gaussian_noise", 4, dataset="dermamnist", seed=9,
                            num_threads=1)
    two = mf.corrupt_batch(imgs, "gaussian_noise", 4, dataset="dermamnist", seed=9,
                           num_threads=2)
    parts = np.concatenate([
        mf.corrupt_batch(imgs[:3], "gaussian_noise", 4, dataset="dermamnist", seed=9),
        mf.corrupt_batch(imgs[3:], "gaussian_noise", 4, dataset="dermamnist", seed=9, start=3)])
    assert np.array_equal(full, two) and np.array_equal(full, parts)


def test_index_bounds(rgb224):
    for bad in (2**63, 2**64):  # indices are < 2**63
        with pytest.raises(ValueError, match=r"index must be a non-negative int <= 9223372036854775807"):
            mf.corrupt(rgb224[0], "gaussian_noise", 1, dataset="dermamnist", index=bad)
    assert mf.corrupt(rgb224[0], "gaussian_noise", 1, dataset="dermamnist",
                      index=2**63 - 1).shape == rgb224[0].shape
    with pytest.raises(ValueError, match=r"must have 1 or 3 channels .* got shape \(2, 9, 9, 2\)"):
        mf.corrupt_batch(np.zeros((2, 9, 9, 2), np.uint8), "pixelate", 1, dataset="pathmnist")
    with pytest.raises(ValueError, match="start must be a non-negative int <="):
        mf.corrupt_batch(rgb224, "gaussian_noise", 1, dataset="dermamnist", start=2**63 - 1)
    with pytest.raises(ValueError, match=r"num_threads must be an int in 1\.\.1024"):
        mf.corrupt_batch(rgb224, "pixelate", 1, dataset="pathmnist", num_threads=-1)


def test_empty_batch():
    out = mf.corrupt_batch(np.zeros((0, 28, 28), np.uint8), "pixelate", 1, dataset="chestmnist")
    assert out.shape == (0, 28, 28)


def test_num_threads_control(monkeypatch):
    mf.set_num_threads(3)
    assert mf.get_num_threads() == 3
    mf.set_num_threads(None)
    monkeypatch.setenv("MEDMNISTC_FAST_NUM_THREADS", "2")
    assert mf.get_num_threads() == 2
    monkeypatch.setenv("MEDMNISTC_FAST_NUM_THREADS", "zero")
    with pytest.raises(ValueError, match="MEDMNISTC_FAST_NUM_THREADS"):
        mf.get_num_threads()
    # also where the images are small enough to run on one thread anyway (8 x 8 < 96 x 96)
    with pytest.raises(ValueError, match="MEDMNISTC_FAST_NUM_THREADS must be an int"):
        mf.corrupt_batch(np.zeros((2, 8, 8), np.uint8), "pixelate", 1, dataset="chestmnist")
    with pytest.raises(TypeError, match="^n of set_num_threads must be an int"):
        mf.set_num_threads(1.5)
    with pytest.raises(ValueError, match=r"^n of set_num_threads must be an int in 1\.\.1024"):
        mf.set_num_threads(0)
    # A typo such as 10**6 is refused rather than starting a million threads.
    for n in (1025, 10**6):
        with pytest.raises(ValueError, match=r"^n of set_num_threads must be an int in 1\.\.1024"):
            mf.set_num_threads(n)
        with pytest.raises(ValueError, match=r"num_threads must be an int in 1\.\.1024"):
            mf.corrupt_batch(np.zeros((2, 8, 8), np.uint8), "pixelate", 1, dataset="chestmnist",
                             num_threads=n)
    monkeypatch.setenv("MEDMNISTC_FAST_NUM_THREADS", "5000")
    with pytest.raises(ValueError, match="MEDMNISTC_FAST_NUM_THREADS must be an int in 1..1024"):
        mf.get_num_threads()
    # decimal ASCII digits only (int() alone took "1_0" as 10 and Arabic-Indic three as 3)
    for text in ("1_0", "\u0663", "+2", "2.0", "0x2"):
        monkeypatch.setenv("MEDMNISTC_FAST_NUM_THREADS", text)
        with pytest.raises(ValueError, match="MEDMNISTC_FAST_NUM_THREADS must be an int"):
            mf.get_num_threads()
    monkeypatch.setenv("MEDMNISTC_FAST_NUM_THREADS", " 2 ")
    assert mf.get_num_threads() == 2


def test_keys_follow_documented_rule():
    # The key of image k is splitmix64(base ^ splitmix64(k)), computed here independently with
    # Python integers.
    m = (1 << 64) - 1

    def mix(x):
        z = (x + 0x9E3779B97F4A7C15) & m
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & m
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & m
        return z ^ (z >> 31)

    base = rng.base_key(7, "dermamnist", "gaussian_noise", 2)
    ss = np.random.SeedSequence(7, spawn_key=(zlib.crc32(b"dermamnist"),
                                              zlib.crc32(b"gaussian_noise"), 2))
    assert base == int(ss.generate_state(1, np.uint64)[0])
    keys = rng.image_keys(base, np.arange(5))
    assert [int(k) for k in keys] == [mix(base ^ mix(k)) for k in range(5)]
    assert [rng.image_key(base, k) for k in range(5)] == [mix(base ^ mix(k)) for k in range(5)]


@pytest.mark.parametrize("corruption", ["motion_blur", "gaussian_noise", "pixelate", "bubble"])
def test_public_equals_kernel_with_sampled_values(corruption, rgb224):
    dataset = "pathmnist" if corruption in ("bubble", "pixelate", "motion_blur") else "dermamnist"
    kind, param, base, ctx = _plan(dataset, corruption, 4, 21)
    key = rng.image_keys(base, 3)
    values = sample_values(kind, param, ctx, rgb224[1].shape, key)
    assert np.array_equal(kind.kernel(np.ascontiguousarray(rgb224[1]), **values),
                          mf.corrupt(rgb224[1], corruption, 4, dataset=dataset, seed=21, index=3))


def test_gaussian_blur_samples_table_kernel_and_scale():
    # Up to 224 px the sampled values are the table's kernel size, torchvision's default sigma
    # 0.3 ((k - 1) / 2 - 1) + 0.8 = .8, 1.1, 1.4, 1.7, 2.0 for chestmnist's 3, 5, 7, 9, 11, and
    # the image's scale min(H, W) / 224; the kernel carries them to the image's grid
    # (blur.scaled_gaussian_kernel1d, tested in tests/test_scaling.py).
    want_sigmas = [0.8, 1.1, 1.4, 1.7, 2.0]
    for s in range(1, 6):
        kind, param, base, ctx = _plan("chestmnist", "gaussian_blur", s, 0)
        for shape, scale in (((112, 150, 3), 0.5), ((224, 224, 3), 1.0)):
            values = sample_values(kind, param, ctx, shape, rng.image_keys(base, 0))
            assert values["kernel_size"] == 2 * s + 1
            assert values["sigma"] == pytest.approx(want_sigmas[s - 1], rel=1e-12)
            assert values["scale"] == scale


def test_gaussian_blur_kernel_scales_half_width_rounded_half_up_above_224():
    # At 336 px (scale 3/2) the half widths 1, 2, 3, 4, 5 of chestmnist's kernels become 1.5,
    # 3, 4.5, 6, 7.5 -> rounded half up 2, 3, 5, 6, 8 -> sizes 5, 7, 11, 13, 17; sigma
    # .8, 1.1, 1.4, 1.7, 2.0 times 3/2; the kernel is then torchvision's for those (scale 1).
    want_sizes = [5, 7, 11, 13, 17]
    want_sigmas = [1.2, 1.65, 2.1, 2.55, 3.0]
    for s in range(1, 6):
        kind, param, base, ctx = _plan("chestmnist", "gaussian_blur", s, 0)
        values = sample_values(kind, param, ctx, (336, 400, 3), rng.image_keys(base, 0))
        assert values["kernel_size"] == want_sizes[s - 1]
        assert values["sigma"] == pytest.approx(want_sigmas[s - 1], rel=1e-12)
        assert values["scale"] == 1.0


def test_motion_angle_uniform_on_plus_minus_45():
    # Spec: the motion angle is U(-45, 45) degrees, one draw per image key.
    kind, param, base, ctx = _plan("pathmnist", "motion_blur", 3, 5)
    angles = np.array([sample_values(kind, param, ctx, (224, 224, 3), k)["angle"]
                       for k in rng.image_keys(base, np.arange(4000))])
    assert angles.min() >= -45 and angles.max() <= 45
    # The extremes of 4000 uniform draws come within 0.1 degree of each end (a miss has
    # probability (1 - 0.1 / 90) ** 4000 ~ 0.012 per end; the keys are fixed, so deterministic).
    assert angles.min() < -44.9 and angles.max() > 44.9
    assert abs(angles.mean()) < 1.5  # sd of the mean 26 / sqrt(4000) = 0.41
    counts = np.histogram(angles, bins=9, range=(-45, 45))[0]
    assert np.all(np.abs(counts - 4000 / 9) < 90)


def test_corrupt_batch_out_parameter():
    rng = np.random.default_rng(5)
    imgs = rng.integers(0, 256, (3, 20, 24, 3), dtype=np.uint8)
    want = mf.corrupt_batch(imgs, "gaussian_noise", 2, dataset="dermamnist", seed=1, start=4)
    out = np.full_like(imgs, 7)
    got = mf.corrupt_batch(imgs, "gaussian_noise", 2, dataset="dermamnist", seed=1, start=4,
                           out=out)
    assert got is out and np.array_equal(out, want)
    gray = imgs[..., 0].copy()
    out2 = np.empty_like(gray)
    assert mf.corrupt_batch(gray, "pixelate", 3, dataset="chestmnist", out=out2) is out2
    assert np.array_equal(out2, mf.corrupt_batch(gray, "pixelate", 3, dataset="chestmnist"))
    for bad, exc, msg in [
        ([[0]], TypeError, "out must be a numpy.ndarray"),
        (np.empty(imgs.shape, np.float32), TypeError, "dtype uint8"),
        (np.empty((3, 20, 24), np.uint8), ValueError, "shape of images"),
        (np.empty((3, 24, 20, 3), np.uint8).transpose(0, 2, 1, 3), ValueError, "C-contiguous"),
        (imgs, ValueError, "share memory"),
    ]:
        with pytest.raises(exc, match=msg):
            mf.corrupt_batch(imgs, "gaussian_noise", 2, dataset="dermamnist", out=bad)
    frozen = np.empty_like(imgs)
    frozen.setflags(write=False)
    with pytest.raises(ValueError, match="writeable"):
        mf.corrupt_batch(imgs, "gaussian_noise", 2, dataset="dermamnist", out=frozen)


def test_corrupt_batch_refuses_a_masked_out():
    """A masked ``out`` is a TypeError naming it: the in-place kernels (noises, colour) wrote
    under its mask, which stayed set, so the returned result was entirely masked (while
    pixelate's item assignment cleared it); the buffer is left untouched."""
    imgs = np.random.default_rng(6).integers(0, 256, (2, 20, 24, 3), dtype=np.uint8)
    for corruption in ("gaussian_noise", "pixelate"):
        data = np.full_like(imgs, 7)
        out = np.ma.masked_array(data, mask=True)
        with pytest.raises(TypeError, match=r"^out must be a plain numpy\.ndarray.*masked array"):
            mf.corrupt_batch(imgs, corruption, 2, dataset="dermamnist", seed=1, out=out)
        assert np.all(data == 7) and np.ma.count_masked(out) == data.size
    # its plain .data view is the documented remedy and works
    data = np.empty_like(imgs)
    got = mf.corrupt_batch(imgs, "gaussian_noise", 2, dataset="dermamnist", seed=1,
                           out=np.ma.masked_array(data, mask=True).data)
    assert np.array_equal(got, mf.corrupt_batch(imgs, "gaussian_noise", 2,
                                                dataset="dermamnist", seed=1))


def test_chunks_run_once_each_on_at_most_the_requested_threads():
    """``_run_chunks`` covers [0, n) exactly once, never runs more chunks at a time than the
    requested thread count (even when the shared pool is larger), and re-raises a chunk's error."""
    from medmnistc_fast import api

    api._pool(6)  # a larger pool than the requests below
    for n, threads in [(1, 4), (5, 2), (40, 2), (40, 3), (7, 7)]:
        lock, active, peak, seen = threading.Lock(), [0], [0], []

        def run(lo, hi):
            with lock:
                active[0] += 1
                peak[0] = max(peak[0], active[0])
                seen.extend(range(lo, hi))
            time.sleep(0.002)
            with lock:
                active[0] -= 1

        api._run_chunks(run, n, threads)
        assert sorted(seen) == list(range(n)), (n, threads)
        assert peak[0] <= min(n, threads), (n, threads, peak[0])

    def fail(lo, hi):
        if lo > 0:
            raise RuntimeError("chunk failed")

    with pytest.raises(RuntimeError, match="chunk failed"):
        api._run_chunks(fail, 20, 3)


def test_thread_pools_do_not_pile_up(rgb224):
    """Batches with varying thread counts and sizes keep at most the largest requested number of
    pool threads alive (one pool per distinct count used to stay alive for each)."""
    from medmnistc_fast import api
    from medmnistc_fast.augment import AugMedMNISTC

    limit = max(5, api._pool_state["size"])  # earlier tests may have used more threads
    aug = AugMedMNISTC("pathmnist", seed=0)
    small = rgb224[:, :32, :32]
    for threads in (2, 3, 4, 5, 3, 2):
        for n in (2, 3, 5):
            batch = np.stack([small[i % len(small)] for i in range(n)])
            mf.corrupt_batch(batch, "pixelate", 2, dataset="pathmnist", num_threads=threads)
            aug.batch(batch, num_threads=threads)

    def alive():
        return sum(t.name.startswith("medmnistc_fast") for t in threading.enumerate())

    deadline = time.monotonic() + 10
    while alive() > limit and time.monotonic() < deadline:
        time.sleep(0.05)
    assert alive() <= limit


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_threaded_batch_in_a_forked_child(rgb224):
    """After the parent ran a threaded batch, a fork-started child (a DataLoader or
    multiprocessing worker) gets the same bytes instead of waiting forever on the parent's
    pool threads, which do not exist in the child (found by a newcomer trial)."""
    import warnings
    from medmnistc_fast.augment import AugMedMNISTC

    batch = rgb224[:4, :128, :128]
    aug = AugMedMNISTC("pathmnist", seed=1)
    want = (mf.corrupt_batch(batch, "motion_blur", 3, dataset="pathmnist", seed=0, num_threads=2),
            aug.batch(batch, num_threads=2))
    read_end, write_end = os.pipe()
    with warnings.catch_warnings():  # Python >= 3.12 warns on forking a threaded process
        warnings.simplefilter("ignore", DeprecationWarning)
        pid = os.fork()
    if pid == 0:  # child: report the bytes' digests, never return into pytest
        try:
            got = (mf.corrupt_batch(batch, "motion_blur", 3, dataset="pathmnist", seed=0,
                                    num_threads=2),
                   AugMedMNISTC("pathmnist", seed=1).batch(batch, num_threads=2))
            os.write(write_end, b"".join(zlib.crc32(g.tobytes()).to_bytes(4, "big")
                                         for g in got))
        finally:
            os._exit(0)
    os.close(write_end)
    deadline = time.monotonic() + 60
    while os.waitpid(pid, os.WNOHANG) == (0, 0):
        if time.monotonic() > deadline:
            os.kill(pid, 9)
            os.waitpid(pid, 0)
            pytest.fail("the forked child's corrupt_batch did not finish within 60 s")
        time.sleep(0.05)
    with os.fdopen(read_end, "rb") as f:
        assert f.read() == b"".join(zlib.crc32(w.tobytes()).to_bytes(4, "big") for w in want)


def test_import_and_run_without_a_writable_numba_cache():
    """Where Numba has no cache location (read-only install, no writable user cache) the import
    still works, warns once with the fix (NUMBA_CACHE_DIR), and the Numba kernels run uncached.
    Simulated in a subprocess by removing Numba's cache locators."""
    import subprocess
    import sys

    code = (
        "import warnings, numpy as np\n"
        "import numba.core.caching as c\n"
        "if not hasattr(c.CacheImpl, '_locator_classes'): raise SystemExit(77)\n"
        "c.CacheImpl._locator_classes = []\n"
        "with warnings.catch_warnings(record=True) as w:\n"
        "    warnings.simplefilter('always')\n"
        "    import medmnistc_fast as mf\n"
        "msgs = [str(x.message) for x in w if issubclass(x.category, RuntimeWarning)]\n"
        "assert len(msgs) == 1 and 'NUMBA_CACHE_DIR' in msgs[0], msgs\n"
        "from medmnistc_fast import _config\n"
        "assert _config.NJIT['cache'] is False\n"
        "img = np.full((32, 32, 3), 128, np.uint8)\n"
        "out = mf.corrupt(img, 'bubble', 3, dataset='pathmnist', seed=1)\n"
        "assert out.shape == img.shape and not np.array_equal(out, img)\n"
        "print('ok')\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    if proc.returncode == 77:
        pytest.skip("this Numba version keeps its cache locators elsewhere")
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stderr[-2000:]


def test_chunk_error_waits_for_every_thread():
    """When a chunk fails, ``_run_chunks`` raises only after the other threads have finished,
    so nothing still writes into a caller's ``out`` afterwards."""
    from medmnistc_fast import api

    finished = []

    def run(lo, hi):
        if lo == 0:
            raise RuntimeError("first chunk failed")
        time.sleep(0.05)
        finished.append(lo)

    with pytest.raises(RuntimeError, match="first chunk failed"):
        api._run_chunks(run, 8, 2)
    count = len(finished)
    time.sleep(0.2)
    assert len(finished) == count == 7  # 8 chunks of 1; the other 7 all ran, before the raise


def test_concurrent_batches_with_growing_thread_counts(rgb224):
    """Callers in several threads, each asking for more threads than the last (so the shared
    pool is replaced while others still submit to it), all finish with the single-thread bytes."""
    batch = np.stack([rgb224[i % len(rgb224)][:40, :40] for i in range(6)])
    expected = mf.corrupt_batch(batch, "gaussian_noise", 3, dataset="dermamnist", seed=5,
                                num_threads=1)
    errors, results = [], []

    def caller(k):
        try:
            for t in range(2, 9):
                results.append(mf.corrupt_batch(batch, "gaussian_noise", 3, dataset="dermamnist",
                                                seed=5, num_threads=t + 8 * k))
        except Exception as e:  # collected, asserted below
            errors.append(e)

    callers = [threading.Thread(target=caller, args=(k,)) for k in range(3)]
    for c in callers:
        c.start()
    for c in callers:
        c.join()
    assert not errors and len(results) == 21
    assert all(np.array_equal(r, expected) for r in results)


def test_registry_tables_are_read_only():
    # Shared by every call in the process: an edit must raise, not change later outputs.
    from medmnistc_fast import registry

    before = mf.severity_table("dermamnist", "pixelate")
    with pytest.raises(TypeError):
        registry.TABLES["dermamnist"]["pixelate"] = (0.1,) * 5
    with pytest.raises(TypeError):
        registry.TABLES["newmnist"] = {}
    for table in (mf.FOLDS, registry.RGB, registry.TASKS, registry.N_CLASSES,
                  registry.REFERENCE_SIZES):
        with pytest.raises(TypeError):
            table["x"] = 1
    assert mf.severity_table("dermamnist", "pixelate") == before
    # a variant is a copy away
    assert dict(registry.TABLES["dermamnist"])["pixelate"] == before


def test_plan_cache_keeps_the_checks_and_fresh_seeds():
    # _plan caches results for exact str / int arguments; other types still go through the
    # checks, and seed=None still draws a fresh seed for the random kinds.
    assert _plan("pathmnist", "defocus_blur", 3, 0) is _plan("pathmnist", "defocus_blur", 3, 0)
    with pytest.raises(TypeError, match="severity must be an int"):
        _plan("pathmnist", "defocus_blur", True, 0)
    with pytest.raises(TypeError, match="severity must be an int"):
        _plan("pathmnist", "defocus_blur", 3.0, 0)
    assert _plan("pathmnist", "defocus_blur", np.int64(3), 0)[1] == (5, 0.2)
    with pytest.raises(ValueError):
        _plan("pathmnist", "defocus_blur", 3, -1)
    with pytest.raises(ValueError):
        _plan("pathmnist", "gaussian_noise", 3, 0)  # not a pathmnist corruption
    keys = {_plan("dermamnist", "gaussian_noise", 3, None)[2] for _ in range(4)}
    assert len(keys) == 4
    assert _plan("dermamnist", "gaussian_noise", 3, 7)[2] == _plan("dermamnist", "gaussian_noise",
                                                                    3, 7)[2]


def test_sample_values_hands_out_a_new_dict_each_call():
    kind, param, base, ctx = _plan("pathmnist", "defocus_blur", 5, 0)
    first = sample_values(kind, param, ctx, (224, 224, 3), 0)
    assert first == {"radius": 7.0, "alias_sigma": 0.3, "scale": 1.0}  # the table's (7, .3)
    first["radius"] = 1.0
    assert sample_values(kind, param, ctx, (224, 224, 3), 0)["radius"] == 7.0
    # another shape, other values: 112 px halves the scale
    assert sample_values(kind, param, ctx, (112, 112, 3), 0)["scale"] == 0.5


def test_deterministic_values_are_immutable():
    # sample_values caches a deterministic kind's values per shape and hands out shallow
    # copies: that is safe only while every value is a number or a tuple of numbers.
    for dataset in mf.DATASETS + ("pathology96", "pathology224"):
        for corruption in mf.corruptions(dataset):
            for level in range(1, 6):
                kind, param, base, ctx = _plan(dataset, corruption, level, 0)
                if kind.random:
                    continue
                for value in sample_values(kind, param, ctx, (64, 80, 3), 0).values():
                    items = value if isinstance(value, tuple) else (value,)
                    assert all(isinstance(x, (int, float)) for x in items), (dataset, corruption)
