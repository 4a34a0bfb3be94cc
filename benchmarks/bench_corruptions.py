"""Per-(dataset, corruption) timing at 224 px, one thread, ours beside the reference in one run.

Method (see benchmarks/README.md): two real images of each kind (medmnistc_fast.sample); for each
(dataset, corruption) pair, a warm-up call per level (its time, which includes Numba's JIT compile
or cache load, is reported apart), then REPEATS timed passes over the five levels and both images.
Ours runs single-image ``corrupt`` calls (pinned seed), the reference runs its DatasetManager
per-image pipeline in its own venv (``--reference-python``), on the same images, in a subprocess of
this same run, with glibc's malloc keeping freed memory (``_common.REFERENCE_MALLOC``: without it
the reference's large-array corruptions ran at one of two speeds, 2x apart, depending on its
process's heap). The passes alternate: one pass of ours over every pair, then one pass of the
reference (after its own untimed warm-up call per level), REPEATS times, so that a change of
machine speed during the run (this is a shared VM) hits both sides alike. Statistic: the median
over passes of the mean seconds per image, with the min-max spread; the speed-up is the median over
passes of the per-pass ratio. Also measured: ``corrupt_batch`` throughput (1 and 2 threads,
1,000 images, level 3) at 28 px for every pair and at 224 px for the pairs of ``PAIRS_224``.

Usage::

    python benchmarks/bench_corruptions.py --reference-python /path/to/REF/bin/python
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

import medmnistc_fast as mf
from medmnistc_fast.sample import sample_images
from _common import (REFERENCE_MALLOC, add_output_args, add_reference_arg, cpu_description,
                     git_commit, ratio_summary, reference_env, render_only, write_results)

HERE = os.path.dirname(os.path.abspath(__file__))


def time_ours(images: dict, repeats: int, warm_up: bool = True) -> dict:
    out = {}
    for dataset in mf.DATASETS:
        imgs = images["rgb"] if mf.registry.RGB[dataset] else images["gray"]
        for corruption in mf.corruptions(dataset):
            warm = None
            if warm_up:
                t0 = time.perf_counter()
                for level in range(1, 6):
                    mf.corrupt(imgs[0], corruption, level, dataset=dataset, seed=0)
                warm = time.perf_counter() - t0
            passes = []
            for _ in range(repeats):
                t0 = time.perf_counter()
                for level in range(1, 6):
                    for i, img in enumerate(imgs):
                        mf.corrupt(img, corruption, level, dataset=dataset, seed=0, index=i)
                passes.append((time.perf_counter() - t0) / (5 * len(imgs)))
            out[f"{dataset}/{corruption}"] = {"warmup_s": warm, "seconds_per_image": passes}
    return out


def time_reference(ref_python: str, images: dict, repeats: int) -> dict | None:
    with tempfile.TemporaryDirectory() as tmp:
        src = os.path.join(tmp, "in.npz")
        dst = os.path.join(tmp, "out.json")
        np.savez(src, **images)
        subprocess.run([ref_python, os.path.join(HERE, "_reference_harness.py"), src, dst,
                        str(repeats)], check=True, env=reference_env())
        with open(dst) as f:
            return json.load(f)


#: Pairs timed as 1,000-image batches at 224 px (one per kind of kernel, RGB and gray).
PAIRS_224 = ("pathmnist/motion_blur", "pathmnist/defocus_blur", "pathmnist/saturate",
             "pathmnist/pixelate", "pathmnist/bubble", "dermamnist/zoom_blur",
             "dermamnist/gaussian_noise", "chestmnist/shot_noise", "chestmnist/gaussian_blur",
             "chestmnist/contrast_up", "chestmnist/jpeg_compression", "tissuemnist/impulse_noise")


def batch_throughput(n: int = 1000, size: int = 28, pairs=None) -> dict:
    """images/s of ``corrupt_batch`` on ``n`` images at ``size`` px, 1 and 2 threads."""
    rows = {}
    imgs = {"rgb": sample_images(n, size, rgb=True), "gray": sample_images(n, size, rgb=False)}
    for dataset in mf.DATASETS:
        x = imgs["rgb"] if mf.registry.RGB[dataset] else imgs["gray"]
        for corruption in mf.corruptions(dataset):
            if pairs is not None and f"{dataset}/{corruption}" not in pairs:
                continue
            mf.corrupt_batch(x[:8], corruption, 5, dataset=dataset, seed=0, num_threads=1)
            res = {}
            for threads in (1, 2):
                best = float("inf")
                for _ in range(3):
                    t0 = time.perf_counter()
                    mf.corrupt_batch(x, corruption, 3, dataset=dataset, seed=0,
                                     num_threads=threads)
                    best = min(best, time.perf_counter() - t0)
                res[f"images_per_s_{threads}t"] = n / best
            res["speedup_2t"] = res["images_per_s_2t"] / res["images_per_s_1t"]
            rows[f"{dataset}/{corruption}"] = res
    return rows


def markdown(result: dict) -> str:
    lines = ["# Corruption benchmark (224 px, one thread)", "",
             f"Commit {result['meta']['commit']}, {result['meta']['date']}, "
             f"{result['meta']['machine']}, medmnistc_fast {result['meta']['version']}; "
             f"reference: {result['meta'].get('reference_versions') or 'not run'}"
             + (f", run with {result['meta']['reference_env']}"
                if result['meta'].get('reference_env') else "") + ".",
             f"Median over {result['meta']['repeats']} alternating passes (ours, reference) of ms "
             "per image (5 levels x 2 real images); spread = min-max over passes; speed-up = "
             "median of the per-pass ratios. Warm-up (JIT compile or cache load) apart.",
             "", "| dataset | corruption | ours ms (spread) | reference ms (spread) | speed-up | "
             "28 px img/s 1 thread | 2 threads | 2-thread speed-up | warm-up s |",
             "|---|---|---|---|---|---|---|---|---|"]
    ratios = []
    for key, row in result["pairs"].items():
        d, c = key.split("/")
        ours = row["ours_ms"]
        ref = row.get("reference_ms")
        ratio = row.get("speedup")
        if ratio is not None:
            ratios.append(ratio)
        b = result["batch28"][key]
        lines.append(
            f"| {d} | {c} | {ours[0]:.3f} ({ours[1]:.3f}-{ours[2]:.3f}) | "
            + (f"{ref[0]:.2f} ({ref[1]:.2f}-{ref[2]:.2f}) | {ratio:.1f}x" if ref else "- | -")
            + f" | {b['images_per_s_1t']:.0f} | {b['images_per_s_2t']:.0f} | "
              f"{b['speedup_2t']:.2f} | {row['warmup_s']:.2f} |")
    if ratios:
        lines += ["", f"Speed-up over all {len(ratios)} pairs: {ratio_summary(ratios)}."]
    b224 = result.get("batch224")
    if b224:
        lines += ["", "## 1,000-image batches at 224 px (`corrupt_batch`, level 3)", "",
                  "| dataset | corruption | img/s 1 thread | img/s 2 threads | 2-thread speed-up |",
                  "|---|---|---|---|---|"]
        for key, b in b224.items():
            d, c = key.split("/")
            lines.append(f"| {d} | {c} | {b['images_per_s_1t']:.0f} | "
                         f"{b['images_per_s_2t']:.0f} | {b['speedup_2t']:.2f} |")
        sp = [b["speedup_2t"] for b in b224.values()]
        lines += ["", f"Median 2-thread speed-up at 224 px: {statistics.median(sp):.2f}x."]
    sp28 = [b["speedup_2t"] for b in result["batch28"].values()]
    lines += ["", f"Median 2-thread speed-up at 28 px (1,000 images): "
                  f"{statistics.median(sp28):.2f}x (per-image Python work holds the GIL at "
                  "this size)."]
    return "\n".join(lines) + "\n"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add_reference_arg(ap)
    ap.add_argument("--repeats", type=int, default=11,
                    help="timed passes of each side, ours and the reference alternating "
                         "(default 11)")
    add_output_args(ap, "corruptions")
    args = ap.parse_args(argv)
    if render_only(args, markdown):
        return 0
    mf.set_num_threads(1)
    images = {"rgb": sample_images(2, 224, rgb=True), "gray": sample_images(2, 224, rgb=False)}
    ours = time_ours(images, 0)  # warm-up calls only (timed apart)
    ours_passes, ref_passes, ref = [], [], None
    for _ in range(args.repeats):
        ours_passes.append(time_ours(images, 1, warm_up=False))
        if args.reference_python:
            ref = time_reference(args.reference_python, images, 1)
            ref_passes.append(ref["seconds_per_image"])
    pairs = {}
    for key, row in ours.items():
        o = [p[key]["seconds_per_image"][0] for p in ours_passes]
        entry = {"ours_ms": [1e3 * statistics.median(o), 1e3 * min(o), 1e3 * max(o)],
                 "warmup_s": row["warmup_s"]}
        if ref_passes:
            r = [p[key][0] for p in ref_passes]
            entry["reference_ms"] = [1e3 * statistics.median(r), 1e3 * min(r), 1e3 * max(r)]
            entry["speedup"] = statistics.median(a / b for a, b in zip(r, o))
        pairs[key] = entry
    result = {
        "meta": {"commit": git_commit(), "date": time.strftime("%Y-%m-%d %H:%M:%S"),
                 "machine": f"{platform.machine()} {os.cpu_count()} cores, {cpu_description()}, "
                            f"Python {platform.python_version()}, numpy {np.__version__}",
                 "version": mf.__version__, "repeats": args.repeats,
                 "reference_versions": ref["versions"] if ref else None,
                 "reference_env": REFERENCE_MALLOC if ref else None},
        "pairs": pairs,
        "batch28": batch_throughput(),
        "batch224": batch_throughput(1000, 224, PAIRS_224),
    }
    write_results(args, result, markdown)


if __name__ == "__main__":
    sys.exit(main())
