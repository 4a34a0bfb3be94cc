"""End-to-end tests of ``medmnistc_fast.generate`` on small real MedMNIST-format files.

Inputs are written with :func:`medmnistc_fast.sample.sample_split` (real images from
scikit-image and pydicom) at 32 px: an RGB dataset saved with ``numpy.savez_compressed``
(deflated members: the unpack path) and a gray one with ``numpy.savez`` (stored members: the
direct-read path).
"""
import hashlib
import io
import json
import os
import re
import subprocess
import sys
import zipfile
import zlib

import numpy as np
import pytest

import medmnistc_fast as mf
from medmnistc_fast import _npz
from medmnistc_fast.datasets import CorruptedSet
from medmnistc_fast.generate import (generate, input_path, load_images, output_dir,
                                     preview_cell, render_preview)
from medmnistc_fast.sample import sample_split

SIZE = 32
N = 12
SEED = 5
RGB_DS, GRAY_DS = "dermamnist", "chestmnist"   # 15 and 13 corruptions; chest has 14 labels


def sha(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def read_json(path):
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def tree(root):
    """{relative path: sha256} of every file below ``root``."""
    out = {}
    for d, _, files in os.walk(root):
        for name in files:
            p = os.path.join(d, name)
            out[os.path.relpath(p, root)] = sha(p)
    return out


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    r = tmp_path_factory.mktemp("medmnist")
    np.savez_compressed(input_path(r, RGB_DS, SIZE), **sample_split(RGB_DS, SIZE, N))
    np.savez(input_path(r, GRAY_DS, SIZE), **sample_split(GRAY_DS, SIZE, N))
    return r


@pytest.fixture(scope="module")
def reference(root, tmp_path_factory):
    """One uninterrupted in-process run of both datasets: the bytes everything must match."""
    out = tmp_path_factory.mktemp("ref")
    res = generate([RGB_DS, GRAY_DS], out, root=root, size=SIZE, seed=SEED, workers=1)
    return out, res


# ----------------------------------------------------------------------------- content and order
@pytest.mark.parametrize("dataset", [RGB_DS, GRAY_DS])
def test_content_order_and_manifest(reference, dataset):
    out, _ = reference
    clean = sample_split(dataset, SIZE, N)
    X, y = clean["test_images"], clean["test_labels"]
    d = output_dir(out, dataset)
    manifest = read_json(os.path.join(d, "manifest.json"))
    assert manifest["version"] == mf.__version__ and manifest["seed"] == SEED
    assert manifest["size"] == SIZE and manifest["split"] == "test"
    assert list(manifest["files"]) == list(mf.corruptions(dataset))
    assert sorted(os.listdir(d)) == sorted([f"{c}.npz" for c in mf.corruptions(dataset)]
                                           + ["manifest.json"])
    for c in mf.corruptions(dataset):
        path = os.path.join(d, f"{c}.npz")
        entry = manifest["files"][c]
        assert entry["sha256"] == sha(path) and entry["bytes"] == os.path.getsize(path)
        assert entry["table"] == json.loads(json.dumps(list(mf.severity_table(dataset, c))))
        with np.load(path, allow_pickle=False) as z:
            assert sorted(z.files) == ["test_images", "test_labels"]
            imgs, labs = z["test_images"], z["test_labels"]
        assert imgs.dtype == np.uint8 and imgs.shape == (5 * N,) + X.shape[1:]
        assert labs.dtype == y.dtype and labs.shape == (5 * N, y.shape[1])
        np.testing.assert_array_equal(labs, np.tile(y, (5, 1)))
        for s in range(5):
            want = mf.corrupt_batch(X, c, s + 1, dataset=dataset, seed=SEED)
            np.testing.assert_array_equal(imgs[s * N:(s + 1) * N], want, err_msg=f"{c} s{s + 1}")


def test_input_checksum_recorded(root, reference):
    out, _ = reference
    for ds in (RGB_DS, GRAY_DS):
        m = read_json(os.path.join(output_dir(out, ds), "manifest.json"))
        assert m["input"]["sha256"] == sha(input_path(root, ds, SIZE))
        assert m["input"]["file"] == os.path.basename(input_path(root, ds, SIZE))


# ------------------------------------------------------------------------ reproducibility
def test_workers_and_chunks_byte_identical(root, reference, tmp_path):
    out, _ = reference
    generate([RGB_DS, GRAY_DS], tmp_path, root=root, size=SIZE, seed=SEED, workers=2,
             chunk_size=5)
    assert tree(tmp_path) == tree(out)


def test_pool_chunk_path_byte_identical(root, reference, tmp_path):
    """Fewer files than two per worker: the pool splits files into chunks that workers pwrite
    and the parent hashes (the other pool path writes whole files per worker)."""
    out, _ = reference
    few = mf.corruptions(RGB_DS)[:3]
    res = generate(RGB_DS, tmp_path, root=root, size=SIZE, seed=SEED, workers=2, chunk_size=7,
                   corruptions=",".join(few))
    assert res[0]["written"] == list(few)
    ref = read_json(os.path.join(output_dir(out, RGB_DS), "manifest.json"))["files"]
    got = read_json(os.path.join(output_dir(tmp_path, RGB_DS), "manifest.json"))["files"]
    for c in few:
        assert got[c]["sha256"] == ref[c]["sha256"]
        with open(os.path.join(output_dir(tmp_path, RGB_DS), f"{c}.npz"), "rb") as f:
            assert hashlib.sha256(f.read()).hexdigest() == ref[c]["sha256"]


def test_dask_local_cluster_byte_identical(root, reference, tmp_path):
    distributed = pytest.importorskip("dask.distributed",
                                      reason="dask[distributed] not installed (test extra)")
    out, _ = reference
    # The scheduler's HTTP server on a free loopback port: dashboard_address=None still means
    # the default :8787, and while another run holds that port the cluster's start warns that
    # it is taken and leaves the refused socket unclosed (errors under filterwarnings=error;
    # distributed 2024.1 through 2026.8).
    with distributed.LocalCluster(n_workers=2, processes=True, threads_per_worker=1,
                                  dashboard_address="127.0.0.1:0") as cluster, \
            distributed.Client(cluster) as client:
        generate([RGB_DS, GRAY_DS], tmp_path, root=root, size=SIZE, seed=SEED,
                 scheduler=client, chunk_size=25)
    assert tree(tmp_path) == tree(out)


def test_compressed_members(root, reference, tmp_path):
    out, _ = reference
    a, b = tmp_path / "a", tmp_path / "b"
    generate(RGB_DS, a, root=root, size=SIZE, seed=SEED, workers=1, compress=True)
    generate(RGB_DS, b, root=root, size=SIZE, seed=SEED, workers=2, compress=True, chunk_size=4)
    assert tree(a) == tree(b)
    for c in mf.corruptions(RGB_DS):
        p = os.path.join(output_dir(a, RGB_DS), f"{c}.npz")
        with zipfile.ZipFile(p) as zf:
            assert zf.testzip() is None
            assert all(i.compress_type == zipfile.ZIP_DEFLATED for i in zf.infolist())
        with np.load(p) as z1, np.load(os.path.join(output_dir(out, RGB_DS), f"{c}.npz")) as z2:
            np.testing.assert_array_equal(z1["test_images"], z2["test_images"])
            np.testing.assert_array_equal(z1["test_labels"], z2["test_labels"])
    m = read_json(os.path.join(output_dir(a, RGB_DS), "manifest.json"))
    assert m["compression"] == "deflate-1"


def test_zarr_round_trip(root, reference, tmp_path):
    zarr = pytest.importorskip("zarr", reason="zarr not installed (test extra)")
    out, _ = reference
    res = generate(GRAY_DS, tmp_path, root=root, size=SIZE, seed=SEED, workers=2,
                   fmt="zarr", chunk_size=8, corruptions="pixelate,gaussian_noise,gamma_corr_up")
    d = output_dir(tmp_path, GRAY_DS)
    m = read_json(os.path.join(d, "manifest.json"))
    assert list(m["files"]) == ["pixelate", "gaussian_noise", "gamma_corr_up"]
    for c, entry in m["files"].items():
        g = zarr.open_group(store=os.path.join(d, f"{c}.zarr"), mode="r")
        imgs, labs = g["test_images"], g["test_labels"]
        assert imgs.chunks[0] == 8 and entry["chunk_rows"] == 8
        with np.load(os.path.join(output_dir(out, GRAY_DS), f"{c}.npz")) as z:
            np.testing.assert_array_equal(imgs[...], z["test_images"])
            np.testing.assert_array_equal(labs[...], z["test_labels"])
        assert g.attrs["corruption"] == c and g.attrs["seed"] == SEED
    assert res[0]["written"] == ["pixelate", "gaussian_noise", "gamma_corr_up"]
    again = generate(GRAY_DS, tmp_path, root=root, size=SIZE, seed=SEED, workers=1, fmt="zarr",
                     chunk_size=8, corruptions="pixelate,gaussian_noise,gamma_corr_up")
    assert again[0]["written"] == [] and len(again[0]["skipped"]) == 3


# ---------------------------------------------------------------------------- subsets, splits
def test_severities_forms():
    # one level as an int (numpy ints too) means what the str "3" means; a bool is not a level
    from medmnistc_fast.generate import _resolve_severities
    assert _resolve_severities(3) == _resolve_severities("3") == (3,)
    assert _resolve_severities(np.int64(5)) == (5,)
    assert _resolve_severities([4, 2, 4]) == _resolve_severities("4,2,4") == (2, 4)
    assert _resolve_severities(None) == (1, 2, 3, 4, 5)
    with pytest.raises(TypeError, match="severities must be a sequence"):
        _resolve_severities(True)
    with pytest.raises(ValueError, match=r"severities must hold ints in 1\.\.5; got 6"):
        _resolve_severities(6)


def test_severities_take_what_the_package_calls_an_int():
    # generate's own isinstance test took only int and NumPy ints, alone and as items, where
    # CorruptedSet's severity= (datasets._check_severities) takes any numbers.Integral but bool
    import numbers

    from medmnistc_fast.datasets import _check_severities
    from medmnistc_fast.generate import _resolve_severities

    class Level:  # an int-like registered as numbers.Integral, as sympy's Integer is
        def __init__(self, v):
            self.v = v

        def __index__(self):
            return self.v

        __int__ = __index__

        def __le__(self, other):
            return self.v <= other

        def __ge__(self, other):
            return self.v >= other

    numbers.Integral.register(Level)
    assert _check_severities(Level(4)) == (4,) and _check_severities([Level(2)]) == (2,)
    assert _resolve_severities(Level(4)) == (4,)
    assert _resolve_severities([Level(4), 2]) == (2, 4)


def test_severity_subset_and_val_split(root, tmp_path):
    res = generate(GRAY_DS, tmp_path, root=root, size=SIZE, seed=SEED, workers=1,
                   corruptions=["contrast_down", "pixelate"], severities="4,2,4", split="val")
    d = output_dir(tmp_path, GRAY_DS, "val")
    assert d.endswith(f"{GRAY_DS}_val") and res[0]["written"] == ["pixelate", "contrast_down"]
    X = sample_split(GRAY_DS, SIZE, N)["val_images"]
    with np.load(os.path.join(d, "contrast_down.npz")) as z:
        assert sorted(z.files) == ["val_images", "val_labels"]
        imgs = z["val_images"]
        assert imgs.shape == (2 * N, SIZE, SIZE) and z["val_labels"].shape == (2 * N, 14)
    for k, s in enumerate((2, 4)):
        np.testing.assert_array_equal(imgs[k * N:(k + 1) * N], mf.corrupt_batch(
            X, "contrast_down", s, dataset=GRAY_DS, seed=SEED))
    m = read_json(os.path.join(d, "manifest.json"))
    assert m["files"]["contrast_down"]["severities"] == [2, 4]
    assert m["files"]["contrast_down"]["table"] == [0.8, 0.6]


def test_sample_source(tmp_path):
    res = generate("pathmnist", tmp_path, sample=True, sample_n=6, size=SIZE, seed=1,
                   workers=1, corruptions="bubble")
    with np.load(os.path.join(res[0]["dir"], "bubble.npz")) as z:
        imgs, labs = z["test_images"], z["test_labels"]
    assert imgs.shape == (30, SIZE, SIZE, 3)
    assert res[0]["manifest"]["input"]["source"] == "sample"
    # The content, not only the shape: the sample's test split (6 images), corrupted severity
    # by severity with seed 1, labels tiled five times.
    clean = sample_split("pathmnist", SIZE, 6)
    np.testing.assert_array_equal(labs, np.tile(clean["test_labels"], (5, 1)))
    for s in range(5):
        np.testing.assert_array_equal(imgs[6 * s:6 * (s + 1)], mf.corrupt_batch(
            clean["test_images"], "bubble", s + 1, dataset="pathmnist", seed=1))


def test_dataset_without_the_requested_corruptions_is_named(tmp_path):
    """With several datasets and a corruption subset, a dataset that has none of them is
    skipped with a warning naming it (it used to vanish from the run without a word)."""
    with pytest.warns(UserWarning, match=r"octmnist: none of the requested corruptions apply "
                                         r"\(bubble\); skipped"):
        res = generate(["pathmnist", "octmnist"], tmp_path, sample=True, sample_n=2, size=SIZE,
                       workers=1, corruptions="bubble")
    assert [r["dir"] for r in res] == [os.path.join(str(tmp_path), "pathmnist")]
    assert not os.path.exists(os.path.join(str(tmp_path), "octmnist"))


def test_script_from_stdin_runs_in_process(tmp_path, monkeypatch):
    """A script read from standard input (``python -``, ``__file__ == '<stdin>'``) cannot be
    imported by pool workers: workers=2 is refused before anything starts, naming workers (it
    used to end in a traceback and BrokenProcessPool); the default runs in this process."""
    monkeypatch.setattr(sys.modules["__main__"], "__file__", "<stdin>", raising=False)
    kw = dict(sample=True, sample_n=2, size=SIZE, corruptions="bubble")
    with pytest.raises(ValueError, match=r"workers must be 1 here: .*'<stdin>' is not a file.*"
                                         r"got workers=2"):
        generate("pathmnist", tmp_path / "a", workers=2, **kw)
    assert not (tmp_path / "a").exists()
    res = generate("pathmnist", tmp_path / "b", **kw)
    assert res[0]["written"] == ["bubble"]


def test_unguarded_script_names_the_main_guard(tmp_path):
    """A script calling generate at its top level (no ``if __name__ == "__main__":``) with pool
    workers: each worker re-ran it on start, and its second run stopped at the output folder's
    lock with "being written by another generate run". The workers now say what is wrong, and
    so does the script's own call (it ended in a bare BrokenProcessPool), which also removes the
    dataset folder it made, where nothing had finished (it left one holding only a manifest)."""
    import subprocess

    script = tmp_path / "unguarded.py"
    script.write_text("from medmnistc_fast.generate import generate\n"
                      "generate('breastmnist', 'out', sample=True, sample_n=2, size=28, "
                      "workers=2, corruptions='pixelate')\n")
    env = dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(mf.__file__)))
    r = subprocess.run([sys.executable, str(script)], cwd=tmp_path, env=env, timeout=300,
                       capture_output=True, text=True)
    assert r.returncode != 0
    assert "RuntimeError: generate was called while a worker process" in r.stderr
    assert "`if __name__ == '__main__':`" in r.stderr
    assert "being written by another generate run" not in r.stderr
    last = r.stderr.strip().splitlines()[-1]
    assert last.startswith("medmnistc_fast.generate.WorkerDiedError: a worker process of "
                           "generate died"), last
    assert "`if __name__ == '__main__':`" in last
    assert not (tmp_path / "out" / "breastmnist").exists()


def test_unknown_corruption_lists_valid_names_quoted(tmp_path):
    with pytest.raises(ValueError, match=r"corruption 'gaussian_noise' is not defined for dataset "
                                         r"'pathmnist'; valid corruptions: 'pixelate', "):
        generate("pathmnist", tmp_path, sample=True, corruptions="gaussian_noise")


# ----------------------------------------------------------------------------- resume, safety
def test_resume_repairs_and_cleans(root, reference, tmp_path):
    out, _ = reference
    generate(GRAY_DS, tmp_path, root=root, size=SIZE, seed=SEED, workers=1)
    d = output_dir(tmp_path, GRAY_DS)
    with open(os.path.join(d, "pixelate.npz"), "r+b") as f:     # damage one file
        f.seek(200)
        f.write(b"\x00\x01\x02")
    os.remove(os.path.join(d, "gamma_corr_up.npz"))              # lose another
    stale = os.path.join(d, ".shot_noise.npz.0123456789ab.tmp")  # leftover of a killed run
    open(stale, "wb").close()
    res = generate(GRAY_DS, tmp_path, root=root, size=SIZE, seed=SEED, workers=1)
    assert res[0]["written"] == ["pixelate", "gamma_corr_up"]
    assert len(res[0]["skipped"]) == 11
    assert res[0]["removed_temps"] == [os.path.basename(stale)]
    assert tree(d) == tree(output_dir(out, GRAY_DS))


def test_finished_output_is_not_rewritten(root, tmp_path, monkeypatch):
    # Re-running a finished command writes nothing (the manifest keeps its inode), so it also
    # works on a read-only copy of the output; simulated by making every write fail (root
    # ignores permission bits).
    import errno

    import medmnistc_fast.generate as gen

    generate(GRAY_DS, tmp_path, root=root, size=SIZE, seed=SEED, workers=1,
             corruptions="pixelate,contrast_up")
    manifest = os.path.join(output_dir(tmp_path, GRAY_DS), "manifest.json")
    inode, before = os.stat(manifest).st_ino, tree(tmp_path)

    def read_only(path, text):
        raise OSError(errno.EROFS, "Read-only file system", path)

    monkeypatch.setattr(gen, "_write_text_atomic", read_only)
    res = generate(GRAY_DS, tmp_path, root=root, size=SIZE, seed=SEED, workers=1,
                   corruptions="pixelate,contrast_up")
    assert res[0]["written"] == [] and res[0]["skipped"] == ["pixelate", "contrast_up"]
    assert os.stat(manifest).st_ino == inode and tree(tmp_path) == before
    # anything new to record still needs the write
    with pytest.raises(OSError, match="Read-only"):
        generate(GRAY_DS, tmp_path, root=root, size=SIZE, seed=SEED, workers=1,
                 corruptions="pixelate,gamma_corr_up")


def test_later_run_keeps_files_of_earlier_corruptions(root, reference, tmp_path):
    # Generating more corruptions into a folder keeps the manifest entries (and files) of those
    # generated before and not requested again; the manifest lists them in table order.
    out, _ = reference
    generate(GRAY_DS, tmp_path, root=root, size=SIZE, seed=SEED, workers=1,
             corruptions="pixelate,contrast_up")
    d = output_dir(tmp_path, GRAY_DS)
    first = read_json(os.path.join(d, "manifest.json"))["files"]
    res = generate(GRAY_DS, tmp_path, root=root, size=SIZE, seed=SEED, workers=1,
                   corruptions="jpeg_compression")
    assert res[0]["written"] == ["jpeg_compression"]
    files = read_json(os.path.join(d, "manifest.json"))["files"]
    assert list(files) == ["pixelate", "jpeg_compression", "contrast_up"]
    assert files["pixelate"] == first["pixelate"] and files["contrast_up"] == first["contrast_up"]
    ref = tree(output_dir(out, GRAY_DS))
    for name in ("pixelate.npz", "jpeg_compression.npz", "contrast_up.npz"):
        assert sha(os.path.join(d, name)) == ref[name]
        assert files[name.split(".")[0]]["sha256"] == ref[name]
    # and a third run of an earlier corruption skips it, keeping all three
    res = generate(GRAY_DS, tmp_path, root=root, size=SIZE, seed=SEED, workers=1,
                   corruptions="contrast_up")
    assert res[0]["written"] == [] and res[0]["skipped"] == ["contrast_up"]
    assert list(read_json(os.path.join(d, "manifest.json"))["files"]) == [
        "pixelate", "jpeg_compression", "contrast_up"]


def test_other_parameters_refused_then_overwritten(root, tmp_path):
    generate(GRAY_DS, tmp_path, root=root, size=SIZE, seed=SEED, workers=1,
             corruptions="pixelate")
    before = tree(tmp_path)
    with pytest.raises(ValueError, match=r"seed=5 \(now 6\).*--overwrite"):
        generate(GRAY_DS, tmp_path, root=root, size=SIZE, seed=6, workers=1)
    assert tree(tmp_path) == before
    res = generate(GRAY_DS, tmp_path, root=root, size=SIZE, seed=6, workers=1,
                   corruptions="pixelate", overwrite=True)
    assert res[0]["written"] == ["pixelate"] and res[0]["manifest"]["seed"] == 6


def test_library_versions_recorded_and_compared(root, tmp_path, monkeypatch):
    """The manifest records the versions the bytes depend on; a resumed run under other versions
    is refused (it would mix bytes of two setups in one output), and a manifest from before they
    were recorded is still resumed."""
    import PIL
    import scipy

    from medmnistc_fast import generate as gen

    generate(GRAY_DS, tmp_path, root=root, size=SIZE, seed=SEED, workers=1,
             corruptions="pixelate")
    path = os.path.join(output_dir(tmp_path, GRAY_DS), "manifest.json")
    env = read_json(path)["environment"]
    assert env["pillow"] == PIL.__version__ and env["scipy"] == scipy.__version__
    assert env["numpy"] == np.__version__ and set(env) == {
        "pillow", "libjpeg_turbo", "freetype2", "scipy", "numpy"}
    before = tree(tmp_path)
    real = gen.byte_environment
    monkeypatch.setattr(gen, "byte_environment", lambda: {**real(), "pillow": "11.0.0"})
    with pytest.raises(ValueError, match=r"pillow='%s' \(now '11\.0\.0'\).*--overwrite"
                       % re.escape(PIL.__version__)):
        generate(GRAY_DS, tmp_path, root=root, size=SIZE, seed=SEED, workers=1,
                 corruptions="pixelate")
    assert tree(tmp_path) == before
    monkeypatch.setattr(gen, "byte_environment", real)
    m = read_json(path)
    del m["environment"]
    with open(path, "w") as f:
        json.dump(m, f)
    res = generate(GRAY_DS, tmp_path, root=root, size=SIZE, seed=SEED, workers=1,
                   corruptions="pixelate")
    assert res[0]["skipped"] == ["pixelate"]


def test_write_errors_name_the_output_folder(root, tmp_path, monkeypatch):
    """A write error that names no file ("[Errno 28] No space left on device", also raised in a
    worker) now says which output folder it happened in; errors naming a file are untouched."""
    import errno

    from medmnistc_fast import generate as gen

    def full(self):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(gen._DatasetRun, "write_side_files", full)
    with pytest.raises(OSError, match=r"No space left on device, writing in .*%s$"
                       % re.escape(os.path.join("ref_out", GRAY_DS))) as info:
        generate(GRAY_DS, tmp_path / "ref_out", root=root, size=SIZE, seed=SEED, workers=1,
                 corruptions="pixelate")
    assert info.value.errno == errno.ENOSPC

    def missing(self):
        raise FileNotFoundError(errno.ENOENT, "gone", "/some/file")

    monkeypatch.setattr(gen._DatasetRun, "write_side_files", missing)
    with pytest.raises(FileNotFoundError) as info:
        generate(GRAY_DS, tmp_path / "other", root=root, size=SIZE, seed=SEED, workers=1,
                 corruptions="pixelate")
    assert info.value.filename == "/some/file" and info.value.strerror == "gone"

    def refused(self):  # a worker pool that could not start: not a storage error
        raise ConnectionRefusedError(errno.ECONNREFUSED, "Connection refused")

    monkeypatch.setattr(gen._DatasetRun, "write_side_files", refused)
    with pytest.raises(ConnectionRefusedError, match=r"^\[Errno 111\] Connection refused$"):
        generate(GRAY_DS, tmp_path / "third", root=root, size=SIZE, seed=SEED, workers=1,
                 corruptions="pixelate")


def test_write_errors_name_the_output_not_its_temporary_file(root, tmp_path, monkeypatch):
    """An error on an output's temporary file (a read-only output folder) named only
    '.pixelate.npz.{12 hex}.tmp'; it names the output file now, with the same errno and type.
    Temporary files that are not outputs (the unpacked input) keep the OS's message."""
    import errno

    from medmnistc_fast import generate as gen

    def denied(self, job, entry, f):
        if f is not None:
            f.close()
        raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), job.tmp)

    monkeypatch.setattr(gen._DatasetRun, "commit_job", denied)
    out = tmp_path / "out"
    with pytest.raises(PermissionError) as info:
        generate(GRAY_DS, out, root=root, size=SIZE, seed=SEED, workers=1,
                 corruptions="pixelate")
    final = os.path.join(str(out), GRAY_DS, "pixelate.npz")
    assert str(info.value) == (f"[Errno {errno.EACCES}] cannot write {final!r}: "
                               f"{os.strerror(errno.EACCES)}")
    assert info.value.errno == errno.EACCES
    d = os.path.join(str(out), GRAY_DS)
    inside = os.path.join(d, ".bubble.zarr.0123456789ab.tmp", "test_images", "c", "0")
    assert gen._output_of_temp(d, inside) == os.path.join(d, "bubble.zarr")
    assert gen._output_of_temp(d, os.path.join(d, ".input-test.0123456789ab.tmp")) is None
    assert gen._output_of_temp(d, os.path.join(d, "pixelate.npz")) is None
    assert gen._output_of_temp(d, "/elsewhere/.x.npz.0123456789ab.tmp") is None


def test_chunk_size_bounded_by_memory(root, tmp_path):
    """A chunk over 1 GiB of images is refused before anything is written (it voided the bound
    on memory: up to 2 x workers + 1 chunks are in flight); 1 GiB exactly is accepted."""
    per = SIZE * SIZE  # gray images
    most = (1 << 30) // per
    with pytest.raises(ValueError, match=r"chunk_size must be at most %d rows for %s's %s-byte "
                                         r"images \(1024 MiB a chunk\); got %d$"
                       % (most, GRAY_DS, f"{per:,}", most + 1)):
        generate(GRAY_DS, tmp_path / "x", root=root, size=SIZE, seed=SEED, workers=1,
                 corruptions="pixelate", chunk_size=most + 1)
    assert not (tmp_path / "x").exists()
    res = generate(GRAY_DS, tmp_path / "y", root=root, size=SIZE, seed=SEED, workers=1,
                   corruptions="pixelate", chunk_size=most)
    assert res[0]["written"] == ["pixelate"]


def test_dask_workers_must_match_versions():
    from medmnistc_fast import generate as gen

    mine = gen._worker_environment()
    gen._DaskRunner._check_workers({"tcp://a:1": dict(mine), "tcp://b:2": dict(mine)})
    other = {**mine, "pillow": "11.0.0", "medmnistc_fast": "0.0.1"}
    with pytest.raises(RuntimeError, match=r"tcp://b:2: medmnistc_fast='0\.0\.1' \(now .*\), "
                                           r"pillow='11\.0\.0' \(now"):
        gen._DaskRunner._check_workers({"tcp://a:1": dict(mine), "tcp://b:2": other})


def test_unusable_dask_cluster_writes_nothing(root, tmp_path):
    # A Dask cluster is reached, and its workers' versions checked, before anything is written:
    # an unreachable address ("Timed out trying to connect ... after 30 s") or workers of
    # other versions used to leave {out}/{flag}/manifest.json behind, unlike every other bad
    # input (a missing scheduler file included).
    pytest.importorskip("dask.distributed", reason="dask[distributed] not installed (test extra)")

    class OtherVersions:  # stands in for a dask.distributed.Client
        def submit(self, *args, **kwargs):
            raise AssertionError("no task may be submitted")

        def nthreads(self):
            return {"tcp://w:1": 1}

        def run(self, fn):
            return {"tcp://w:1": dict(fn(), medmnistc_fast="0.0.1")}

    with pytest.raises(RuntimeError, match="Dask workers must run the versions"):
        generate(GRAY_DS, tmp_path / "out", root=root, size=SIZE, scheduler=OtherVersions(),
                 corruptions="pixelate")
    assert not (tmp_path / "out").exists()


def test_failed_start_keeps_what_another_run_wrote_beside_it(root, reference, tmp_path):
    """The cleanup of a run that fails before writing (here: Dask workers of other versions,
    after a 30 s connection timeout in the field) removed the whole ``out`` it had created,
    with the finished files another run had written into ``{out}/{other dataset}/`` since."""
    pytest.importorskip("dask.distributed", reason="dask[distributed] not installed (test extra)")
    out = tmp_path / "out"
    ref_dir, _ = reference

    class OtherVersions:  # stands in for a Client; meanwhile=True: another run writes RGB_DS
        def __init__(self, meanwhile):
            self.meanwhile = meanwhile

        def submit(self, *args, **kwargs):
            raise AssertionError("no task may be submitted")

        def nthreads(self):
            return {"tcp://w:1": 1}

        def run(self, fn):
            if self.meanwhile:
                generate(RGB_DS, out, root=root, size=SIZE, seed=SEED, workers=1)
            return {"tcp://w:1": dict(fn(), medmnistc_fast="0.0.1")}

    with pytest.raises(RuntimeError, match="Dask workers must run the versions"):
        generate(GRAY_DS, out, root=root, size=SIZE, scheduler=OtherVersions(True),
                 corruptions="pixelate")
    assert sorted(os.listdir(out)) == [RGB_DS]      # the failed run's own folder is gone
    assert tree(out / RGB_DS) == tree(ref_dir / RGB_DS)
    # alone, a failed start still leaves nothing, nested folders it created included
    with pytest.raises(RuntimeError, match="Dask workers must run the versions"):
        generate(GRAY_DS, tmp_path / "a" / "b", root=root, size=SIZE, split="val",
                 scheduler=OtherVersions(False), corruptions="pixelate")
    assert not (tmp_path / "a").exists()


def test_dask_worker_joining_after_the_check_is_refused(root, tmp_path, monkeypatch):
    # The versions were checked once, on the workers present when generate started: a worker
    # that joined later (an adaptive cluster still at 0 workers, a replaced worker) ran every
    # task unchecked, mixing its bytes into the outputs without an error.
    from concurrent.futures import Future

    from medmnistc_fast import generate as gen

    pytest.importorskip("dask.distributed", reason="dask[distributed] not installed (test extra)")
    real = gen._worker_environment
    state = {"in_worker": False}
    monkeypatch.setattr(gen, "_worker_environment", lambda: dict(
        real(), numpy="0.0.0") if state["in_worker"] else real())

    class LateWorker:  # stands in for a dask.distributed.Client with no worker at the start
        def nthreads(self):
            return {}

        def run(self, fn):
            return {}

        def submit(self, fn, *args, pure=True):
            fut = Future()
            state["in_worker"] = True
            try:
                fut.set_result(fn(*args))
            except BaseException as exc:
                fut.set_exception(exc)
            finally:
                state["in_worker"] = False
            return fut

    with pytest.raises(gen.DaskEnvironmentError, match=r"numpy='0\.0\.0' \(now '%s'\)"
                       % re.escape(np.__version__)):
        generate(GRAY_DS, tmp_path / "out", root=root, size=SIZE, scheduler=LateWorker(),
                 corruptions="pixelate")
    assert not (tmp_path / "out" / GRAY_DS / "pixelate.npz").exists()


def test_other_severities_refused(root, tmp_path):
    """A file holding another severity subset is not silently replaced."""
    generate(GRAY_DS, tmp_path, root=root, size=SIZE, seed=SEED, workers=1,
             corruptions="pixelate", severities=[3])
    before = tree(tmp_path)
    with pytest.raises(ValueError, match=r"pixelate holds severities \[3\], requested "
                                         r"\[1, 2, 3, 4, 5\].*--overwrite"):
        generate(GRAY_DS, tmp_path, root=root, size=SIZE, seed=SEED, workers=1,
                 corruptions="pixelate")
    assert tree(tmp_path) == before
    res = generate(GRAY_DS, tmp_path, root=root, size=SIZE, seed=SEED, workers=1,
                   corruptions="pixelate", overwrite=True)
    assert res[0]["written"] == ["pixelate"]


@pytest.mark.parametrize("damaged", [["x"], "x", 7])
def test_damaged_manifest_input_is_a_difference_not_a_crash(root, tmp_path, damaged):
    """A manifest whose ``input`` is valid JSON but not an object (hand-edited, another tool's)
    was an AttributeError, with and without overwrite: --overwrite could not repair the folder."""
    generate(GRAY_DS, tmp_path, root=root, size=SIZE, seed=SEED, workers=1,
             corruptions="pixelate")
    d = output_dir(tmp_path, GRAY_DS)
    path = os.path.join(d, "pixelate.npz")
    first = sha(path)
    mpath = os.path.join(d, "manifest.json")
    m = read_json(mpath)
    m["input"] = damaged
    with open(mpath, "w", encoding="utf-8") as f:
        json.dump(m, f)
    with pytest.raises(ValueError, match=r"input sha256=None .*--overwrite"):
        generate(GRAY_DS, tmp_path, root=root, size=SIZE, seed=SEED, workers=1,
                 corruptions="pixelate")
    res = generate(GRAY_DS, tmp_path, root=root, size=SIZE, seed=SEED, workers=1,
                   corruptions="pixelate", overwrite=True)
    assert res[0]["written"] == ["pixelate"]
    assert sha(path) == first and isinstance(read_json(mpath)["input"], dict)


def test_foreign_files_not_clobbered(root, tmp_path):
    d = output_dir(tmp_path, GRAY_DS)
    os.makedirs(d)
    np.savez_compressed(os.path.join(d, "pixelate.npz"), test_images=np.zeros((1, 2, 2), np.uint8))
    with pytest.raises(ValueError, match="without a manifest.json"):
        generate(GRAY_DS, tmp_path, root=root, size=SIZE, workers=1)


# --------------------------------------------------------------------------------- bad inputs
def _bad_inputs(tmp):
    """(name, writer of the bad file, expected exception, message regex)."""
    good = sample_split(GRAY_DS, SIZE, N)

    def save(**arrays):
        def w(path):
            np.savez(path, **arrays)
        return w

    def truncated(path):
        buf = io.BytesIO()
        np.savez_compressed(buf, **good)
        with open(path, "wb") as f:
            f.write(buf.getvalue()[: len(buf.getvalue()) // 2])

    def not_zip(path):
        with open(path, "wb") as f:
            f.write(b"this is not an npz file")

    def bad_crc(path):
        np.savez(path, **good)
        m = _npz.inspect_npz(path)["test_images"]
        with open(path, "r+b") as f:
            f.seek(m.data_offset + 100)
            b = f.read(1)
            f.seek(m.data_offset + 100)
            f.write(bytes([b[0] ^ 0xFF]))

    rgb = sample_split(RGB_DS, SIZE, N)["test_images"]
    return [
        ("truncated", truncated, ValueError, "not a valid .npz file"),
        ("not_zip", not_zip, ValueError, "not a valid .npz file"),
        ("crc", bad_crc, ValueError, "CRC-32"),
        ("missing_key", save(test_images=good["test_images"]), ValueError,
         "no array 'test_labels'"),
        ("dtype", save(test_images=good["test_images"].astype(np.float32),
                       test_labels=good["test_labels"]), ValueError,
         "dtype float32; expected uint8"),
        ("rgb_for_gray", save(test_images=rgb, test_labels=good["test_labels"]), ValueError,
         r"gray dataset, expected \(N, 32, 32\)"),
        ("size", save(test_images=good["test_images"][:, :16, :16],
                      test_labels=good["test_labels"]), ValueError, "at size 32"),
        ("labels", save(test_images=good["test_images"], test_labels=good["test_labels"][:3]),
         ValueError, "test_labels has shape"),
        ("no_label_columns", save(test_images=good["test_images"],
                                  test_labels=good["test_labels"][:, :0]),
         ValueError, r"test_labels has shape \(\d+, 0\); expected .*L >= 1"),
    ]


@pytest.mark.parametrize("case", range(9))
def test_bad_input_file_rejected_nothing_written(tmp_path, case):
    name, write, exc, msg = _bad_inputs(tmp_path)[case]
    r = tmp_path / "root"
    r.mkdir()
    write(input_path(r, GRAY_DS, SIZE))
    out = tmp_path / "out"
    with pytest.raises(exc, match=msg):
        generate(GRAY_DS, out, root=r, size=SIZE, workers=1)
    assert not out.exists(), name


def test_missing_file_message(tmp_path):
    with pytest.raises(FileNotFoundError) as ei:
        generate("octmnist", tmp_path / "out", root=tmp_path, size=64, workers=1)
    msg = str(ei.value)
    assert os.path.join(str(tmp_path), "octmnist_64.npz") in msg
    assert "pip install medmnist" in msg and "--size=64" in msg and "--sample" in msg
    assert "zenodo.org/records/10519652" in msg
    # A size MedMNIST+ does not come in: no download command that cannot work.
    with pytest.raises(FileNotFoundError) as ei:
        generate("octmnist", tmp_path / "out", root=tmp_path, size=100, workers=1)
    assert "--size=100" not in str(ei.value) and "28, 64, 128 and 224 px only" in str(ei.value)
    assert not (tmp_path / "out").exists()
    assert input_path(tmp_path, "octmnist", 28).endswith("octmnist.npz")


def test_missing_file_message_points_at_the_likely_mistake(tmp_path):
    # The file holds nothing valid: the message must come from the file name alone.
    r = tmp_path / "root"
    r.mkdir()
    (r / "octmnist.npz").write_bytes(b"")
    (r / "octmnist_128.npz").write_bytes(b"")
    # Another size of the same dataset is there: the default --size 224 is the likely mistake.
    with pytest.raises(FileNotFoundError) as ei:
        generate("octmnist", tmp_path / "out", root=r, workers=1)
    msg = str(ei.value)
    assert str(r / "octmnist_224.npz") in msg
    assert "octmnist.npz (--size 28), octmnist_128.npz (--size 128)" in msg
    # --root naming the file itself instead of its folder
    with pytest.raises(FileNotFoundError) as ei:
        generate("octmnist", tmp_path / "out", root=r / "octmnist_128.npz", size=128, workers=1)
    msg = str(ei.value)
    assert f"--root (root=) names the file {r / 'octmnist_128.npz'}" in msg
    assert "must be the folder holding octmnist_128.npz" in msg
    # Files of other datasets do not count.
    with pytest.raises(FileNotFoundError) as ei:
        generate("chestmnist", tmp_path / "out", root=r, size=64, workers=1)
    assert "other sizes" not in str(ei.value) and "pip install medmnist" in str(ei.value)
    assert not (tmp_path / "out").exists()


def test_missing_root_folder_says_so(tmp_path):
    # A mistyped --root: the message said only "file not found: /nonexistent/x.npz", the same
    # as for a folder that lacks the file, so the folder itself was never suspected.
    missing = tmp_path / "medmnst"
    with pytest.raises(FileNotFoundError) as ei:
        generate("octmnist", tmp_path / "out", root=missing, size=64, workers=1)
    msg = str(ei.value)
    assert f"{missing / 'octmnist_64.npz'} (the folder {missing} does not exist)." in msg
    assert "pip install medmnist" in msg and "--size=64" in msg   # the download advice stays
    assert not (tmp_path / "out").exists()
    # an existing folder without the file: no such claim
    with pytest.raises(FileNotFoundError) as ei:
        generate("octmnist", tmp_path / "out", root=tmp_path, size=64, workers=1)
    assert "does not exist" not in str(ei.value)


def _extra_requirements(extra):
    """The requirements of a pyproject.toml extra that apply to this interpreter, read with
    tomllib (Python 3.11+; on 3.10 its original, tomli, which pytest itself requires there),
    their environment markers evaluated by packaging and dropped."""
    try:
        import tomllib
    except ImportError:
        tomllib = pytest.importorskip("tomli")
    from packaging.requirements import Requirement
    with open(os.path.join(os.path.dirname(__file__), "..", "pyproject.toml"), "rb") as f:
        reqs = tomllib.load(f)["project"]["optional-dependencies"][extra]
    return [r.split(";")[0].strip() for r in reqs
            if Requirement(r).marker is None or Requirement(r).marker.evaluate()]


@pytest.mark.parametrize("module, extra, call", [
    ("zarr", "zarr", lambda out: generate("pathmnist", out, sample=True, sample_n=1, size=SIZE,
                                          fmt="zarr", workers=1)),
    ("dask.distributed", "dask", lambda out: generate("pathmnist", out, sample=True, sample_n=1,
                                                      size=SIZE, scheduler="tcp://h:1")),
    ("zarr", "zarr", "read"),
    ("torch", "torch", "torch"),
])
def test_missing_optional_dependency_names_installable_packages(tmp_path, monkeypatch, module,
                                                                 extra, call):
    # medmnistc_fast is installed from a clone, not from a package index: the message must name
    # the packages of the extra (pip install 'medmnistc_fast[zarr]' finds nothing to install).
    if call == "read":   # a zarr store on disk, opened without zarr
        store = tmp_path / "pathmnist" / "pixelate.zarr"
        store.mkdir(parents=True)
        (store / "zarr.json").write_text("{}")
        call = lambda out: CorruptedSet(out, "pathmnist", "pixelate")  # noqa: E731
    if call == "torch":  # the base class of CorruptedSet(...).torch()
        from medmnistc_fast.datasets import _torch_dataset_base
        call = lambda out: _torch_dataset_base()  # noqa: E731
        monkeypatch.setitem(sys.modules, "torch.utils.data", None)
    monkeypatch.setitem(sys.modules, module, None)   # makes "import zarr" raise ImportError
    with pytest.raises(ImportError) as ei:
        call(tmp_path)
    msg = str(ei.value)
    assert f"needs {module}: pip install " + " ".join(f"'{r}'" for r in _extra_requirements(extra)) in msg
    assert f"in a clone of medmnistc_fast, pip install '.[{extra}]'" in msg
    assert "medmnistc_fast[" not in msg


def test_missing_optional_dependency_without_metadata(monkeypatch):
    import importlib.metadata
    from medmnistc_fast._validation import missing_extra

    def gone(name):
        raise importlib.metadata.PackageNotFoundError(name)
    monkeypatch.setattr(importlib.metadata, "requires", gone)
    assert str(missing_extra("TorchCorruptedSet", "torch", "torch")) == (
        "TorchCorruptedSet needs torch: pip install 'torch' (or, in a clone of medmnistc_fast, "
        "pip install '.[torch]')")


def test_missing_extra_keeps_the_requirements_for_this_python(monkeypatch):
    # an extra whose bound depends on the Python version (pyproject.toml's zarr) names only the
    # entry for the running interpreter: no Python is below 3.0, every Python 3 is at least it
    import importlib.metadata
    from medmnistc_fast._validation import missing_extra
    monkeypatch.setattr(importlib.metadata, "requires", lambda name: [
        'numpy>=1.24', 'pkg>=1; python_version < "3.0" and extra == "x"',
        'pkg>=2; python_version >= "3.0" and extra == "x"', 'other; extra == "y"'])
    assert str(missing_extra("f", "pkg", "x")) == (
        "f needs pkg: pip install 'pkg>=2' (or, in a clone of medmnistc_fast, "
        "pip install '.[x]')")


def test_installed_but_broken_optional_dependency_says_so(tmp_path, monkeypatch):
    # zarr 2.16-2.18.6 beside numcodecs 0.16 is installed yet fails to import ("cannot import
    # name 'cbuffer_sizes'"): the message must not claim zarr is missing, and quotes the error
    pkg = tmp_path / "site" / "zarr"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text(
        "raise ImportError(\"cannot import name 'cbuffer_sizes' from 'numcodecs.blosc'\")\n")
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    monkeypatch.delitem(sys.modules, "zarr", raising=False)
    with pytest.raises(ImportError) as ei:
        generate("pathmnist", tmp_path / "out", sample=True, sample_n=1, size=SIZE, fmt="zarr",
                 workers=1)
    assert str(ei.value).startswith(
        "fmt='zarr' / --format zarr needs zarr, which is installed but fails to import "
        "(ImportError: cannot import name 'cbuffer_sizes' from 'numcodecs.blosc'); a version "
        "that works with the installed packages: pip install ")
    assert not (tmp_path / "out").exists()


def test_missing_module_behind_another_import_error_is_missing():
    # dask.distributed without the distributed package raises a plain ImportError from the
    # ModuleNotFoundError: distributed is missing, not broken
    from medmnistc_fast._validation import missing_extra
    try:
        try:
            import medmnistc_fast_no_such_module  # noqa: F401
        except ImportError as e:
            raise ImportError("dask.distributed is not installed") from e
    except ImportError as exc:
        err = exc
    msg = str(missing_extra("scheduler=", "dask.distributed", "dask", err))
    assert msg.startswith("scheduler= needs dask.distributed (No module named "
                          "'medmnistc_fast_no_such_module'): pip install ")
    assert "fails to import" not in msg


@pytest.mark.parametrize("missing, named", [("zarr", False), ("zarr.storage", False),
                                            ("numcodecs", True)])
def test_missing_module_other_than_the_optional_one_is_named(missing, named):
    # zarr installed without numcodecs: pip would find zarr itself installed, so the message
    # names the module that is missing; zarr or a module of its own missing needs no note
    from medmnistc_fast._validation import missing_extra
    err = ModuleNotFoundError(f"No module named '{missing}'", name=missing)
    msg = str(missing_extra("f", "zarr", "zarr", err))
    expected = f"f needs zarr (No module named '{missing}'): " if named else "f needs zarr: "
    assert msg.startswith(expected), msg


def test_corruption_of_no_selected_dataset_names_its_datasets(tmp_path):
    owners = [d for d in mf.DATASETS if "gaussian_noise" in mf.corruptions(d)]
    with pytest.raises(ValueError) as ei:
        generate("pathmnist,bloodmnist", tmp_path, sample=True, corruptions="gaussian_noise")
    assert str(ei.value).endswith("('gaussian_noise' belongs to other datasets: "
                                  + ", ".join(map(repr, owners)) + ")")


@pytest.mark.parametrize("kwargs, msg", [
    ({"dataset": "mnist"}, "unknown dataset 'mnist'"),
    ({"dataset": "pathology96"}, "pathology96 has no MedMNIST.* files or sample; .*from an "
                                 "image folder"),
    ({"dataset": "chestmnist,pathology224"}, "pathology224 has no MedMNIST"),
    ({"corruptions": "bubble"}, "'bubble' is not defined for dataset 'chestmnist'"),
    ({"severities": "0,2"}, r"severities must hold ints in 1\.\.5; got 0"),
    ({"severities": "x"}, r"severities must hold ints in 1\.\.5; got .x."),
    # "1_0" was int()'s 10 (the message said "got 10"), Arabic-Indic three was taken as 3
    ({"severities": "1_0"}, r"severities must hold ints in 1\.\.5; got '1_0'$"),
    ({"severities": "\u0663"}, r"severities must hold ints in 1\.\.5; got '\u0663'$"),
    ({"severities": ["2", "+3"]}, r"severities must hold ints in 1\.\.5; got '\+3'$"),
    # past Python's 4300-digit int-string limit: int()'s own ValueError, naming no argument
    ({"severities": ["7" * 4301]}, r"severities must hold ints in 1\.\.5; got '7{4301}'$"),
    ({"split": "dev"}, "split must be one of"),
    ({"fmt": "hdf5"}, "fmt must be one of"),
    # used to start 99999 worker processes (the machine ran out of memory first)
    ({"workers": 99999}, r"workers must be an int in 1\.\.1024; got 99999"),
    ({"workers": 0}, r"workers must be an int in 1\.\.1024; got 0"),
])
def test_bad_arguments(root, tmp_path, kwargs, msg):
    args = dict(dataset=GRAY_DS, root=root, size=SIZE, workers=1)
    args.update(kwargs)
    with pytest.raises(ValueError, match=msg):
        generate(args.pop("dataset"), tmp_path / "out", **args)
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("kwargs, msg", [
    ({"overwrite": "no"}, "overwrite must be a bool"),   # a truthy str must not overwrite
    ({"compress": 1}, "compress must be a bool"),
    ({"progress": "yes"}, "progress must be a bool"),
    ({"out": None}, "out must be a str or os.PathLike"),
    ({"out": 3}, "out must be a str or os.PathLike"),
    ({"out": b"out"}, "out must be a str or os.PathLike"),
    # list() of a mapping is its keys: {"pixelate": [1, 2]} silently meant every level
    ({"corruptions": {"pixelate": [1, 2]}}, "corruptions must be a sequence .* not a mapping"),
    ({"severities": {1: "a"}}, "severities must be a sequence .* not a mapping"),
    # list() of bytes is its byte values: b"pixelate" was "corruption 112 is not defined",
    # b"1,2" "severities must hold ints in 1..5; got 49"
    ({"corruptions": b"pixelate"}, "corruptions must be a sequence or a comma-separated str, "
                                   "not bytes; got b'pixelate'"),
    ({"severities": bytearray(b"1,2")}, "severities must be a sequence or a comma-separated "
                                        "str, not bytearray"),
    # a non-str name was a ValueError "corruption 3 is not defined", where AugMedMNISTC and
    # corrupt() raise TypeError
    ({"corruptions": [3]}, r"corruptions must hold corruption names \(str\); got 3 \(int\)"),
    ({"corruptions": ["pixelate", None]}, r"corruptions must hold corruption names .*got None"),
    ({"severities": [1.0]}, r"severities must hold ints in 1\.\.5; got 1\.0 \(float\)"),
    # a ValueError before, where CorruptedSet and output_dir raise TypeError
    ({"split": 1}, r"^split must be a str, one of 'test', 'val', 'train'; got 1 \(int\)"),
    ({"split": None}, r"^split must be a str"),
])
def test_bad_argument_types(root, tmp_path, kwargs, msg):
    args = dict(root=root, size=SIZE, workers=1, out=tmp_path / "out")
    args.update(kwargs)
    with pytest.raises(TypeError, match=msg):
        generate(GRAY_DS, args.pop("out"), **args)
    with pytest.raises(TypeError, match="sample must be a bool"):
        generate(GRAY_DS, tmp_path / "out", sample="no", size=SIZE, workers=1)
    # None is not "all": a forgotten dataset must not start a run over the twelve datasets
    with pytest.raises(TypeError, match="dataset must be a str .* got None"):
        generate(None, tmp_path / "out", root=root, size=SIZE, workers=1)
    with pytest.raises(TypeError, match="dataset must be a str"):
        generate(["pathmnist", 3], tmp_path / "out", root=root, size=SIZE, workers=1)
    with pytest.raises(TypeError, match="dataset must be a sequence .* not a mapping"):
        generate({GRAY_DS: 1}, tmp_path / "out", root=root, size=SIZE, workers=1)
    with pytest.raises(TypeError, match="corruptions must be a sequence .* not a mapping"):
        render_preview(np.zeros((SIZE, SIZE), np.uint8), GRAY_DS, corruptions={"pixelate": 1})
    assert not (tmp_path / "out").exists() and not os.path.exists(b"out")


@pytest.mark.parametrize("kwargs, exc, msg", [
    # os.fspath's "expected str, bytes or os.PathLike object, not int" named no argument
    ({"root": 3}, TypeError, r"root must be a str or os\.PathLike folder path; got 3"),
    ({"folder": ["imgs"]}, TypeError, r"folder must be a str or os\.PathLike folder path"),
    # '' is not the working directory (os.path reads it so): named like an empty out
    ({"folder": ""}, ValueError, r"^folder must name a folder; got '' \(use '\.' for the working"),
    ({"root": ""}, ValueError, r"^root must name a folder; got ''"),
    # these reached the Dask runner as "'int' object has no attribute 'nthreads'"
    ({"scheduler": 3, "sample": True}, TypeError, r"scheduler must be a scheduler address .*got 3"),
    ({"scheduler": object(), "sample": True}, TypeError, r"scheduler must be .*Client; got"),
    ({"scheduler": "", "sample": True}, ValueError, r"scheduler must be a scheduler address .*got ''"),
    # sample_images' bound, named as generate's argument (was NumPy's "Maximum allowed
    # dimension exceeded")
    ({"sample": True, "sample_n": 10 ** 30, "workers": 1}, ValueError,
     r"^sample_n must be at most \d+ for 32 x 32 px gray images \(sample_n x size x size"),
    # one of the pair (with size= given, as for the other inputs) said "size= (--size) does
    # not apply to folder= (--from-folder) or images= input", not that the other is missing
    ({"labels": np.zeros(2, np.int64)}, TypeError, r"^images= and labels= go together"),
    ({"images": np.zeros((2, 8, 8), np.uint8)}, TypeError, r"^images= and labels= go together"),
])
def test_bad_input_and_scheduler_types(tmp_path, kwargs, exc, msg):
    args = dict(size=SIZE, sample_n=2, corruptions="pixelate")
    args.update(kwargs)
    if "scheduler" not in kwargs:
        args.setdefault("workers", 1)
    with pytest.raises(exc, match=msg):
        generate(GRAY_DS, tmp_path / "out", **args)
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("which", ["images", "labels"])
def test_masked_array_input_rejected_nothing_written(tmp_path, which):
    # a masked images= failed in corrupt_batch after the output folder and manifest.json were
    # written; a masked labels= lost its mask and was written as plain labels
    arrays = {"images": np.zeros((3, SIZE, SIZE), np.uint8), "labels": np.zeros((3, 1), np.uint8)}
    arrays[which] = np.ma.masked_array(arrays[which], mask=True)
    with pytest.raises(TypeError, match=f"{which} must be a plain numpy.ndarray, not a masked"):
        generate(GRAY_DS, tmp_path / "out", corruptions="pixelate", workers=1, **arrays)
    assert not (tmp_path / "out").exists()


def test_overwrite_str_does_not_replace(root, tmp_path):
    out = tmp_path / "out"
    generate(GRAY_DS, out, root=root, size=SIZE, corruptions="pixelate", workers=1)
    path = out / GRAY_DS / "pixelate.npz"
    before = path.read_bytes()
    with pytest.raises(TypeError, match="overwrite must be a bool"):
        generate(GRAY_DS, out, root=root, size=SIZE, corruptions="pixelate", seed=1,
                 workers=1, overwrite="no")
    assert path.read_bytes() == before


# ----------------------------------------------------------------------------- preview, reading
@pytest.mark.parametrize("kwargs, exc, msg", [
    # a truthy str read the sample: sample="no" was sample=True
    (dict(sample="no"), TypeError, r"^sample must be a bool"),
    (dict(sample=True, root="somewhere"), ValueError, r"^pass one input"),
    (dict(lo=-1), ValueError, r"^lo must be an int >= 0"),     # it was called "index"
    (dict(lo=1.5), TypeError, r"^lo must be an int"),
    (dict(root=3), TypeError, r"^root must be a str or os\.PathLike"),   # os.fspath's, unnamed
    (dict(split=["test"]), TypeError, r"^split must be a str"),          # was a ValueError
    (dict(split="dev"), ValueError, r"^split must be one of 'test', 'val', 'train'; got 'dev'$"),
])
def test_load_images_argument_errors(kwargs, exc, msg):
    args = dict(dataset=GRAY_DS, lo=0, size=SIZE, sample_n=2)
    args.update(kwargs)
    with pytest.raises(exc, match=msg):
        load_images(args.pop("dataset"), args.pop("lo"), **args)


def test_path_helpers_name_bad_arguments():
    # os.fspath / os.path.join errors named no argument; a bad split made a folder name
    with pytest.raises(TypeError, match=r"^root must be a str or os\.PathLike"):
        input_path(3, GRAY_DS, 28)
    with pytest.raises(TypeError, match=r"^out must be a str or os\.PathLike"):
        output_dir(None, GRAY_DS)
    with pytest.raises(TypeError, match=r"^dataset must be a str"):
        output_dir("out", None)
    with pytest.raises(ValueError, match=r"^split must be one of 'test', 'val', 'train'"):
        output_dir("out", GRAY_DS, "validation")
    with pytest.raises(TypeError, match=r"^split must be a str"):
        output_dir("out", GRAY_DS, None)
    assert output_dir("out", GRAY_DS, "val") == os.path.join("out", GRAY_DS + "_val")
    assert input_path(None, GRAY_DS, 28).endswith(os.path.join(".medmnist", GRAY_DS + ".npz"))


def test_load_images_and_preview(root):
    clean = sample_split(RGB_DS, SIZE, N)["test_images"]
    np.testing.assert_array_equal(load_images(RGB_DS, 3, 7, root=root, size=SIZE), clean[3:7])
    gray = sample_split(GRAY_DS, SIZE, N)["test_images"]
    np.testing.assert_array_equal(load_images(GRAY_DS, 11, root=root, size=SIZE), gray[11:12])
    with pytest.raises(ValueError, match=rf"^lo must be below {N}: the test split of {GRAY_DS} "
                                         rf"has {N} images \(0\.\.{N - 1}\); got {N}$"):
        load_images(GRAY_DS, N, root=root, size=SIZE)
    with pytest.raises(ValueError, match=rf"^hi must be at most {N}: .*; got {N + 1}$"):
        load_images(GRAY_DS, N - 1, N + 1, root=root, size=SIZE)
    assert load_images(GRAY_DS, N - 1, N, root=root, size=SIZE).shape[0] == 1  # the last row
    # the row-range errors name the arguments lo and hi (lo used to be called "index")
    with pytest.raises(ValueError, match="lo must be an int >= 0; got -1"):
        load_images(GRAY_DS, -1, root=root, size=SIZE)
    with pytest.raises(TypeError, match="lo must be an int >= 0"):
        load_images(GRAY_DS, 1.0, root=root, size=SIZE)
    with pytest.raises(ValueError, match="hi must be an int >= 5; got 3"):
        load_images(GRAY_DS, 5, 3, root=root, size=SIZE)
    im = render_preview(clean[0], RGB_DS, seed=1, corruptions=["pixelate", "characters"])
    c = preview_cell(SIZE)
    assert c == 96 and im.size == (120 + 6 * (c + 4) + 4, 20 + 2 * (c + 4) + 4)
    suite = render_preview(clean[0], "pathology96", seed=1)     # any dataset key
    assert suite.size == (120 + 6 * (c + 4) + 4, 20 + 9 * (c + 4) + 4)
    with pytest.raises(ValueError, match="pathology96 has no MedMNIST"):
        load_images("pathology96", 0, sample=True)
    # (H, W, 1) previews like (H, W) (it used to pass the check and fail inside Pillow)
    g = gray[0]
    assert np.array_equal(np.asarray(render_preview(g[:, :, None], GRAY_DS, seed=1)),
                          np.asarray(render_preview(g, GRAY_DS, seed=1)))
    with pytest.raises(ValueError, match=r"image must have 1 or 3 channels .*got shape "
                                         r"\(28, 28, 2\)"):
        render_preview(np.zeros((28, 28, 2), np.uint8), GRAY_DS)
    with pytest.raises(TypeError, match="uint8"):
        render_preview(np.zeros((28, 28), np.float32), GRAY_DS)


@pytest.mark.parametrize("side, exc, match", [
    (0, ValueError, "side must be an int >= 1; got 0"),
    (-3, ValueError, "side must be an int >= 1; got -3"),
    (28.0, TypeError, "side must be an int >= 1"),
    (True, TypeError, "side must be an int >= 1"),
])
def test_preview_cell_rejects_bad_sides(side, exc, match):
    # 0 raised ZeroDivisionError; -3, 28.0 and True returned a "cell side" (3, 28.0, 96)
    with pytest.raises(exc, match=match):
        preview_cell(side)


@pytest.mark.parametrize("side, cell", [(1, 96), (28, 112), (96, 96), (97, 97), (224, 224)])
def test_preview_cell_values(side, cell):
    # the smallest multiple of side that is >= 96, worked out by hand
    assert preview_cell(side) == cell


@pytest.mark.parametrize("image, exc, match", [
    # an empty image raised ZeroDivisionError, a list or a masked array was read as an array
    # (the mask dropped): checked as corrupt() checks images now
    (np.zeros((0, 0), np.uint8), ValueError, "image must be at least 8 x 8 pixels"),
    (np.zeros((4, 28), np.uint8), ValueError, "image must be at least 8 x 8 pixels"),
    (np.zeros((28, 28, 3), np.uint8).tolist(), TypeError, "image must be a numpy.ndarray"),
    (np.ma.masked_array(np.zeros((28, 28), np.uint8), mask=True), TypeError, "masked array"),
    (np.zeros((1, 28, 28), np.uint8), ValueError, r"image must have 1 or 3 channels"),
    (np.zeros(28, np.uint8), ValueError, r"image must have shape"),
])
def test_render_preview_checks_the_image(image, exc, match):
    with pytest.raises(exc, match=match):
        render_preview(image, GRAY_DS)


# ------------------------------------------------------------------------------------ npz writer
def test_crc32_combine():
    rng = np.random.default_rng(0)
    for n1, n2 in ((0, 5), (7, 0), (1000, 1), (4096, 12345)):
        a, b = rng.bytes(n1), rng.bytes(n2)
        assert _npz.crc32_combine(zlib.crc32(a), zlib.crc32(b), n2) == zlib.crc32(a + b)


def test_crc32_is_zlibs():
    # _npz.crc32 may be ISA-L's: it must give zlib's values, with and without a start value.
    rng = np.random.default_rng(2)
    for n in (0, 1, 15, 16, 63, 64, 65, 1000, 1 << 16, 3 * (1 << 20) + 7):
        b = rng.bytes(n)
        start = int(rng.integers(0, 2**32))
        assert _npz.crc32(b) == zlib.crc32(b)
        assert _npz.crc32(b, start) == zlib.crc32(b, start)
        assert _npz.crc32(memoryview(b)[n // 3:], start) == zlib.crc32(b[n // 3:], start)


@pytest.mark.parametrize("compressed", [True, False])
def test_copy_member_data(tmp_path, compressed):
    rng = np.random.default_rng(3)
    x = rng.integers(0, 256, (40, 64, 64), dtype=np.uint8)
    x[::3] = 7                                   # compressible rows too
    path = str(tmp_path / "a.npz")
    (np.savez_compressed if compressed else np.savez)(path, test_images=x, other=x[:2])
    m = _npz.inspect_npz(path)["test_images"]
    for block in (1 << 10, 1 << 20):             # many reads, and one read of the whole member
        out = io.BytesIO()
        _npz.copy_member_data(path, m, out, block=block)
        assert out.getvalue() == x.tobytes()
    if not compressed:
        return
    # A flipped byte in the deflate stream: corrupt data or a CRC-32 mismatch, both reported.
    with open(path, "rb") as f:
        data = bytearray(f.read())
    start = _npz._member_start(io.BytesIO(data), m.zinfo, path)
    bad = bytearray(data)
    bad[start + m.zinfo.compress_size // 2] ^= 0x55
    with open(path, "wb") as f:
        f.write(bad)
    with pytest.raises(ValueError, match="test_images.npy is damaged"):
        _npz.copy_member_data(path, m, io.BytesIO())
    # The file cut inside the member's data.
    with open(path, "wb") as f:
        f.write(data[: start + m.zinfo.compress_size // 2])
    with pytest.raises(ValueError, match="truncated"):
        _npz.copy_member_data(path, m, io.BytesIO())


@pytest.mark.parametrize("compress", [False, True])
def test_npz_writer_streaming(tmp_path, compress):
    rng = np.random.default_rng(1)
    x = rng.integers(0, 256, (23, 9, 7, 3), dtype=np.uint8)
    x[4:9] = 17
    lab = np.arange(46, dtype=np.int64).reshape(23, 2)
    digests = []
    for step in (5, 23):
        p = tmp_path / f"{step}.npz"
        with open(p, "wb") as f:
            w = _npz.NpzWriter(f)
            w.begin_member("test_images", x.shape, x.dtype, compress)
            for lo in range(0, len(x), step):
                ch = x[lo:lo + step]
                w.write_chunk(_npz.deflate_segments(ch) if compress else ch, zlib.crc32(ch),
                              ch.nbytes)
            w.end_member()
            w.add_array("test_labels", lab, compress)
            digest, size = w.close()
        assert digest == sha(p) and size == os.path.getsize(p)
        digests.append(digest)
        with zipfile.ZipFile(p) as zf:
            assert zf.testzip() is None
        with np.load(p, allow_pickle=False) as z:
            np.testing.assert_array_equal(z["test_images"], x)
            np.testing.assert_array_equal(z["test_labels"], lab)
    assert digests[0] == digests[1]  # chunking does not change the bytes


@pytest.mark.skipif(sys.platform == "win32", reason="folder locks use fcntl")
def test_concurrent_run_on_the_same_folder_is_refused(root, tmp_path):
    # A second run on a folder that another run is writing stops at once (it used to delete
    # the first run's temporary files); once the folder is free, the run goes ahead.
    import fcntl

    d = tmp_path / "out" / GRAY_DS
    d.mkdir(parents=True)
    fd = os.open(d, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)   # what a running generate holds
        with pytest.raises(ValueError, match="being written by another generate run"):
            generate(GRAY_DS, tmp_path / "out", root=root, size=SIZE, workers=1)
        assert os.listdir(d) == []
    finally:
        os.close(fd)
    generate(GRAY_DS, tmp_path / "out", root=root, size=SIZE, workers=1,
             corruptions=["pixelate"])
    assert os.path.exists(d / "pixelate.npz")


def test_pool_start_failure_prints_no_thread_traceback(monkeypatch):
    # Starting the workers is best effort in a background thread: if spawning fails there
    # (fork limit, a dead multiprocessing helper), the first real submit fails the same way
    # and generate reports it; the thread itself must not print a traceback of its own
    # (pytest's filterwarnings=error turns an unhandled thread exception into a failure).
    import concurrent.futures

    from medmnistc_fast.generate import _PoolRunner

    class Failing:
        def __init__(self, *args, **kwargs):
            self.shut = False

        def submit(self, *args, **kwargs):
            raise BrokenPipeError(32, "Broken pipe")

        def shutdown(self, wait=True, cancel_futures=False):
            self.shut = True

    monkeypatch.setattr(concurrent.futures, "ProcessPoolExecutor", Failing)
    runner = _PoolRunner(2)
    runner._starter.join()
    with pytest.raises(BrokenPipeError):
        runner.submit(None, ())
    runner.close(cancel=True)
    assert runner._ex.shut


def test_missing_scheduler_file_is_named_and_nothing_written(tmp_path):
    # `--scheduler sched.json` before `dask scheduler --scheduler-file sched.json` has written
    # it (or with a typo) used to reach dask as an address ("missing port number in address
    # 'sched.json'") after the output folder and its manifest had been created.
    sched = tmp_path / "sched.json"
    with pytest.raises(FileNotFoundError, match="scheduler file not found: .*sched.json"):
        generate("breastmnist", tmp_path / "out", sample=True, sample_n=2, size=28,
                 corruptions=["pixelate"], scheduler=str(sched))
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("text", ["{garbage", "[]", "{}", '{"address": 5}', '{"address": ""}',
                                  "\udcff"])
def test_damaged_scheduler_file_is_named_and_nothing_written(tmp_path, text):
    # dask's Client read these as a bare AssertionError ("assert ip is not None", after 10
    # retries) or a TypeError from its own code, neither naming --scheduler or the file.
    sched = tmp_path / "sched.json"
    sched.write_bytes(text.encode("utf-8", "surrogateescape"))
    with pytest.raises(ValueError, match=r"scheduler must be .*\"address\".*sched\.json holds"):
        generate("breastmnist", tmp_path / "out", sample=True, sample_n=2, size=28,
                 corruptions=["pixelate"], scheduler=str(sched))
    assert not (tmp_path / "out").exists()


def test_empty_out_is_rejected(tmp_path, monkeypatch):
    # out="" (an empty "$OUT" on the command line) used to write into the working directory.
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ValueError, match="out must name a folder"):
        generate("breastmnist", "", sample=True, sample_n=2, size=28,
                 corruptions=["pixelate"], workers=1)
    assert os.listdir(tmp_path) == []
    # output_dir, the public helper that names a dataset's output folder, refuses it too
    # (it returned the bare relative "breastmnist")
    with pytest.raises(ValueError, match=r"^out must name a folder; got ''"):
        output_dir("", "breastmnist")


def _dead_pid() -> int:
    import subprocess

    p = subprocess.Popen([sys.executable, "-c", ""])
    p.wait()
    return p.pid


def test_orphaned_worker_creates_no_file(root, tmp_path, monkeypatch):
    # After `kill -9` of the process running generate, its pool workers live on for up to a
    # second and pick up whole-file tasks already queued. A re-run started meanwhile removes
    # the temporary files first; a worker that then created its task's file left it behind
    # for good (seen: one .tmp of a full output file left in 15 kill-and-re-run cycles of a
    # 13-file gray set with 2 workers). A worker whose parent is gone must create nothing.
    import medmnistc_fast.generate as gen

    inp = gen._open_file_input(GRAY_DS, "test", SIZE, root)
    ref = gen._FileRef(inp.path, inp.member.data_offset, inp.n, inp.image_shape)
    target = str(tmp_path / ".pixelate.npz.0123456789ab.tmp")
    task = gen._FileTask(GRAY_DS, "pixelate", 0, (1,), ref, 4, "test", inp.labels, target)
    monkeypatch.setattr(gen, "_PARENT", _dead_pid())
    with pytest.raises(RuntimeError, match="process running generate is gone"):
        gen._write_file(task)
    assert os.listdir(tmp_path) == []
    monkeypatch.setattr(gen, "_PARENT", os.getpid())   # parent alive: the task runs
    gen._write_file(task)
    clean = load_images(GRAY_DS, 0, N, root=root, size=SIZE)
    with np.load(target, allow_pickle=False) as z:
        np.testing.assert_array_equal(
            z["test_images"], mf.corrupt_batch(clean, "pixelate", 1, dataset=GRAY_DS, seed=0))


def test_orphaned_worker_sees_its_unreaped_parent_gone(monkeypatch):
    # A parent killed with SIGKILL and not yet reaped is a zombie, which os.kill(pid, 0) still
    # finds: the pid test alone took it for alive. The closed write end of its pipe says it
    # is gone (the whole-process check is tests/test_cli.py's unreaped-parent test).
    import multiprocessing as mp

    import medmnistc_fast.generate as gen

    r, w = mp.Pipe(duplex=False)
    monkeypatch.setattr(gen, "_PARENT", os.getpid())   # a pid that os.kill(pid, 0) finds
    monkeypatch.setattr(gen, "_PARENT_PIPE", r)
    gen._check_parent()                                # write end open: alive
    w.close()
    with pytest.raises(RuntimeError, match="process running generate is gone"):
        gen._check_parent()
    r.close()


_ABANDON_SCRIPT = """
import concurrent.futures, os, signal, sys, time
import concurrent.futures.process as cfp
import medmnistc_fast.generate as gen

if __name__ == "__main__":
    killed, old_cpython, workaround = (a == "1" for a in sys.argv[1:])
    if old_cpython:
        # CPython before 3.11.5 (gh-94777): the broken pool's wind-down leaves this process's
        # read end of the call queue's pipe open
        terminate_broken = cfp._ExecutorManagerThread.terminate_broken

        def keep_reader_open(self, cause):
            self.call_queue._reader.close = lambda: None
            terminate_broken(self, cause)

        cfp._ExecutorManagerThread.terminate_broken = keep_reader_open
    gen._LEAVES_CALL_QUEUE_READER_OPEN = workaround
    runner = gen._PoolRunner(1)
    busy = runner.call(time.sleep, 60)
    big = [runner.call(len, bytes(8 << 20)) for _ in range(4)]
    # busy and big[0] are in the call queue (the pool's warm-up call may be too), so the
    # feeder blocks writing a big task to the sleeping worker; big[2] and big[3] at least
    # wait in the executor's table
    while not (busy.running() and big[0].running()):
        time.sleep(0.01)
    (pid,) = runner._ex._processes
    runner.abandon([busy] + big)
    if killed:
        os.kill(pid, signal.SIGKILL)
        concurrent.futures.wait([busy])   # the executor has seen the pool break
    runner.close(cancel=True)
    print("closed", flush=True)
"""


def _run_abandon_script(tmp_path, killed, old_cpython, workaround, timeout):
    import subprocess

    script = tmp_path / "abandon.py"
    script.write_text(_ABANDON_SCRIPT)
    return subprocess.run([sys.executable, str(script)]
                          + ["1" if v else "0" for v in (killed, old_cpython, workaround)],
                          capture_output=True, text=True, timeout=timeout)


@pytest.mark.parametrize("old_cpython", [False, True], ids=["this-cpython", "cpython<3.11.5"])
@pytest.mark.parametrize("killed", [True, False], ids=["worker-killed", "closed-while-busy"])
def test_abandoned_pool_lets_the_interpreter_exit(tmp_path, killed, old_cpython):
    # generate's error and Ctrl-C paths give up their futures through the runner, then close it
    # with cancel=True. Cancelling pool futures one by one left cancelled futures in the
    # executor's table; once the pool broke (a worker killed, as `kill -TERM` of the process
    # group does, or stopped by close itself), Python 3.10/3.11's manager thread died with
    # InvalidStateError before closing the call queue, and the interpreter's exit waited for
    # ever on the queue's feeder, blocked writing a task larger than a pipe's buffer to a
    # worker that was gone. Before 3.11.5 the feeder stayed blocked even so: the parent's own
    # read end of the pipe kept it open, until _PoolRunner.close detached it. That CPython is
    # emulated on this one (cpython<3.11.5), and run natively on 3.10.
    workaround = old_cpython or sys.version_info < (3, 11, 5)
    try:
        proc = _run_abandon_script(tmp_path, killed, old_cpython, workaround, timeout=60)
    except subprocess.TimeoutExpired:
        pytest.fail("the process did not exit after the pool was abandoned and closed")
    assert proc.returncode == 0 and proc.stdout == "closed\n", proc.stderr


@pytest.mark.skipif(os.name != "posix", reason="POSIX descriptors")
def test_emulated_old_cpython_hangs_without_the_call_queue_workaround(tmp_path):
    # the emulation above reproduces the hang: without _unblock_call_queue the process is
    # still waiting on the feeder 10 s after close (it exits in about 1 s with it)
    with pytest.raises(subprocess.TimeoutExpired):
        _run_abandon_script(tmp_path, killed=True, old_cpython=True, workaround=False,
                            timeout=10)


@pytest.mark.skipif(os.name != "posix", reason="POSIX descriptors")
def test_detach_pipe_end_breaks_the_pipe_and_leaves_the_connection_to_close():
    import multiprocessing as mp

    import medmnistc_fast.generate as gen

    r, w = mp.Pipe(duplex=False)
    fd = r.fileno()
    os.set_blocking(w.fileno(), False)    # an open pipe that fills: BlockingIOError, not a hang
    gen._detach_pipe_end(r)
    # the pipe's only reader is gone: the write fails at once
    with pytest.raises(BrokenPipeError):
        w.send_bytes(bytes(1 << 20))
    assert not r.closed and r.fileno() == fd
    assert os.read(fd, 1) == b""          # the descriptor now reads /dev/null
    r.close()                             # closed once, by its owner
    gen._detach_pipe_end(r)               # a closed connection: nothing to do
    w.close()


def test_pool_closed_while_a_worker_sends_its_result_lets_the_interpreter_exit(tmp_path):
    # close(cancel=True) terminates the workers. One stopped in the middle of sending its
    # result (a chunk's images, megabytes) left part of a message in the result pipe; the
    # executor's manager thread waited in recv() for the rest and shutdown(wait=True) for the
    # manager, for ever (seen once in 18 Ctrl-C's of `generate --sample --workers 3
    # --compress`). Here the worker writes half a message itself, then is terminated.
    import subprocess
    import textwrap

    script = tmp_path / "half.py"
    marker = tmp_path / "sent"
    script.write_text(textwrap.dedent("""
        import gc, multiprocessing.queues, os, struct, sys, time
        import medmnistc_fast.generate as gen

        def send_half(marker):
            # the result queue is the worker's only SimpleQueue (the call queue is a Queue)
            (queue,) = [o for o in gc.get_objects()
                        if type(o) is multiprocessing.queues.SimpleQueue]
            # a Connection message: a 4-byte big-endian length, then that many bytes
            os.write(queue._writer.fileno(), struct.pack("!i", 1 << 20) + bytes(100))
            open(marker, "w").close()
            time.sleep(60)

        if __name__ == "__main__":
            runner = gen._PoolRunner(1)
            fut = runner.call(send_half, sys.argv[1])
            deadline = time.monotonic() + 30
            while not os.path.exists(sys.argv[1]) and not fut.done():
                if time.monotonic() > deadline:
                    sys.exit("the task did not start")
                time.sleep(0.01)
            if fut.done():
                sys.exit(f"the task failed: {fut.exception()!r}")
            runner.close(cancel=True)
            print("closed", flush=True)
    """))
    try:
        proc = subprocess.run([sys.executable, str(script), str(marker)], capture_output=True,
                              text=True, timeout=60)
    except subprocess.TimeoutExpired:
        pytest.fail("close(cancel=True) did not return with a result half sent")
    assert proc.returncode == 0 and proc.stdout == "closed\n", proc.stderr


def test_outputs_written_meanwhile_by_another_run_are_not_replaced(root, tmp_path, monkeypatch):
    # generate checks every dataset's folder for outputs of other parameters up front, then
    # works through the datasets one by one. If another run (seed 6) wrote the second dataset's
    # folder in between, the first run (seed 5) replaced those outputs when it got there,
    # without overwrite=True: the check is now repeated under the folder's lock.
    import medmnistc_fast.generate as gen

    original = gen._DatasetRun.write_side_files
    other = {}

    def meanwhile(self):
        if self.inp.dataset == RGB_DS and not other:
            other["res"] = generate(GRAY_DS, tmp_path, root=root, size=SIZE, seed=6, workers=1,
                                    corruptions="pixelate")
            other["tree"] = tree(output_dir(tmp_path, GRAY_DS))
        return original(self)

    monkeypatch.setattr(gen._DatasetRun, "write_side_files", meanwhile)
    with pytest.raises(ValueError, match=r"seed=6 \(now 5\).*--overwrite"):
        generate([RGB_DS, GRAY_DS], tmp_path, root=root, size=SIZE, seed=SEED, workers=1,
                 corruptions="pixelate")
    assert other["res"][0]["written"] == ["pixelate"]
    assert tree(output_dir(tmp_path, GRAY_DS)) == other["tree"]
    assert read_json(os.path.join(output_dir(tmp_path, GRAY_DS), "manifest.json"))["seed"] == 6
    # the first dataset's file was finished before the clash was found
    assert os.path.isfile(os.path.join(output_dir(tmp_path, RGB_DS), "pixelate.npz"))


def test_one_d_labels_in_a_file_become_a_column(tmp_path):
    # MedMNIST files hold (N, 1) labels; a hand-made file with (N,) labels gets the same
    # (5 N, 1) output labels as images= / labels= input (and as the README promises), not (5 N,).
    clean = sample_split(GRAY_DS, SIZE, N)
    r = tmp_path / "root"
    r.mkdir()
    np.savez(input_path(r, GRAY_DS, SIZE), test_images=clean["test_images"],
             test_labels=clean["test_labels"][:, 0])
    out_file, out_arr = tmp_path / "file", tmp_path / "arrays"
    generate(GRAY_DS, out_file, root=r, size=SIZE, seed=SEED, corruptions="pixelate")
    generate(GRAY_DS, out_arr, images=clean["test_images"], labels=clean["test_labels"][:, 0],
             seed=SEED, corruptions="pixelate")
    with np.load(os.path.join(output_dir(out_file, GRAY_DS), "pixelate.npz")) as a, \
            np.load(os.path.join(output_dir(out_arr, GRAY_DS), "pixelate.npz")) as b:
        assert a["test_labels"].shape == (5 * N, 1)
        np.testing.assert_array_equal(a["test_labels"],
                                      np.tile(clean["test_labels"][:, :1], (5, 1)))
        np.testing.assert_array_equal(a["test_labels"], b["test_labels"])
        np.testing.assert_array_equal(a["test_images"], b["test_images"])
