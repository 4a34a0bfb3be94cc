#!/usr/bin/env python
"""Make the golden files of medmnistc_fast from the real reference, ``medmnistc`` 0.1.0.

Runs ONLY in the reference's own virtual environment (it imports ``medmnistc``, torch,
Wand/ImageMagick, scikit-image and pydicom); the package and its tests never import ``medmnistc``.
Run it by hand, never automatically. ``pip install medmnistc==0.1.0`` does not bring pydicom
(the source of the gray CT and MR test images), so add it to that venv first::

    /work/ref/REF/bin/pip install "pydicom>=3.0.1"
    /work/ref/REF/bin/python tools/make_golden.py --out tests/golden

What it writes (all under ``--out``; see ``tests/golden/README.md`` and ``MANIFEST.json``):

- ``inputs.npz``: the prepared 224 x 224 real test images (RGB and gray) and flat gray images.
- ``{corruption}.npz``: one file per corruption name, holding for every unique
  (corruption, parameters, image kind) the reference's outputs (deterministic corruptions),
  outputs plus the drawn angles (motion_blur), or per-draw statistics, histograms and a few
  exactly recorded examples (random corruptions).
- ``MANIFEST.json``: versions, image preparation, seeds, how each entry was produced, the map
  ``"{dataset}/{corruption}/{level}" -> (file, uid, array names)`` and the sha256 of every file.

Every ``.npz`` is loadable with ``numpy.load(path, allow_pickle=False)``: plain uint8, int64 and
float64 arrays only. The zip members carry a fixed timestamp, so the same inputs and library
versions give byte-identical files (and the same sha256).

References: Di Salvo, Doerrich, Ledig, "MedMNIST-C: Comprehensive benchmark and improved
classifier robustness by simulating realistic image corruptions", arXiv:2406.17536 (2024);
https://github.com/francescodisalvo05/medmnistc-api (Apache-2.0).
"""
from __future__ import annotations

import os

# One thread everywhere: reproducible results, and the pool provides the parallelism.
for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "MAGICK_THREAD_LIMIT"):
    os.environ.setdefault(_var, "1")

import argparse
import hashlib
import io
import json
import multiprocessing as mp
import platform
import random
import string
import sys
import tempfile
import time
import zipfile
import zlib

import numpy

# The reference's motion blur calls np.fromstring in binary mode, removed in NumPy 2.
numpy.fromstring = lambda b, dtype=float, **k: numpy.frombuffer(b, dtype)  # noqa: E731

np = numpy

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                "benchmarks"))
from _common import require_reference  # noqa: E402

# design.md section 3's tolerances, the table tests/test_golden.py uses (one copy).
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from tests.tolerances import manifest_form  # noqa: E402

SIZE = 224
FORMAT_VERSION = 1
BASE_SEED = 20240625

RGB_IMAGES = ("ihc", "retina")
GRAY_IMAGES = ("cell", "microaneurysms", "ct_small", "mr_small")
FLAT_LEVELS = (0, 64, 128, 200, 255)

DETERMINISTIC = (
    "pixelate", "jpeg_compression", "defocus_blur", "zoom_blur", "gaussian_blur",
    "brightness_up", "brightness_down", "contrast_up", "contrast_down",
    "gamma_corr_up", "gamma_corr_down", "saturate", "black_corner",
)
NOISES = ("gaussian_noise", "speckle_noise", "impulse_noise", "shot_noise")
ARTIFACTS = ("stain_deposit", "bubble", "characters")
MOTION = ("motion_blur",)

STAT_COLUMNS = ("mean_diff", "mean_abs_diff", "std_diff", "frac_changed_elements",
                "frac_changed_pixels")

# Columns of the recorded random draws of the artifact corruptions (python `random` calls).
MAX_LETTERS = 10
DRAW_COLUMNS = {
    "stain_deposit": ["ink_index", "x", "y"],
    "bubble": ["radius", "x", "y"],
    "characters": (["n_letters", "font_scale_pct", "x", "y", "r", "g", "b"]
                   + [f"letter{i}" for i in range(MAX_LETTERS)]),
}

MOTION_PROBE_ANGLES = (-45.0, -30.0, -12.5, 0.0, 7.0, 22.5, 30.0, 45.0)
MOTION_PROBE_PARAMS = ((15, 5), (20, 15), (3, 3), (10, 5))


# --------------------------------------------------------------------------------------------
# Image preparation (deterministic)
# --------------------------------------------------------------------------------------------

PREPARATION = {
    "size": SIZE,
    "crop": "central square crop of side s = min(H, W): rows [(H - s) // 2, (H - s) // 2 + s), "
            "columns [(W - s) // 2, (W - s) // 2 + s)",
    "resize": "PIL.Image.resize((224, 224), PIL.Image.LANCZOS) on the uint8 crop "
              "(mode 'RGB' or 'L'; default reducing_gap=None)",
    "rgb_sources": {
        "ihc": "skimage.data folder, ihc.png (immunohistochemistry, 512 x 512 RGB), "
               "converted with PIL .convert('RGB')",
        "retina": "skimage.data folder, retina.jpg (fundus, 1411 x 1411 RGB), "
                  "converted with PIL .convert('RGB')",
    },
    "gray_sources": {
        "cell": "skimage.data folder, cell.png (660 x 550 L), PIL .convert('L')",
        "microaneurysms": "skimage.data folder, microaneurysms.png (102 x 102 L), "
                          "PIL .convert('L') (upsampled by the resize)",
        "ct_small": "pydicom.data.get_testdata_file('CT_small.dcm') (128 x 128 int16); "
                    "raw stored pixel_array v windowed by its own min/max: "
                    "u8 = clip(round((v - min) / (max - min) * 255), 0, 255) before crop+resize",
        "mr_small": "pydicom.data.get_testdata_file('MR_small.dcm') (64 x 64 int16); "
                    "same min/max windowing as ct_small",
    },
    "flat": "flat gray images: a 224 x 224 uint8 array filled with each of FLAT_LEVELS "
            "(RGB datasets use it with R = G = B)",
    "flat_levels": list(FLAT_LEVELS),
}


def _crop_resize(pil):
    from PIL import Image
    w, h = pil.size
    s = min(w, h)
    top, left = (h - s) // 2, (w - s) // 2
    pil = pil.crop((left, top, left + s, top + s))
    return pil.resize((SIZE, SIZE), Image.LANCZOS)


def _window_minmax(v):
    v = v.astype(np.float64)
    lo, hi = float(v.min()), float(v.max())
    return np.clip(np.round((v - lo) / (hi - lo) * 255.0), 0, 255).astype(np.uint8), lo, hi


def prepare_inputs():
    """Return ``{name: uint8 array}`` of the prepared images and a dict of source details."""
    from PIL import Image
    import skimage.data
    import pydicom
    from pydicom.data import get_testdata_file

    folder = os.path.dirname(skimage.data.__file__)
    out, details = {}, {}
    for name, fname in (("ihc", "ihc.png"), ("retina", "retina.jpg")):
        path = os.path.join(folder, fname)
        with Image.open(path) as im:
            out[name] = np.array(_crop_resize(im.convert("RGB")))
        details[name] = {"file": fname, "sha256": _sha256_file(path)}
    for name, fname in (("cell", "cell.png"), ("microaneurysms", "microaneurysms.png")):
        path = os.path.join(folder, fname)
        with Image.open(path) as im:
            out[name] = np.array(_crop_resize(im.convert("L")))
        details[name] = {"file": fname, "sha256": _sha256_file(path)}
    for name, fname in (("ct_small", "CT_small.dcm"), ("mr_small", "MR_small.dcm")):
        path = get_testdata_file(fname)
        u8, lo, hi = _window_minmax(pydicom.dcmread(path).pixel_array)
        out[name] = np.array(_crop_resize(Image.fromarray(u8, mode="L")))
        details[name] = {"file": fname, "sha256": _sha256_file(path),
                         "window_min": lo, "window_max": hi}
    for name in RGB_IMAGES:
        assert out[name].shape == (SIZE, SIZE, 3) and out[name].dtype == np.uint8
    for name in GRAY_IMAGES:
        assert out[name].shape == (SIZE, SIZE) and out[name].dtype == np.uint8
    return out, details


# --------------------------------------------------------------------------------------------
# Small utilities
# --------------------------------------------------------------------------------------------

def _sha256_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _seed(*parts):
    """A 31-bit seed from BASE_SEED and the given parts (stable across runs and platforms)."""
    text = "|".join(str(p) for p in (BASE_SEED,) + parts)
    return zlib.crc32(text.encode("utf-8")) & 0x7FFFFFFF


def _canon(param):
    """JSON-able canonical form of a severity parameter (exact float reprs)."""
    if isinstance(param, np.ndarray):
        return [float(v) for v in param.tolist()]
    if isinstance(param, (tuple, list)):
        return [_canon(p) for p in param]
    if isinstance(param, (np.integer, int)) and not isinstance(param, bool):
        return int(param)
    if isinstance(param, (np.floating, float)):
        return float(param)
    raise TypeError(f"unexpected parameter {param!r}")


def write_npz(path, arrays):
    """Write ``arrays`` as an uncompressed-name, deflated .npz atomically and deterministically."""
    d = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=".tmp_", suffix=".npz", dir=d)
    os.close(fd)
    try:
        with zipfile.ZipFile(tmp, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=9) as zf:
            for name in sorted(arrays):
                arr = np.ascontiguousarray(arrays[name])
                assert arr.dtype in (np.uint8, np.int64, np.float64), (name, arr.dtype)
                buf = io.BytesIO()
                np.lib.format.write_array(buf, arr, allow_pickle=False)
                info = zipfile.ZipInfo(name + ".npy", date_time=(1980, 1, 1, 0, 0, 0))
                info.compress_type = zipfile.ZIP_DEFLATED
                info.external_attr = 0o644 << 16
                zf.writestr(info, buf.getvalue(), compresslevel=9)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def write_text(path, text):
    d = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=".tmp_", suffix=".json", dir=d)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(text)
    os.chmod(tmp, 0o644)
    os.replace(tmp, path)


# --------------------------------------------------------------------------------------------
# Calling the reference (worker side)
# --------------------------------------------------------------------------------------------

_W = {}


def _worker_init(inputs):
    import cv2
    import torch
    cv2.setNumThreads(1)
    torch.set_num_threads(1)
    from medmnistc.corruptions.registry import CORRUPTIONS_DS
    import medmnistc.corruptions.microscopy as micro
    _W["inputs"] = inputs
    _W["ds"] = CORRUPTIONS_DS
    _W["micro"] = micro


class _RecordingRandom:
    """Stands in for the ``random`` module inside ``medmnistc.corruptions.microscopy``."""

    def __init__(self, seed):
        self._r = random.Random(seed)
        self.log = []

    def randint(self, a, b):
        v = self._r.randint(a, b)
        self.log.append(("randint", v))
        return v

    def choice(self, seq):
        v = self._r.choice(seq)
        self.log.append(("choice", v))
        return v


def _reference_call(corruptor, kind, clean, sev_index, seed):
    """The exact per-image pipeline of the reference's DatasetManager, with seeded state.

    Returns (output as stored by the reference, output before the final L conversion).
    """
    from PIL import Image
    random.seed(seed)
    np.random.seed(seed)
    corruptor.rng = np.random.default_rng(seed)  # only ImpulseNoise reads it
    img = Image.fromarray(clean).convert("RGB")
    out = corruptor.apply(img, sev_index)
    raw = np.asarray(out)
    if kind == "gray":
        out = Image.fromarray(out).convert("L")
    out = np.array(out)
    assert out.dtype == np.uint8
    return out, raw


def _stats(out, clean):
    d = out.astype(np.int16) - clean.astype(np.int16)
    changed = d != 0
    pix = changed.any(axis=-1) if d.ndim == 3 else changed
    return [float(d.mean()), float(np.abs(d).mean()), float(d.std()),
            float(changed.mean()), float(pix.mean())]


def _decode_draws(corruption, log, max_param):
    """Turn the log of python ``random`` calls into one row per mark/bubble/word."""
    vals = [v for _, v in log]
    rows = []
    if corruption == "stain_deposit":
        if max_param > 1:
            n, vals = vals[0], vals[1:]
        else:
            n = max_param
        for i in range(n):
            rows.append(vals[3 * i:3 * i + 3])
        assert len(vals) == 3 * n
    elif corruption == "bubble":
        n, vals = vals[0], vals[1:]
        for i in range(n):
            rows.append(vals[3 * i:3 * i + 3])
        assert len(vals) == 3 * n
    elif corruption == "characters":
        n, pos = vals[0], 1
        for _ in range(n):
            nl, scale = vals[pos], vals[pos + 1]
            letters = vals[pos + 2:pos + 2 + nl]
            x, y, r, g, b = vals[pos + 2 + nl:pos + 7 + nl]
            pos += 7 + nl
            codes = [string.ascii_lowercase.index(c) for c in letters]
            rows.append([nl, scale, x, y, r, g, b] + codes + [-1] * (MAX_LETTERS - nl))
        assert pos == len(vals)
    return rows


def run_job(job):
    """One unit of work: (uid, image). Returns {array name: array} and small metadata."""
    t0 = time.perf_counter()
    ds = _W["ds"]
    corruption, kind, uid, image = job["corruption"], job["kind"], job["uid"], job["image"]
    corruptor = ds[job["dataset"]][corruption]
    sev = job["severity_index"]
    arrays, meta = {}, {}
    prefix = f"{uid}__{image}"

    if job["mode"] == "exact":
        clean = _W["inputs"][image]
        out, raw = _reference_call(corruptor, kind, clean, sev, seed=_seed(uid, corruption, image))
        arrays[prefix + "__out"] = out
        meta["shape_before_L"] = list(raw.shape)
        if kind == "gray":
            meta["rgb_channels_equal_before_L"] = bool(
                raw.ndim == 3 and np.array_equal(raw[..., 0], raw[..., 1])
                and np.array_equal(raw[..., 0], raw[..., 2]))

    elif job["mode"] == "motion" and image != "__probe__":
        clean = _W["inputs"][image]
        outs, angles, seeds = [], [], []
        for j in range(job["n_angles"]):
            s = _seed(uid, corruption, image, j)
            drawn = []
            orig = np.random.uniform

            def rec(*a, **k):
                v = orig(*a, **k)
                drawn.append(float(v))
                return v
            np.random.uniform = rec
            try:
                out, raw = _reference_call(corruptor, kind, clean, sev, seed=s)
            finally:
                np.random.uniform = orig
            assert len(drawn) == 1
            outs.append(out)
            angles.append(drawn[0])
            seeds.append(s)
            meta.setdefault("shapes_before_L", []).append(list(raw.shape))
        arrays[prefix + "__out"] = np.stack(outs)
        arrays[prefix + "__angle"] = np.array(angles, dtype=np.float64)
        arrays[prefix + "__seed"] = np.array(seeds, dtype=np.int64)

    elif job["mode"] == "motion":  # the one-pixel probe, RGB pipeline, fixed angles
        from PIL import Image
        from medmnistc.corruptions.filter import MotionBlur
        probe = np.zeros((SIZE, SIZE, 3), np.uint8)
        probe[SIZE // 2, SIZE // 2] = 255
        arrays["probe__input"] = probe
        outs = np.zeros((len(MOTION_PROBE_PARAMS), len(MOTION_PROBE_ANGLES), SIZE, SIZE, 3),
                        np.uint8)
        orig = np.random.uniform
        for i, p in enumerate(MOTION_PROBE_PARAMS):
            mb = MotionBlur(severity_params=[p])
            for j, ang in enumerate(MOTION_PROBE_ANGLES):
                np.random.uniform = lambda *a, _v=ang, **k: _v
                try:
                    outs[i, j] = mb.apply(Image.fromarray(probe).convert("RGB"), 0)
                finally:
                    np.random.uniform = orig
        arrays["probe__out"] = outs
        arrays["probe__angles"] = np.array(MOTION_PROBE_ANGLES, dtype=np.float64)
        arrays["probe__params"] = np.array(MOTION_PROBE_PARAMS, dtype=np.float64)

    elif job["mode"] == "stats" and image != "__flat__":
        clean = _W["inputs"][image]
        n = job["draws"]
        stats = np.zeros((n, len(STAT_COLUMNS)), np.float64)
        seeds = np.zeros(n, np.int64)
        k_ex = job["n_examples"]
        ex_out, ex_draws = [], []
        micro = _W["micro"]
        for j in range(n):
            s = _seed(uid, corruption, image, j)
            seeds[j] = s
            if corruption in ARTIFACTS:
                rec = _RecordingRandom(s)
                saved = micro.random
                micro.random = rec
                try:
                    out, _ = _reference_call(corruptor, kind, clean, sev, seed=s)
                finally:
                    micro.random = saved
            else:
                out, _ = _reference_call(corruptor, kind, clean, sev, seed=s)
            assert out.shape == clean.shape, (out.shape, clean.shape)
            stats[j] = _stats(out, clean)
            if corruption in ARTIFACTS and j < k_ex:
                ex_out.append(out)
                ex_draws.append(_decode_draws(corruption, rec.log, job["max_count"]))
        arrays[prefix + "__stats"] = stats
        arrays[prefix + "__seed"] = seeds
        if ex_out:
            ncol = len(DRAW_COLUMNS[corruption])
            m = max(len(r) for r in ex_draws)
            dr = np.full((len(ex_draws), m, ncol), -1, np.int64)
            for a, rows in enumerate(ex_draws):
                if rows:
                    dr[a, :len(rows)] = np.array(rows, np.int64)
            # stored as the wrap-around difference: out == clean + ex_delta in uint8 arithmetic
            # (mostly zeros, so it deflates 10-200x better than the outputs themselves)
            arrays[prefix + "__ex_delta"] = (np.stack(ex_out) - clean[None]).astype(np.uint8)
            arrays[prefix + "__ex_draws"] = dr
            arrays[prefix + "__ex_seed"] = seeds[:k_ex].copy()

    else:  # stats on flat images: histogram of the output value per input level (noises)
        hist = np.zeros((len(FLAT_LEVELS), 256), np.int64)
        for li, lev in enumerate(FLAT_LEVELS):
            clean = np.full((SIZE, SIZE), lev, np.uint8)
            if kind == "rgb":
                clean = np.repeat(clean[..., None], 3, axis=-1)
            for j in range(job["hist_draws"]):
                out, _ = _reference_call(corruptor, kind, clean, sev,
                                         seed=_seed(uid, corruption, "flat", lev, j))
                hist[li] += np.bincount(out.ravel(), minlength=256)
        arrays[f"{uid}__flat_hist"] = hist

    meta["seconds"] = time.perf_counter() - t0
    return job, arrays, meta


# --------------------------------------------------------------------------------------------
# Planning (main side)
# --------------------------------------------------------------------------------------------

def _mode(corruption):
    if corruption in DETERMINISTIC:
        return "exact"
    if corruption in MOTION:
        return "motion"
    if corruption in NOISES or corruption in ARTIFACTS:
        return "stats"
    raise ValueError(corruption)


def plan(args):
    """Deduplicate (dataset, corruption, level) into unique entries and list the jobs."""
    from medmnistc.corruptions.registry import CORRUPTIONS_DS, DATASET_RGB

    uniques = {}    # dedup key -> uid record
    counters = {}   # (corruption, kind) -> next index
    entries = {}
    for dataset in sorted(CORRUPTIONS_DS):
        kind = "rgb" if DATASET_RGB[dataset] else "gray"
        for corruption, corruptor in CORRUPTIONS_DS[dataset].items():
            for sev in range(5):
                param = _canon(corruptor.severity_params[sev])
                extra = None
                if corruption == "stain_deposit":
                    extra = str(max(3, sev))  # ink-size key of the reference
                key = (corruption, kind, json.dumps(param), extra)
                if key not in uniques:
                    k = counters.get((corruption, kind), 0)
                    counters[(corruption, kind)] = k + 1
                    uniques[key] = {
                        "uid": f"{kind}{k:02d}", "corruption": corruption, "kind": kind,
                        "param": param, "ink_key": extra, "mode": _mode(corruption),
                        "dataset": dataset, "severity_index": sev,
                        "used_by": [],
                    }
                u = uniques[key]
                u["used_by"].append(f"{dataset}/{corruption}/{sev + 1}")
                entries[f"{dataset}/{corruption}/{sev + 1}"] = u

    jobs = []
    for u in uniques.values():
        images = RGB_IMAGES if u["kind"] == "rgb" else GRAY_IMAGES
        base = {k: u[k] for k in ("uid", "corruption", "kind", "mode", "dataset",
                                  "severity_index")}
        base["max_count"] = u["param"] if u["corruption"] == "stain_deposit" else None
        for image in images:
            job = dict(base, image=image)
            if u["mode"] == "motion":
                job["n_angles"] = args.motion_angles
            if u["mode"] == "stats":
                job["draws"] = args.draws
                job["n_examples"] = args.examples
            jobs.append(job)
        if u["corruption"] in NOISES:
            jobs.append(dict(base, image="__flat__", hist_draws=args.hist_draws))
    # the one-pixel motion probe (not tied to a dataset entry)
    first_motion = next(u for u in uniques.values() if u["mode"] == "motion")
    jobs.append({k: first_motion[k] for k in ("uid", "corruption", "kind", "mode", "dataset",
                                             "severity_index")} | {"image": "__probe__"})
    return uniques, entries, jobs


def _job_cost(job):
    if job["mode"] == "stats":
        if job["image"] == "__flat__":
            return 5 * job["hist_draws"] * (3 if job["kind"] == "rgb" else 2)
        return job["draws"] * (3 if job["kind"] == "rgb" else 2)
    if job["mode"] == "motion":
        return 40
    return 1


def versions():
    import PIL
    import scipy
    import skimage
    import torch
    import torchvision
    import cv2
    import pydicom
    import wand.version
    import importlib.metadata as md
    return {
        "medmnistc": md.version("medmnistc"),
        "python": platform.python_version(),
        "numpy": np.__version__,
        "Pillow": PIL.__version__,
        "scikit-image": skimage.__version__,
        "scipy": scipy.__version__,
        "torch": torch.__version__,
        "torchvision": torchvision.__version__,
        "opencv": cv2.__version__,
        "Wand": wand.version.VERSION,
        "ImageMagick": wand.version.MAGICK_VERSION,
        "pydicom": pydicom.__version__,
        "platform": platform.platform(),
        "machine": platform.machine(),
    }


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", default="tests/golden", help="output folder (default tests/golden)")
    p.add_argument("--draws", type=int, default=200,
                   help="draws per (unique entry, image) for the random corruptions "
                        "(default 200)")
    p.add_argument("--hist-draws", type=int, default=8,
                   help="draws per (noise entry, flat level) for the output histograms "
                        "(default 8)")
    p.add_argument("--examples", type=int, default=5,
                   help="exactly recorded examples per (artifact entry, image) (default 5)")
    p.add_argument("--motion-angles", type=int, default=2,
                   help="seeded reference calls (angles) per (motion entry, image) (default 2)")
    p.add_argument("--workers", type=int, default=os.cpu_count() or 1,
                   help="worker processes (default: the number of CPUs)")
    args = p.parse_args(argv)
    require_reference("tools/make_golden.py", ("medmnistc", "cv2", "torch", "torchvision",
                                               "scipy", "skimage", "pydicom", "wand"))

    t_start = time.perf_counter()
    os.makedirs(args.out, exist_ok=True)
    inputs, input_details = prepare_inputs()
    uniques, entries, jobs = plan(args)
    jobs.sort(key=_job_cost, reverse=True)  # longest first, for load balance
    print(f"{len(entries)} (dataset, corruption, level) entries -> {len(uniques)} unique, "
          f"{len(jobs)} jobs, {args.workers} workers", flush=True)

    per_file = {}
    job_meta = {}
    ctx = mp.get_context("fork")
    with ctx.Pool(args.workers, initializer=_worker_init, initargs=(inputs,)) as pool:
        for i, (job, arrays, meta) in enumerate(pool.imap_unordered(run_job, jobs, chunksize=1)):
            per_file.setdefault(job["corruption"], {}).update(arrays)
            job_meta[(job["corruption"], job["uid"], job["image"])] = meta
            if (i + 1) % 50 == 0 or i + 1 == len(jobs):
                print(f"  {i + 1}/{len(jobs)} jobs, {time.perf_counter() - t_start:.0f} s",
                      flush=True)
    t_ref = time.perf_counter() - t_start

    # ---- write the data files -------------------------------------------------------------
    files = {}
    inp = {f"image__{n}": a for n, a in inputs.items()}
    for lev in FLAT_LEVELS:
        inp[f"flat__{lev}"] = np.full((SIZE, SIZE), lev, np.uint8)
    write_npz(os.path.join(args.out, "inputs.npz"), inp)
    for corruption, arrays in sorted(per_file.items()):
        write_npz(os.path.join(args.out, f"{corruption}.npz"), arrays)
    for fname in ["inputs.npz"] + [f"{c}.npz" for c in sorted(per_file)]:
        path = os.path.join(args.out, fname)
        files[fname] = {"sha256": _sha256_file(path), "bytes": os.path.getsize(path)}

    # ---- the manifest -----------------------------------------------------------------------
    uid_records = {}
    for u in uniques.values():
        images = list(RGB_IMAGES if u["kind"] == "rgb" else GRAY_IMAGES)
        arrays = {}
        for im in images:
            pre = f"{u['uid']}__{im}"
            if u["mode"] == "exact":
                arrays[im] = {"out": pre + "__out"}
            elif u["mode"] == "motion":
                arrays[im] = {"out": pre + "__out", "angle": pre + "__angle",
                              "seed": pre + "__seed"}
            else:
                a = {"stats": pre + "__stats", "seed": pre + "__seed"}
                if u["corruption"] in ARTIFACTS:
                    a.update(ex_delta=pre + "__ex_delta", ex_draws=pre + "__ex_draws",
                             ex_seed=pre + "__ex_seed")
                arrays[im] = a
        rec = {
            "file": f"{u['corruption']}.npz",
            "uid": u["uid"],
            "corruption": u["corruption"],
            "kind": u["kind"],
            "mode": u["mode"],
            "param": u["param"],
            "images": images,
            "arrays": arrays,
            "made_with": {"dataset": u["dataset"], "severity_index": u["severity_index"]},
            "used_by": u["used_by"],
        }
        if u["ink_key"] is not None:
            rec["ink_key"] = u["ink_key"]
        if u["corruption"] in NOISES:
            rec["flat_hist"] = f"{u['uid']}__flat_hist"
        if u["mode"] == "exact" and u["kind"] == "gray":
            rec["rgb_channels_equal_before_L"] = all(
                job_meta[(u["corruption"], u["uid"], im)]["rgb_channels_equal_before_L"]
                for im in images)
        shapes = set()
        for im in images:
            m = job_meta[(u["corruption"], u["uid"], im)]
            for s in m.get("shapes_before_L", [m.get("shape_before_L")]):
                if s is not None:
                    shapes.add(tuple(s))
        if shapes:
            rec["reference_shapes_before_L"] = sorted(list(s) for s in shapes)
        uid_records[f"{u['corruption']}/{u['uid']}"] = rec

    entry_map = {}
    for key, u in sorted(entries.items()):
        entry_map[key] = {"record": f"{u['corruption']}/{u['uid']}",
                          "file": f"{u['corruption']}.npz", "uid": u["uid"],
                          "mode": u["mode"], "kind": u["kind"], "param": u["param"]}

    seconds_by_corruption = {}
    for (c, _, _), m in job_meta.items():
        seconds_by_corruption[c] = seconds_by_corruption.get(c, 0.0) + m["seconds"]

    script = os.path.abspath(__file__)
    manifest = {
        "format_version": FORMAT_VERSION,
        "description": "Golden files of medmnistc_fast made from the reference medmnistc 0.1.0 by "
                       "tools/make_golden.py. Never regenerate automatically; see README.md.",
        "generator": {"script": "tools/make_golden.py", "sha256": _sha256_file(script),
                      "command": "/work/ref/REF/bin/python tools/make_golden.py --out tests/golden",
                      "arguments": {"draws": args.draws, "hist_draws": args.hist_draws,
                                    "examples": args.examples,
                                    "motion_angles": args.motion_angles,
                                    "workers": args.workers},
                      "threads": "OMP/OpenBLAS/MKL/MAGICK_THREAD_LIMIT=1, cv2.setNumThreads(1), "
                                 "torch.set_num_threads(1)",
                      "seconds_total": None,
                      "seconds_reference_calls_wall": round(t_ref, 1),
                      "cpu_seconds_by_corruption": {k: round(v, 1) for k, v in
                                                    sorted(seconds_by_corruption.items())}},
        "versions": versions(),
        "size": SIZE,
        "images": {
            "rgb": list(RGB_IMAGES), "gray": list(GRAY_IMAGES),
            "file": "inputs.npz", "array": "image__{name}",
            "flat_array": "flat__{level}", "flat_levels": list(FLAT_LEVELS),
            "preparation": PREPARATION, "sources": input_details,
        },
        "pipeline": {
            "rgb": "out = np.array(corruptor.apply(Image.fromarray(img).convert('RGB'), level - 1))",
            "gray": "out = np.array(Image.fromarray(np.array(corruptor.apply("
                    "Image.fromarray(img).convert('RGB'), level - 1))).convert('L'))",
            "note": "exactly the per-image pipeline of medmnistc/dataset_manager.py; outputs are "
                    "uint8 (224, 224, 3) for rgb, (224, 224) for gray",
        },
        "seeds": {
            "base_seed": BASE_SEED,
            "rule": "seed = zlib.crc32('|'.join(str(p) for p in (base_seed, *parts)).encode()) & "
                    "0x7FFFFFFF; parts = (uid, corruption, image, draw) for stats draws, "
                    "(uid, corruption, image, j) for motion angles, (uid, corruption, 'flat', "
                    "level, j) for flat histograms, (uid, corruption, image) for exact ones",
            "per_call": "before every reference call: random.seed(seed); np.random.seed(seed); "
                        "corruptor.rng = np.random.default_rng(seed) (ImpulseNoise). For "
                        "stain_deposit/bubble/characters the module-level `random` of "
                        "medmnistc.corruptions.microscopy is replaced during the call by a "
                        "recorder around random.Random(seed) (same stream as random.seed(seed)).",
            "recorded_seeds": "the arrays '*__seed' hold the seed of each draw/call",
        },
        "modes": {
            "exact": "deterministic corruption: '{uid}__{image}__out' is the reference output, "
                     "uint8 (224, 224, 3) rgb or (224, 224) gray",
            "motion": "'{uid}__{image}__out' uint8 (n_angles, 224, 224[, 3]); "
                      "'{uid}__{image}__angle' float64 (n_angles,) degrees, the value the "
                      "reference drew with np.random.uniform(-45, 45) (recorded by wrapping it); "
                      "'{uid}__{image}__seed' int64 (n_angles,). The file also holds a one-pixel "
                      "probe: 'probe__input' uint8 (224, 224, 3) (one white pixel at row 112, "
                      "col 112), 'probe__params' float64 (P, 2) (radius, sigma), "
                      "'probe__angles' float64 (A,), 'probe__out' uint8 (P, A, 224, 224, 3): "
                      "reference MotionBlur on the RGB pipeline with the angle forced.",
            "stats": "'{uid}__{image}__stats' float64 (draws, 5), columns stat_columns, one row "
                     "per seeded draw, computed on d = int(out) - int(clean) over all elements "
                     "(frac_changed_pixels: any channel changed); '{uid}__{image}__seed' int64 "
                     "(draws,). Noises also: '{uid}__flat_hist' int64 (5, 256): counts of output "
                     "values for flat inputs at flat_levels (all elements, all channels pooled, "
                     "hist_draws draws per level, each 224 x 224). Artifacts also: "
                     "'{uid}__{image}__ex_delta' uint8 (examples, 224, 224[, 3]): the outputs of "
                     "the first draws stored as out = (clean + ex_delta) in uint8 arithmetic "
                     "(modulo 256; i.e. ex_delta = out - clean wrapped), '{uid}__{image}__ex_draws' int64 (examples, max_items, "
                     "n_columns) the python-random values of those draws decoded by "
                     "draw_columns (rows padded with -1), '{uid}__{image}__ex_seed'.",
        },
        "motion_probe": {
            "file": "motion_blur.npz", "input": "probe__input", "out": "probe__out",
            "params": "probe__params", "angles": "probe__angles",
            "layout": "out[i, j] = reference MotionBlur(radius, sigma = params[i]) at angle "
                      "angles[j] (degrees, forced by replacing np.random.uniform) applied to "
                      "Image.fromarray(input).convert('RGB'); shape (P, A, 224, 224, 3) uint8",
        },
        "stat_columns": list(STAT_COLUMNS),
        "draw_columns": DRAW_COLUMNS,
        "draw_notes": {
            "stain_deposit": "one row per mark in drawing order: index into inks[ink_key] of "
                             "the reference's assets/inks.npz, then x (column) and y (row) of "
                             "the mark's top-left corner; ink_key = str(max(3, level - 1))",
            "bubble": "one row per bubble in drawing order: radius, x (column), y (row) of the "
                      "centre; ellipses (x-r-2, y-r-2, x+r+2, y+r+2) alpha 130 then "
                      "(x-r, y-r, x+r, y+r) alpha 100, white, on an RGBA layer pasted with itself "
                      "as mask",
            "characters": "one row per word in drawing order: number of letters, font scale in "
                          "percent (font_scale = value / 100), x, y (bottom-left org), colour "
                          "(r, g, b) as passed to cv2.putText on the RGB array, letter codes "
                          "(0 = 'a') padded with -1; FONT_HERSHEY_DUPLEX, thickness 1, LINE_AA",
        },
        "array_naming": "arrays of entry record R live in R['file'] under the names in "
                        "R['arrays'][image] (pattern '{uid}__{image}__{what}')",
        "tolerances_intended": manifest_form(),
        "files": files,
        "records": uid_records,
        "entries": entry_map,
    }
    manifest["generator"]["seconds_total"] = round(time.perf_counter() - t_start, 1)
    write_text(os.path.join(args.out, "MANIFEST.json"),
               json.dumps(manifest, indent=1, sort_keys=False) + "\n")
    total = sum(f["bytes"] for f in files.values())
    for fname, f in files.items():
        print(f"  {fname:28s} {f['bytes'] / 1e6:8.2f} MB")
    print(f"total {total / 1e6:.2f} MB in {len(files)} files; "
          f"{manifest['generator']['seconds_total']} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
