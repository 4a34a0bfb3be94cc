"""Speed of the digital-pathology suite (``pathology96``, ``pathology224``).

Method
------
Images: scikit-image's bundled immunohistochemistry image (512 x 512 RGB) cut into real patches
(25 of 96 px from the top-left 480 x 480, and their three flips/transposes: 100 distinct patches;
4 of 224 px and their flips: 16), tiled to the batch size. Seed 0 everywhere.

1. Per corruption and severity, one thread: ``corrupt_batch(X, c, s, dataset=d, seed=0,
   num_threads=1)`` on ``--batch96`` patches of 96 px (``pathology96``) and ``--batch224`` of
   224 px (``pathology224``). The first call of each (corruption, severity) is reported apart
   (``warmup_s``: it includes Numba's JIT compile or on-disk cache load); then ``--repeats``
   timed calls; the statistic is the median over calls of milliseconds per image, with the
   min-max spread. For the HSV corruptions the spec's NumPy pipeline (scikit-image rgb2hsv /
   hsv2rgb on one image) is timed beside ours for context (``numpy_skimage_ms``).
2. The Patchcamelyon-C-sized job: a 32,768-patch 96 px set (the PCam validation size) corrupted
   with all 45 (corruption, severity) pairs through ``corrupt_batch`` with 1 and 2 threads
   (outputs are discarded after each pair; no disk I/O). With ``--n`` below 32,768 the measured
   time is extrapolated linearly to 32,768 and marked as such.

Writes ``benchmarks/results_pathology.json`` and ``benchmarks/RESULTS_pathology.md``.

Usage::

    python benchmarks/bench_pathology.py [--n 32768] [--repeats 5] [--batch96 512]
                                         [--batch224 64] [--threads 1 2] [--render-only]
"""
from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import time

import numpy as np
import skimage
import skimage.color
import skimage.data

import medmnistc_fast as mf
from medmnistc_fast import registry

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import (add_output_args, cpu_description, git_commit, render_only,  # noqa: E402
                     write_results)

HERE = os.path.dirname(os.path.abspath(__file__))
PCAM_VAL = 32768


def patches(size: int) -> np.ndarray:
    """Distinct real patches of ``size`` px: a grid cut and its flips / transposes."""
    img = skimage.data.immunohistochemistry()
    n = 512 // size
    base = [img[r * size:(r + 1) * size, c * size:(c + 1) * size] for r in range(n)
            for c in range(n)]
    out = []
    for p in base:
        out += [p, p[::-1], p[:, ::-1], p.transpose(1, 0, 2)]
    return np.ascontiguousarray(np.stack(out))


def tiled(base: np.ndarray, n: int) -> np.ndarray:
    reps = -(-n // len(base))
    return np.ascontiguousarray(np.concatenate([base] * reps)[:n])


def _numpy_hsv(img: np.ndarray, channel: int, amount: float) -> np.ndarray:
    hsv = skimage.color.rgb2hsv(img / 255.0)
    if channel == 0:
        h = hsv[..., 0] + amount
        h[h > 1] -= 1
        hsv[..., 0] = h
    else:
        hsv[..., channel] = np.clip(hsv[..., channel] + amount, 0, 1)
    return (np.clip(skimage.color.hsv2rgb(hsv), 0, 1) * 255).astype(np.uint8)


HSV = {"hue": 0, "saturate": 1, "brightness": 2}


def per_corruption(dataset: str, x: np.ndarray, repeats: int) -> dict:
    rows = {}
    for name in mf.corruptions(dataset):
        for s in range(1, 6):
            t0 = time.perf_counter()
            mf.corrupt_batch(x[:2], name, s, dataset=dataset, seed=0, num_threads=1)
            warm = time.perf_counter() - t0
            calls = []
            for _ in range(repeats):
                t0 = time.perf_counter()
                mf.corrupt_batch(x, name, s, dataset=dataset, seed=0, num_threads=1)
                calls.append((time.perf_counter() - t0) / len(x) * 1e3)
            row = {"warmup_s": warm, "ms_per_image": calls,
                   "median_ms": statistics.median(calls), "min_ms": min(calls),
                   "max_ms": max(calls)}
            if name in HSV:
                amount = registry.TABLES[dataset][name][s - 1]
                k = min(len(x), 32)
                t0 = time.perf_counter()
                for img in x[:k]:
                    _numpy_hsv(img, HSV[name], amount)
                row["numpy_skimage_ms"] = (time.perf_counter() - t0) / k * 1e3
            rows[f"{name}/{s}"] = row
    return rows


def full_set(x: np.ndarray, threads: int) -> dict:
    dataset = "pathology96"
    pairs = {}
    t_all = time.perf_counter()
    for name in mf.corruptions(dataset):
        for s in range(1, 6):
            t0 = time.perf_counter()
            out = mf.corrupt_batch(x, name, s, dataset=dataset, seed=0, num_threads=threads)
            pairs[f"{name}/{s}"] = time.perf_counter() - t0
            del out
    total = time.perf_counter() - t_all
    factor = PCAM_VAL / len(x)
    return {"threads": threads, "n_images": len(x), "measured_s": total,
            "extrapolated": len(x) != PCAM_VAL, "seconds_for_32768": total * factor,
            "pair_seconds": pairs}


def markdown(res: dict) -> str:
    env = res["environment"]
    lines = [
        "# Pathology suite: speed",
        "",
        f"Machine: {env['cpu']}, {env['cpu_count']} logical CPUs; Python {env['python']}, "
        f"NumPy {env['numpy']}, Numba {env['numba']}, scikit-image {env['skimage']}; "
        f"medmnistc_fast {env['medmnistc_fast']} (commit {env['commit']}). "
        f"Load average before/after: {env['loadavg_before']} / {env['loadavg_after']} "
        "(other load on the machine only slows a run down: treat the numbers as upper bounds).",
        "",
        "Method: `benchmarks/bench_pathology.py` (docstring). Real immunohistochemistry patches, "
        "seed 0, `corrupt_batch` with one thread; median over "
        f"{res['repeats']} calls of ms per image (min-max in brackets); first call (JIT compile "
        "or cache load) reported apart.",
        "",
        "## Per corruption, one thread",
        "",
        "ms per image: mean over the five severities of the medians [min-max over all calls].",
        "",
        "| corruption | 96 px (`pathology96`) | 224 px (`pathology224`) "
        "| NumPy/scikit-image spec pipeline, 96 px | first call (s), 96 px |",
        "|---|---|---|---|---|",
    ]
    for name in mf.corruptions("pathology96"):
        r96 = [res["per_corruption"]["pathology96"][f"{name}/{s}"] for s in range(1, 6)]
        r224 = [res["per_corruption"]["pathology224"][f"{name}/{s}"] for s in range(1, 6)]

        def fmt(rows):
            med = np.mean([r["median_ms"] for r in rows])
            lo = min(r["min_ms"] for r in rows)
            hi = max(r["max_ms"] for r in rows)
            return f"{med:.3f} [{lo:.3f}-{hi:.3f}]"

        base = (f"{np.mean([r['numpy_skimage_ms'] for r in r96]):.2f}"
                if "numpy_skimage_ms" in r96[0] else "")
        warm = max(r["warmup_s"] for r in r96)
        lines.append(f"| {name} | {fmt(r96)} | {fmt(r224)} | {base} | {warm:.2f} |")
    lines += ["", "Per severity (median ms per image, 96 px / 224 px):", "",
              "| corruption | s1 | s2 | s3 | s4 | s5 |", "|---|---|---|---|---|---|"]
    for name in mf.corruptions("pathology96"):
        cells = []
        for s in range(1, 6):
            a = res["per_corruption"]["pathology96"][f"{name}/{s}"]["median_ms"]
            b = res["per_corruption"]["pathology224"][f"{name}/{s}"]["median_ms"]
            cells.append(f"{a:.3f} / {b:.3f}")
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    lines += ["", "## A Patchcamelyon-C-sized set: 32,768 patches of 96 px x 45 pairs", "",
              "| threads | images measured | measured (s) | for 32,768 patches (s) "
              "| corrupted images per second |",
              "|---|---|---|---|---|"]
    for run in res["full_set"]:
        total = run["seconds_for_32768"]
        note = " (extrapolated)" if run["extrapolated"] else ""
        lines.append(f"| {run['threads']} | {run['n_images']:,} | {run['measured_s']:.1f} | "
                     f"{total:.1f}{note} | {45 * PCAM_VAL / total:,.0f} |")
    est = sum(r["median_ms"] for r in res["per_corruption"]["pathology96"].values()) * PCAM_VAL
    lines += ["", f"For comparison, the sum over the 45 pairs of the one-thread per-image medians "
              f"above gives {est / 1e3:.0f} s for 32,768 patches with one thread (this run's "
              "full-set times include the load of other jobs on the machine).",
              "", "Per corruption, seconds for the set (sum over the five severities):", "",
              "| corruption | " + " | ".join(f"{r['threads']} thread(s)" for r in res["full_set"])
              + " |", "|---|" + "---|" * len(res["full_set"])]
    for name in mf.corruptions("pathology96"):
        cells = []
        for run in res["full_set"]:
            f = PCAM_VAL / run["n_images"]
            secs = sum(run["pair_seconds"][f"{name}/{s}"] for s in range(1, 6))
            cells.append(f"{secs * f:.1f}")
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=PCAM_VAL,
                    help=f"96 px images in the full-set run (default {PCAM_VAL}; a time for "
                         f"fewer is extrapolated to {PCAM_VAL})")
    ap.add_argument("--repeats", type=int, default=5,
                    help="timed calls per (corruption, severity) (default 5)")
    ap.add_argument("--batch96", type=int, default=512,
                    help="96 px patches per call in the per-corruption timing (default 512)")
    ap.add_argument("--batch224", type=int, default=64,
                    help="224 px patches per call in the per-corruption timing (default 64)")
    ap.add_argument("--threads", type=int, nargs="+", default=[1, 2],
                    help="thread counts of the full-set runs (default 1 2)")
    add_output_args(ap, "pathology")
    args = ap.parse_args(argv)
    if render_only(args, markdown):
        return

    import numba

    env = {"cpu": cpu_description(), "cpu_count": os.cpu_count(),
           "python": platform.python_version(),
           "numpy": np.__version__, "numba": numba.__version__, "skimage": skimage.__version__,
           "medmnistc_fast": mf.__version__, "commit": git_commit(),
           "loadavg_before": [round(v, 2) for v in os.getloadavg()]}
    p96, p224 = patches(96), patches(224)
    res = {"environment": env, "repeats": args.repeats, "per_corruption": {}}
    res["per_corruption"]["pathology96"] = per_corruption("pathology96",
                                                          tiled(p96, args.batch96), args.repeats)
    res["per_corruption"]["pathology224"] = per_corruption("pathology224",
                                                           tiled(p224, args.batch224), args.repeats)
    x = tiled(p96, args.n)
    res["full_set"] = [full_set(x, t) for t in args.threads]
    env["loadavg_after"] = [round(v, 2) for v in os.getloadavg()]
    write_results(args, res, markdown)


if __name__ == "__main__":
    main()
