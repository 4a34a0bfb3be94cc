"""Wide faithfulness cross-check at 224 px: our outputs beside the reference's on many real images.

Not a test (the test suite never runs the reference) and not a timing: a tool run by hand, whose
committed report is evidence that at 224 px medmnistc_fast follows ``medmnistc`` 0.1.0.

Method (see benchmarks/README.md): the distinct real images of ``medmnistc_fast.sample``
(``sample_images(N, 224, rgb)``, duplicates dropped: it cycles through 15 colour and 20 gray
crops). The reference runs in its own venv (``--reference-python``) as a subprocess
(``_reference_harness.py outputs``), through the same per-image DatasetManager pipeline the
timing benchmark uses (``_reference_harness.pipeline``: PIL RGB -> ``apply(img, level - 1)`` ->
``convert('L')`` for gray datasets -> ``np.array``). (dataset, corruption, level) entries whose
corruption, parameters and image kind (RGB or gray) are equal share one reference job (the
reference's parameters of every entry are returned and checked equal to ours and within the
job). motion_blur is run ``--motion-angles`` times per image with ``numpy.random`` seeded per
call; the angle the reference draws is recorded and ours (``functional.motion_blur``) is run at
that angle. Our side runs ``medmnistc_fast.corrupt`` for every (dataset, corruption, level)
entry of the registry separately. Per entry: the largest absolute difference, the fraction of
samples (array elements) that differ and that differ by more than 1, and pass/fail against
design.md section 3: bit-exact for pixelate, JPEG, brightness, contrast, gamma, black_corner;
at most 1 gray level for defocus, gaussian and zoom blur, saturate; motion blur within 1 on at
least 99 % of the samples of every image and at most 2 anywhere. The random corruptions (the
four noises, stain_deposit, bubble, characters) are out of scope: tests/test_golden.py checks
their distributions.

Usage::

    python benchmarks/check_faithfulness.py --reference-python /path/to/REF/bin/python
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
import zlib

import numpy as np

import medmnistc_fast as mf
from medmnistc_fast import functional as F
from _common import (add_output_args, add_reference_arg, cpu_description, distinct_images,
                     git_commit, reference_env, render_only, write_results)

# design.md section 3's tolerances, the table tests/test_golden.py uses (one copy).
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from tests.tolerances import MAX_ABS, MOTION_WITHIN1, RANDOM  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
SIZE = 224

def tolerance(corruption: str) -> str:
    if corruption == "motion_blur":
        return f"<= 1 on >= {MOTION_WITHIN1:.0%} per image, <= {MAX_ABS[corruption]}"
    return "bit-exact" if MAX_ABS[corruption] == 0 else f"<= {MAX_ABS[corruption]}"


def param_list(param) -> list:
    """A severity parameter as a flat list of floats (the harness returns the same form)."""
    return np.asarray(param, float).ravel().tolist()


def plan(motion_angles: int) -> list:
    """One reference job per distinct (corruption, parameters, kind), with its member entries."""
    jobs = {}
    for dataset in mf.DATASETS:
        kind = "rgb" if mf.registry.RGB[dataset] else "gray"
        for corruption in mf.corruptions(dataset):
            if corruption in RANDOM:
                continue
            for level in range(1, mf.registry.N_SEVERITIES + 1):
                param = param_list(mf.registry.TABLES[dataset][corruption][level - 1])
                key = f"{corruption}|{kind}|{param}"
                if key not in jobs:
                    jobs[key] = {"id": f"j{len(jobs):03d}", "dataset": dataset,
                                 "corruption": corruption, "level": level, "kind": kind,
                                 "seed": zlib.crc32(key.encode()) & 0x7FFFFFFF,
                                 "angles": motion_angles if corruption == "motion_blur" else 1,
                                 "members": []}
                jobs[key]["members"].append([dataset, corruption, level])
    return list(jobs.values())


def run_reference(ref_python: str, images: dict, jobs: list):
    """The reference's outputs (``{id}`` and ``{id}__angle`` arrays) and its meta.json."""
    with tempfile.TemporaryDirectory() as tmp:
        np.savez(os.path.join(tmp, "in.npz"), **images)
        with open(os.path.join(tmp, "jobs.json"), "w") as f:
            json.dump(jobs, f)
        subprocess.run([ref_python, os.path.join(HERE, "_reference_harness.py"), "outputs",
                        os.path.join(tmp, "in.npz"), os.path.join(tmp, "jobs.json"), tmp],
                       check=True, env=reference_env())
        with np.load(os.path.join(tmp, "outputs.npz")) as z:
            arrays = {k: z[k] for k in z.files}
        with open(os.path.join(tmp, "meta.json")) as f:
            return arrays, json.load(f)


def ours(imgs: np.ndarray, dataset: str, corruption: str, level: int, angles) -> np.ndarray:
    """Our outputs for the reference's calls: every image, once per recorded angle (motion)."""
    if corruption != "motion_blur":
        return np.stack([mf.corrupt(img, corruption, level, dataset=dataset) for img in imgs])
    radius, sigma = mf.registry.TABLES[dataset][corruption][level - 1]
    return np.stack([F.motion_blur(imgs[i % len(imgs)], radius, sigma, float(angle))
                     for i, angle in enumerate(angles)])


def compare(corruption: str, mine: np.ndarray, ref: np.ndarray, n_images: int) -> dict:
    """Agreement of ``mine`` and ``ref`` (calls, H, W[, C]) and the verdict."""
    if mine.shape != ref.shape:
        raise ValueError(f"{corruption}: our outputs {mine.shape}, the reference's {ref.shape}")
    diff = np.abs(mine.astype(np.int16) - ref.astype(np.int16))
    per_call_max = diff.reshape(len(diff), -1).max(axis=1)
    within1 = (diff <= 1).reshape(len(diff), -1).mean(axis=1)
    worst = int(np.lexsort((-within1, per_call_max))[-1])
    ok = int(diff.max()) <= MAX_ABS[corruption]
    if corruption == "motion_blur":
        ok = ok and float(within1.min()) >= MOTION_WITHIN1
    row = {"max_abs": int(diff.max()), "frac_differ": float(np.mean(diff != 0)),
           "frac_over1": float(np.mean(diff > 1)), "min_within1_per_call": float(within1.min()),
           "calls": len(diff), "histogram": np.bincount(diff.ravel()).tolist(),
           "worst_call": worst, "worst_image": worst % n_images, "pass": bool(ok)}
    if not ok:  # where the worst call differs by more than the tolerance (motion: than 1)
        row["bad_threshold"] = min(MAX_ABS[corruption], 1)
        bad = np.argwhere(diff[worst] > row["bad_threshold"])
        row["worst_call_bad_samples"] = len(bad)
        row["worst_call_bad_bbox"] = (bad.min(axis=0).tolist() + bad.max(axis=0).tolist()
                                      if len(bad) else None)
    return row


def check(images: dict, jobs: list, ref: dict, ref_params: dict) -> dict:
    entries = {}
    for job in jobs:
        imgs = images[job["kind"]]
        angles = ref.get(job["id"] + "__angle")
        for dataset, corruption, level in job["members"]:
            key = f"{dataset}/{corruption}/{level}"
            row = compare(corruption, ours(imgs, dataset, corruption, level, angles),
                          ref[job["id"]], len(imgs))
            row["param"] = param_list(mf.registry.TABLES[dataset][corruption][level - 1])
            row["param_equals_reference"] = row["param"] == ref_params[key]
            row["reference_job"] = job["id"]
            if angles is not None:
                row["worst_call_angle"] = float(angles[row["worst_call"]])
            entries[key] = row
    return {k: entries[k] for k in sorted(entries, key=registry_order)}


def registry_order(key: str) -> tuple:
    """Sort key of "dataset/corruption/level": the registry's dataset and corruption order."""
    dataset, corruption, level = key.split("/")
    return (mf.DATASETS.index(dataset), mf.corruptions(dataset).index(corruption), int(level))


def markdown(result: dict) -> str:
    meta = result["meta"]
    entries = result["entries"]
    n_pass = sum(e["pass"] for e in entries.values())
    worst_key = max(entries, key=lambda k: entries[k]["frac_differ"])
    worst = max(entries.values(), key=lambda e: e["max_abs"])
    lines = [
        "# Faithfulness cross-check at 224 px (ours vs the reference, outputs compared)", "",
        f"Commit {meta['commit']}, {meta['date']}, {meta['machine']}, medmnistc_fast "
        f"{meta['version']}; reference: "
        + ", ".join(f"{k} {v}" for k, v in meta["reference_versions"].items()) + ".", "",
        f"Method: `benchmarks/check_faithfulness.py` (docstring). Inputs: the "
        f"{meta['images']['rgb']} distinct RGB and {meta['images']['gray']} distinct gray "
        f"224 px real images of `medmnistc_fast.sample.sample_images` (it repeats after 15 "
        f"colour and 20 gray crops). The reference runs its DatasetManager per-image pipeline "
        f"(`_reference_harness.pipeline`); {meta['entries']} (dataset, corruption, level) "
        f"entries share {meta['reference_jobs']} reference jobs (same corruption, parameters "
        f"and image kind); ours runs every entry. motion_blur: {meta['motion_angles']} seeded "
        f"reference calls per image, ours at the angle the reference drew. Samples = array "
        f"elements (224 x 224 x 3 per RGB image). Tolerances: design.md section 3. Random "
        f"corruptions ({', '.join(RANDOM)}) are out of scope (tests/test_golden.py checks "
        f"their distributions). Reference side {meta['seconds_reference']:.0f} s, ours "
        f"{meta['seconds_ours']:.0f} s.", "",
        f"**{n_pass} / {len(entries)} (dataset, corruption, level) entries pass.** Severity "
        f"parameters equal to the reference's: "
        f"{sum(e['param_equals_reference'] for e in entries.values())} / {len(entries)}. "
        f"Identical on every sample: {sum(e['max_abs'] == 0 for e in entries.values())} / "
        f"{len(entries)} entries; largest difference anywhere: {worst['max_abs']}; largest "
        f"fraction of samples differing: {100 * worst['frac_differ']:.4f} % ({worst_key}).", "",
        "One row per (dataset, corruption); numbers of its worst level (largest difference, "
        "then lowest per-image fraction within 1).", "",
        "| dataset | corruption | tolerance | levels passing | worst level | max abs diff | "
        "% samples differing | % samples differing by > 1 | worst image: % within 1 |",
        "|---|---|---|---|---|---|---|---|---|"]
    pairs = {}
    for key, e in entries.items():
        d, c, level = key.split("/")
        pairs.setdefault((d, c), []).append((int(level), e))
    failures = []
    for (d, c), rows in pairs.items():
        level, w = max(rows, key=lambda r: (r[1]["max_abs"], -r[1]["min_within1_per_call"]))
        passing = sum(e["pass"] for _, e in rows)
        lines.append(f"| {d} | {c} | {tolerance(c)} | {passing}/{len(rows)} | {level} | "
                     f"{w['max_abs']} | {100 * w['frac_differ']:.3f} | "
                     f"{100 * w['frac_over1']:.4f} | {100 * w['min_within1_per_call']:.2f} |")
        failures += [(f"{d}/{c}/{lv}", e) for lv, e in rows if not e["pass"]]
    if failures:
        lines += ["", "## Failing entries", ""]
        for key, e in failures:
            lines.append(
                f"- {key} (parameter {e['param']}): max abs diff {e['max_abs']}, "
                f"{100 * e['frac_differ']:.3f} % of samples differ, histogram of |diff| "
                f"{e['histogram']}; worst call {e['worst_call']} (image {e['worst_image']}"
                + (f", angle {e['worst_call_angle']:.3f} deg" if "worst_call_angle" in e else "")
                + f"): {e['worst_call_bad_samples']} samples differ by more than "
                  f"{e['bad_threshold']}, in the box "
                  f"(min, max index per axis) {e['worst_call_bad_bbox']}.")
    return "\n".join(lines) + "\n"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add_reference_arg(ap, needed=True)
    ap.add_argument("--n", type=int, default=24,
                    help="images requested per kind from sample_images; repeats are dropped "
                         "(at most 15 RGB and 20 gray are distinct) (default 24)")
    ap.add_argument("--motion-angles", type=int, default=4,
                    help="seeded reference motion_blur calls (angles) per image (default 4)")
    add_output_args(ap, "faithfulness")
    args = ap.parse_args(argv)
    if render_only(args, markdown):
        return 0
    if not args.reference_python:
        ap.error("--reference-python (or MEDMNISTC_REFERENCE_PYTHON) is required")
    images = {"rgb": distinct_images(args.n, SIZE, True),
              "gray": distinct_images(args.n, SIZE, False)}
    jobs = plan(args.motion_angles)
    t0 = time.perf_counter()
    ref, ref_meta = run_reference(args.reference_python, images, jobs)
    t1 = time.perf_counter()
    entries = check(images, jobs, ref, ref_meta["params"])
    result = {
        "meta": {"commit": git_commit(), "date": time.strftime("%Y-%m-%d %H:%M:%S"),
                 "machine": f"{platform.machine()} {os.cpu_count()} cores, {cpu_description()}, "
                            f"Python {platform.python_version()}, numpy {np.__version__}",
                 "version": mf.__version__, "reference_versions": ref_meta["versions"],
                 "images": {k: len(v) for k, v in images.items()}, "requested_n": args.n,
                 "motion_angles": args.motion_angles, "entries": len(entries),
                 "reference_jobs": len(jobs), "seconds_reference": t1 - t0,
                 "seconds_ours": time.perf_counter() - t1},
        "entries": entries,
    }
    write_results(args, result, markdown)
    return 0 if all(e["pass"] for e in entries.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
